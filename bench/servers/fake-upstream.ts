/**
 * Bench-only fake OpenAI upstream: as fast as node:http allows, fixed answers.
 *   POST /v1/chat/completions            -> small JSON chat completion with usage
 *   POST /v1/chat/completions (stream)   -> short SSE stream: 2 content chunks, a usage chunk, [DONE]
 *   the same with `metadata: { stream_events: "N", stream_interval_ms: "MS" }` (the long-stream
 *   rows): a slow stream, N content chunks MS apart (the first at once), then the usage chunk
 *   (when `stream_options.include_usage` asks for it, as OpenAI does) and [DONE] MS later
 *   the same with `metadata: { answer_after_ms: "MS" }` (the waiting rows): the chat completion
 *   MS after the request arrived; such requests are put on the timeline
 *   GET  /v1/models                      -> model list (the gateway discovers models at start-up)
 *   POST /bench/timeline                 -> `{"arrivals": [...], "completions": [...]}`: when each
 *   delayed request arrived (its headers) and when each answer was written out (performance.now(),
 *   ms, in order), since the last call; the timeline starts again empty
 * Prints `{"port":N}` on stdout once listening on 127.0.0.1.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

const COMPLETION = Buffer.from(JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1700000000,
  model: 'gpt-4o',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! How can I help you today?' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
}));

const chunk = (delta: object, finish: string | null): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1700000000, model: 'gpt-4o', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const STREAM = Buffer.from(
  chunk({ role: 'assistant', content: 'Hello!' }, null) +
  chunk({ content: ' How can I help?' }, 'stop') +
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1700000000, model: 'gpt-4o', choices: [], usage: { prompt_tokens: 12, completion_tokens: 6, total_tokens: 18 } })}\n\n` +
  'data: [DONE]\n\n',
);
const MODELS = Buffer.from(JSON.stringify({ object: 'list', data: [{ id: 'gpt-4o', object: 'model', created: 0, owned_by: 'bench' }] }));

/** The shape of a slow stream, read from the request body; undefined for the short stream. */
function slowShape(body: Buffer): { events: number; intervalMs: number; usage: boolean } | undefined {
  if (!body.includes('"stream_events"')) return undefined;
  const json = JSON.parse(body.toString()) as { metadata?: Record<string, string>; stream_options?: { include_usage?: boolean } };
  const events = Number(json.metadata?.['stream_events']);
  const intervalMs = Number(json.metadata?.['stream_interval_ms']);
  if (!Number.isInteger(events) || events < 1 || !Number.isFinite(intervalMs) || intervalMs < 0) return undefined;
  return { events, intervalMs, usage: json.stream_options?.include_usage === true };
}

/** How long to hold a delayed answer, read from the request body; undefined for an answer at once. */
function answerDelay(body: Buffer): number | undefined {
  if (!body.includes('"answer_after_ms"')) return undefined;
  const delay = Number((JSON.parse(body.toString()) as { metadata?: Record<string, string> }).metadata?.['answer_after_ms']);
  return Number.isFinite(delay) && delay >= 0 ? delay : undefined;
}

/** The waiting rows' timeline, on this process's clock: one clock for both ends of a wake-up. */
let arrivals: number[] = [];
let completions: number[] = [];

const WORD = chunk({ content: ' word' }, null);
const slowChunks = (events: number): Buffer[] => [
  Buffer.from(chunk({ role: 'assistant', content: 'Hello' }, null)),
  ...Array.from({ length: Math.max(0, events - 2) }, () => Buffer.from(WORD)),
  ...(events > 1 ? [Buffer.from(chunk({ content: '.' }, 'stop'))] : []),
];
const slowTail = (events: number, usage: boolean): Buffer => Buffer.from(
  (usage ? `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1700000000, model: 'gpt-4o', choices: [], usage: { prompt_tokens: 12, completion_tokens: events, total_tokens: 12 + events } })}\n\n` : '') +
  'data: [DONE]\n\n',
);
/** Chunks by stream length: every stream of a run has the same, so they are built once. */
const slowCache = new Map<string, { chunks: Buffer[]; tail: Buffer }>();

/**
 * Writes a slow stream, each chunk at its own time (start + k * interval): a late tick (a busy
 * core) delays that chunk, not every chunk after it, as an upstream generating tokens at its
 * own pace would.
 */
function streamSlowly(res: ServerResponse, shape: { events: number; intervalMs: number; usage: boolean }): void {
  const key = `${shape.events}:${shape.usage}`;
  let parts = slowCache.get(key);
  if (parts === undefined) slowCache.set(key, (parts = { chunks: slowChunks(shape.events), tail: slowTail(shape.events, shape.usage) }));
  const { chunks, tail } = parts;
  const start = performance.now();
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = (): void => {
    if (next < chunks.length) res.write(chunks[next++]!);
    else return void res.end(tail);
    timer = setTimeout(tick, Math.max(0, start + next * shape.intervalMs - performance.now()));
  };
  res.writeHead(200, SSE_HEADERS);
  tick();
  res.once('close', () => clearTimeout(timer));
}

const JSON_HEADERS = { 'content-type': 'application/json', 'content-length': String(COMPLETION.length) };
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

const server = createServer((req, res) => {
  const arrivedAt = performance.now();
  if (req.url === '/bench/timeline') {
    const timeline = Buffer.from(JSON.stringify({ arrivals, completions }));
    [arrivals, completions] = [[], []];
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(timeline.length) });
    res.end(timeline);
    return;
  }
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(MODELS.length) });
    res.end(MODELS);
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    // A cheap check instead of JSON.parse: the bench bodies are fixed.
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    const slow = slowShape(body);
    const delay = slow === undefined ? answerDelay(body) : undefined;
    if (delay !== undefined) {
      arrivals.push(arrivedAt);
      const timer = setTimeout(() => {
        res.writeHead(200, JSON_HEADERS);
        res.end(COMPLETION, () => completions.push(performance.now()));
      }, delay);
      res.once('close', () => clearTimeout(timer));
    } else if (slow !== undefined) {
      streamSlowly(res, slow);
    } else if (body.includes('"stream":true')) {
      res.writeHead(200, SSE_HEADERS);
      res.end(STREAM);
    } else {
      res.writeHead(200, JSON_HEADERS);
      res.end(COMPLETION);
    }
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
