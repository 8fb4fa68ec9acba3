/**
 * The long-stream load generator, a process of its own (bench/long-stream.bench.ts starts it),
 * so its work is not counted as the server's: `concurrency` loops, each POSTing one streamed
 * chat request after another over a keep-alive connection and timing every chunk it reads.
 *
 *   node bench/stream-client.ts '<StreamLoadOptions as JSON>'   -> one line of StreamLoadResult JSON
 *
 * Timeline: the loops start spread over `rampMs` (no stampede of `concurrency` requests at once),
 * then a measurement window of `windowMs` begins. At its start and end the client asks the
 * measured server for its own accounting (`statsUrl`, bench/servers/stats.ts), and samples its
 * RSS in between; the window is the time between those two answers. Streams and events count for
 * the window when they arrive in it; the time to first byte and the worst gap between events are
 * those of the streams started in it. After the window no new stream starts, and the ones in
 * flight are read to their end and checked.
 */
import { connect, type Socket } from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { ServerStats } from './servers/stats.ts';

export interface StreamLoadOptions {
  /** The chat completions URL. */
  url: string;
  headers: Record<string, string>;
  body: string;
  concurrency: number;
  rampMs: number;
  windowMs: number;
  /** The measured server's stats port (bench/servers/stats.ts). */
  statsUrl: string;
  /** SSE events every stream must carry (content chunks, usage chunk, [DONE]). */
  expectedEvents: number;
  /** How long the streams in flight at the end of the window may still take. */
  tailTimeoutMs: number;
}

export interface Distribution {
  count: number;
  p50: number;
  p99: number;
  max: number;
}

export interface StreamLoadResult {
  /** The window's length, from the server's answer to /window/start to its answer to /window/end. */
  windowMs: number;
  /** Streams that ended (whole and correct) inside the window. */
  streamsInWindow: number;
  /** SSE events received inside the window. */
  eventsInWindow: number;
  /** Time from sending the request to the first body byte (the first event), ms. */
  ttfbMs: Distribution;
  /** Per stream, the longest time between two consecutive reads of its body, ms. */
  worstGapMs: Distribution;
  streamsTotal: number;
  /** Requests that failed (socket error, non-200) or streams cut short or malformed. */
  errors: number;
  errorSamples: string[];
  server: { start: ServerStats; end: ServerStats; rssSamples: number[] };
  /** The load generator's own health: a busy client delays what it measures. */
  client: { cpuShare: number; loopDelayP99Ms: number };
}

const NEWLINE = 0x0a;
const DONE = Buffer.from('data: [DONE]');
/** The end of a body kept to check it is [DONE]. */
const TAIL_BYTES = 32;

/** What one streamed request came to. */
interface StreamOutcome {
  /** performance.now() when the request was written, when the first and the last body bytes arrived. */
  started: number;
  first: number;
  last: number;
  /** The longest time between two reads that brought body bytes. */
  worstGap: number;
  /** Complete SSE events in the body (each ends with a blank line). */
  events: number;
  /** Undefined for a complete 200 answer whose body ends with [DONE]. */
  error: string | undefined;
  /** Pairs: performance.now() of a read that brought events, and their count. */
  arrivals: number[];
}

/**
 * One keep-alive HTTP/1.1 connection, one request at a time. Reads the answer itself instead of
 * through node:http: the load generator shares its core with the upstream, and node:http's
 * client costs several times more per chunk than finding the events in the bytes.
 */
class StreamConnection {
  private socket: Socket | undefined;
  private readonly port: number;
  private readonly host: string;
  private readonly request: Buffer;
  // The answer being read.
  private resolve: ((o: StreamOutcome) => void) | undefined;
  private out!: StreamOutcome;
  private phase: 'head' | 'size' | 'data' | 'dataEnd' | 'trailer' | 'length' = 'head';
  private head: Buffer = Buffer.alloc(0);
  private status = 0;
  private keepAlive = true;
  private sizeLine = '';
  private remaining = 0;
  private endedWithNewline = false;
  private tail: Buffer = Buffer.alloc(0);
  private errorText = '';

  constructor(url: URL, request: Buffer) {
    this.host = url.hostname;
    this.port = Number(url.port);
    this.request = request;
  }

  stream(): Promise<StreamOutcome> {
    return new Promise((resolve) => {
      this.resolve = resolve;
      this.out = { started: performance.now(), first: -1, last: -1, worstGap: 0, events: 0, error: undefined, arrivals: [] };
      this.phase = 'head';
      this.head = Buffer.alloc(0);
      this.endedWithNewline = false;
      this.tail = Buffer.alloc(0);
      this.errorText = '';
      this.socketFor().write(this.request);
    });
  }

  close(): void {
    const socket = this.socket;
    this.socket = undefined;
    socket?.destroy();
  }

  private socketFor(): Socket {
    if (this.socket !== undefined) return this.socket;
    const socket = connect({ host: this.host, port: this.port, noDelay: true });
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('error', () => {
      // 'close' follows and ends the answer in flight.
    });
    socket.on('close', () => {
      // A socket closed by this side is no longer this.socket, and ends nothing.
      if (this.socket !== socket) return;
      this.socket = undefined;
      this.finish('connection closed before the end of the answer');
    });
    return (this.socket = socket);
  }

  private finish(error?: string): void {
    const resolve = this.resolve;
    if (resolve === undefined) return;
    this.resolve = undefined;
    const out = this.out;
    if (error !== undefined) out.error = error;
    else if (this.status !== 200) out.error = `HTTP ${this.status}: ${this.errorText.slice(0, 200)}`;
    else if (!this.tail.includes(DONE)) out.error = `stream with ${out.events} events, no [DONE] at its end`;
    if (!this.keepAlive || error !== undefined) this.close();
    resolve(out);
  }

  private body(bytes: Buffer, now: number): void {
    const out = this.out;
    if (this.status !== 200) {
      this.errorText += bytes.toString('utf8');
      return;
    }
    if (out.first < 0) out.first = now;
    else if (now !== out.last) out.worstGap = Math.max(out.worstGap, now - out.last);
    out.last = now;
    // Events end with a blank line; one may end across two reads.
    let n = this.endedWithNewline && bytes[0] === NEWLINE ? 1 : 0;
    for (let i = bytes.indexOf('\n\n'); i >= 0; i = bytes.indexOf('\n\n', i + 2)) n++;
    this.endedWithNewline = bytes[bytes.length - 1] === NEWLINE;
    if (n > 0) {
      out.events += n;
      out.arrivals.push(now, n);
    }
    this.tail = bytes.length >= TAIL_BYTES ? bytes.subarray(-TAIL_BYTES) : Buffer.concat([this.tail, bytes]).subarray(-TAIL_BYTES);
  }

  /** HTTP/1.1 answer parsing: the head, then a chunked body or one of content-length bytes. */
  private read(chunk: Buffer): void {
    if (this.resolve === undefined) return;
    const now = performance.now();
    let i = 0;
    while (i < chunk.length && this.resolve !== undefined) {
      switch (this.phase) {
        case 'head': {
          const joined = this.head.length > 0 ? Buffer.concat([this.head, chunk.subarray(i)]) : chunk.subarray(i);
          const end = joined.indexOf('\r\n\r\n');
          if (end < 0) {
            this.head = Buffer.from(joined);
            return;
          }
          const text = joined.toString('latin1', 0, end).toLowerCase();
          this.status = Number(text.slice(9, 12));
          this.keepAlive = !/\r\nconnection: *close/.test(text);
          const length = /\r\ncontent-length: *(\d+)/.exec(text);
          this.head = Buffer.alloc(0);
          [chunk, i] = [joined, end + 4];
          if (/\r\ntransfer-encoding: *chunked/.test(text)) this.phase = 'size';
          else if (length !== null && Number(length[1]) > 0) [this.phase, this.remaining] = ['length', Number(length[1])];
          else this.finish();
          break;
        }
        case 'size': {
          const nl = chunk.indexOf(NEWLINE, i);
          if (nl < 0) {
            this.sizeLine += chunk.toString('latin1', i);
            return;
          }
          const size = parseInt(this.sizeLine + chunk.toString('latin1', i, nl), 16);
          this.sizeLine = '';
          i = nl + 1;
          if (size === 0) this.phase = 'trailer';
          else [this.phase, this.remaining] = ['data', size];
          break;
        }
        case 'data':
        case 'length': {
          const n = Math.min(this.remaining, chunk.length - i);
          this.body(chunk.subarray(i, i + n), now);
          i += n;
          this.remaining -= n;
          if (this.remaining > 0) break;
          if (this.phase === 'length') this.finish();
          else [this.phase, this.remaining] = ['dataEnd', 2];
          break;
        }
        case 'dataEnd': {
          const n = Math.min(this.remaining, chunk.length - i);
          i += n;
          this.remaining -= n;
          if (this.remaining === 0) this.phase = 'size';
          break;
        }
        case 'trailer': {
          // No trailer fields: the blank line that ends the body.
          const nl = chunk.indexOf(NEWLINE, i);
          if (nl < 0) return;
          i = nl + 1;
          this.finish();
          break;
        }
      }
    }
  }
}

function distribution(xs: number[]): Distribution {
  if (xs.length === 0) return { count: 0, p50: 0, p99: 0, max: 0 };
  const sorted = [...xs].sort((a, b) => a - b);
  // Nearest rank.
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  const r = (x: number): number => Math.round(x * 100) / 100;
  return { count: sorted.length, p50: r(at(0.5)), p99: r(at(0.99)), max: r(sorted.at(-1)!) };
}

async function callStats(statsUrl: string, path: string, method: 'GET' | 'POST'): Promise<ServerStats> {
  const res = await fetch(statsUrl + path, { method });
  if (!res.ok) throw new Error(`${statsUrl}${path}: HTTP ${res.status}`);
  return (await res.json()) as ServerStats;
}

async function run(o: StreamLoadOptions): Promise<StreamLoadResult> {
  const clientLoop = monitorEventLoopDelay({ resolution: 10 });
  const t0 = performance.now();
  const plannedStart = t0 + o.rampMs;
  const plannedEnd = plannedStart + o.windowMs;
  // The window as the server saw it: from the answer to /window/start to the answer to
  // /window/end (its accounting is read just before each answer), not the planned times: a
  // busy server or a first request of this process can answer late.
  let windowStart = Infinity;
  let windowEnd = Infinity;
  let streamsTotal = 0;
  let errors = 0;
  const errorSamples: string[] = [];
  const done: StreamOutcome[] = [];
  const fail = (what: string): void => {
    errors++;
    if (errorSamples.length < 5) errorSamples.push(what);
  };

  const url = new URL(o.url);
  const head = Object.entries({ host: url.host, ...o.headers, 'content-length': String(Buffer.byteLength(o.body)) }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const requestBytes = Buffer.from(`POST ${url.pathname} HTTP/1.1\r\n${head}\r\n${o.body}`);
  const connections: StreamConnection[] = [];

  const loop = async (i: number): Promise<void> => {
    await new Promise((resolve) => setTimeout(resolve, (i * o.rampMs) / o.concurrency));
    const connection = new StreamConnection(url, requestBytes);
    connections.push(connection);
    while (windowEnd === Infinity) {
      const s = await connection.stream();
      streamsTotal++;
      const error = s.error ?? (s.events === o.expectedEvents ? undefined : `stream with ${s.events} events (expected ${o.expectedEvents})`);
      if (error === undefined) {
        done.push(s);
        continue;
      }
      fail(error);
      // A failing server must not turn a loop into a busy one.
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    connection.close();
  };

  let clientFigures: StreamLoadResult['client'] = { cpuShare: 0, loopDelayP99Ms: 0 };
  const at = (t: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, t - performance.now())));
  const measure = async (): Promise<StreamLoadResult['server']> => {
    await at(plannedStart);
    clientLoop.enable();
    const clientCpu = process.cpuUsage();
    const start = await callStats(o.statsUrl, '/window/start', 'POST');
    windowStart = performance.now();
    const rssSamples: number[] = [];
    for (let t = windowStart + 500; t < plannedEnd - 100; t += 500) {
      await at(t);
      rssSamples.push((await callStats(o.statsUrl, '/stats', 'GET')).rssBytes);
    }
    await at(plannedEnd);
    const end = await callStats(o.statsUrl, '/window/end', 'POST');
    windowEnd = performance.now();
    clientLoop.disable();
    const cpu = process.cpuUsage(clientCpu);
    clientFigures = { cpuShare: Math.round(((cpu.user + cpu.system) / 1000 / (windowEnd - windowStart)) * 1000) / 1000, loopDelayP99Ms: Math.round(Math.max(0, clientLoop.percentile(99) / 1e6 - 10) * 100) / 100 };
    return { start, end, rssSamples };
  };

  const loops = Promise.all(Array.from({ length: o.concurrency }, (_, i) => loop(i)));
  const server = await measure();
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), o.tailTimeoutMs).unref());
  if ((await Promise.race([loops, timeout])) === 'timeout') {
    fail(`streams still open ${o.tailTimeoutMs} ms after the window`);
    for (const c of connections) c.close();
  }

  // Streams and events count where they arrived; latencies are those of the streams started in the window.
  const inWindow = (t: number): boolean => t >= windowStart && t < windowEnd;
  let eventsInWindow = 0;
  const ttfb: number[] = [];
  const gaps: number[] = [];
  for (const s of done) {
    for (let k = 0; k < s.arrivals.length; k += 2) if (inWindow(s.arrivals[k]!)) eventsInWindow += s.arrivals[k + 1]!;
    if (inWindow(s.started)) {
      ttfb.push(s.first - s.started);
      gaps.push(s.worstGap);
    }
  }
  return {
    windowMs: Math.round(windowEnd - windowStart),
    streamsInWindow: done.filter((s) => inWindow(s.last)).length,
    eventsInWindow,
    ttfbMs: distribution(ttfb),
    worstGapMs: distribution(gaps),
    streamsTotal,
    errors,
    errorSamples,
    server,
    client: clientFigures,
  };
}

if (import.meta.main) {
  const options = JSON.parse(process.argv[2] ?? '') as StreamLoadOptions;
  process.stdout.write(`${JSON.stringify(await run(options))}\n`);
  // Sockets of streams cut by the tail timeout may linger.
  process.exit(0);
}
