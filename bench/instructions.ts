/**
 * Instructions per request of gateway configurations, counted by valgrind's callgrind: unlike
 * requests/s, the count does not move with what else the machine is doing, so two builds or two
 * configurations can be compared to a fraction of a percent on a noisy host.
 *
 *   node bench/instructions.ts --targets none,ten          # the 10-rule cost, by function
 *   node bench/instructions.ts --targets ten,ten@/tmp/fg-base --stream
 *   node bench/instructions.ts --targets floor,none        # what the gateway adds to the floor proxy
 *   node bench/instructions.ts --targets none --callers Megamorphic   # who calls those functions
 *   node bench/instructions.ts --targets none --stream --inclusive 'src/'   # our functions with their callees
 *   flags: --warmup N (3000) --requests N (3000) --top N (30) --callers REGEX --inclusive REGEX
 *
 * A target is VARIANT[@CHECKOUT] as in bench/compare.ts, or `floor` (the minimal proxy). Each gateway runs under callgrind with
 * `node --predictable` (single-threaded V8: the same JIT and GC decisions from run to run) and
 * `--perf-basic-prof` (names for JIT-compiled code). The counters are zeroed after the warm-up
 * and dumped after the measured requests, sent 4 at a time. (Forcing a full collection before
 * counting was tried: it also drops compiled code, and the count then measures the JIT warming up
 * again.) The count of the work itself repeats
 * closely; garbage collection and JIT compilation are counted apart, because how much of them
 * falls among the measured requests depends on timing (how many requests are in flight when a
 * scavenge runs, whether a mark-compact lands inside the window). Under callgrind a gateway runs
 * ~50x slower: ~4 minutes per target with the defaults. Needs valgrind.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import {
  CHAT_PATH, JSON_BODY, REPO_DIR, REQUEST_HEADERS, STREAM_BODY, gatewayEnv, gatewayTarget, gatewayYaml, relativeToCheckout, startUpstream, wholeNumber, type GatewayTarget,
} from './lib.ts';

const { values: flags } = parseArgs({
  options: {
    targets: { type: 'string', default: 'none,ten' },
    stream: { type: 'boolean', default: false },
    warmup: { type: 'string', default: '3000' },
    requests: { type: 'string', default: '3000' },
    top: { type: 'string', default: '30' },
    callers: { type: 'string' },
    inclusive: { type: 'string' },
  },
  strict: true,
});

const warmup = wholeNumber('warmup', flags.warmup, 1);
const measured = wholeNumber('requests', flags.requests, 1);
const top = wholeNumber('top', flags.top, 1);
/** Functions whose callers to list (callgrind_annotate --tree=caller), e.g. V8's megamorphic IC builtins. */
const callersOf = flags.callers === undefined ? undefined : new RegExp(flags.callers);
/** Functions to list with everything they call (callgrind_annotate --inclusive=yes), e.g. the gateway's own steps. */
const inclusiveOf = flags.inclusive === undefined ? undefined : new RegExp(flags.inclusive);
const CONCURRENCY = 4;
/** Garbage collection (both generations, with write barriers and heap iteration): varies with timing. */
const GC = /Scaveng|Marking|MarkCompact|MarkBit|Evacuate|RecordMigrated|RecordWrite|WriteBarrier|Sweeper|LiveObjectVisitor|PointersUpdating|NeedsResetDueToFlushedBytecode|RememberedSet|StringTableCleaner|JSDispatchTable::Mark|OnMoveEvent|IteratePointers|BodyDescriptor|SizeFromMap|IterateObjectCache|ObjectVisitor|MemoryChunk|PageMetadata|heap::base|Heap::|MemoryAllocator|ReadOnlyRoots/;
/** JIT compilation, which also runs when it runs. */
const COMPILE = /v8::internal::compiler::|maglev|Maglev|turboshaft|Turboshaft|Pipeline|LinearScanAllocator|Assembler|InstructionSelector/;
/** Frames that only enclose others (callgrind_annotate shows them with their callees' cost). */
const ENCLOSING = /SpinEventLoop|libc-start|below main|^main$|node::Start|NodeMainInstance|clone\.S|start_thread|Worker::Run|StartThread/;

interface Counts {
  /** Instructions per request of the work itself, by function; JIT code named from the perf map. */
  byFunction: Map<string, number>;
  total: number;
  gc: number;
  compile: number;
  /** For --callers: per matching function, its callers with the instructions per request spent through each. */
  callers: Map<string, Map<string, number>>;
  /** For --inclusive: per matching function, instructions per request in it and its callees. */
  inclusive: Map<string, number>;
}

/** A function's line in callgrind_annotate's listing: its cost and its name column. */
const COST_LINE = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(?!PROGRAM TOTALS)(\S.*)$/;

/** Self cost per function from a callgrind dump, JIT addresses resolved through /tmp/perf-<pid>.map. */
function readDump(file: string, pid: number, requests: number, checkout: string): Counts {
  const mapFile = `/tmp/perf-${pid}.map`;
  const nameAt = existsSync(mapFile) ? jitNames(readFileSync(mapFile, 'utf8')) : (): undefined => undefined;
  rmSync(mapFile, { force: true });
  /** A callgrind_annotate function column without its object file and unknown-file prefix. */
  const bare = (column: string): string => column.replace(/\s*\[\/.*\]$/, '').replace(/^\?\?\?:/, '');
  /** The same, readable: JIT addresses resolved, paths relative to the checkout. */
  const readable = (column: string): string => {
    let name = bare(column);
    const address = /^0x([0-9a-f]+)/.exec(name);
    if (address) name = nameAt(parseInt(address[1]!, 16)) ?? name;
    return relativeToCheckout(name.replace(/^JS:[*+~^]?'?/, 'JS '), checkout).slice(0, 110);
  };
  const annotate = (...args: string[]): string => {
    const run = spawnSync('callgrind_annotate', ['--threshold=100', ...args, file], { encoding: 'utf8', maxBuffer: 1 << 28 });
    if (run.status !== 0) throw new Error(`callgrind_annotate failed: ${run.stderr}`);
    return run.stdout;
  };
  const byFunction = new Map<string, number>();
  let total = 0;
  let gc = 0;
  let compile = 0;
  for (const line of annotate().split('\n')) {
    const match = COST_LINE.exec(line);
    if (!match) continue;
    const raw = bare(match[2]!);
    if (ENCLOSING.test(raw) || /^0x0+1ab70$/.test(raw)) continue;
    const name = readable(match[2]!);
    const perRequest = Number(match[1]!.replace(/,/g, '')) / requests;
    if (GC.test(name)) {
      gc += perRequest;
      continue;
    }
    if (COMPILE.test(name)) {
      compile += perRequest;
      continue;
    }
    total += perRequest;
    byFunction.set(name, (byFunction.get(name) ?? 0) + perRequest);
  }
  const inclusive = new Map<string, number>();
  if (inclusiveOf !== undefined) {
    for (const line of annotate('--inclusive=yes').split('\n')) {
      const match = COST_LINE.exec(line);
      if (!match) continue;
      const name = readable(match[2]!);
      if (inclusiveOf.test(name)) inclusive.set(name, (inclusive.get(name) ?? 0) + Number(match[1]!.replace(/,/g, '')) / requests);
    }
  }
  return { byFunction, total, gc, compile, callers: callersOf === undefined ? new Map() : readCallers(annotate('--tree=caller'), readable, requests), inclusive };
}

/** Bytes of address space per bucket of the JIT name lookup. */
const JIT_PAGE = 4096;

/**
 * Names of JIT-compiled code by address, from a `--perf-basic-prof` map. V8 appends a line for
 * every piece of code it creates and never removes one, so an address freed by the collector
 * and reused has several lines; the last one is the code there now, the code the counted
 * requests ran. (A sorted binary search picked any of them, and named a hot function after
 * code long gone, e.g. type stripping from start-up.)
 */
function jitNames(map: string): (address: number) => string | undefined {
  const entries: Array<{ start: number; end: number; name: string }> = [];
  for (const line of map.split('\n')) {
    const [start, size, ...name] = line.split(' ');
    if (!start || !size) continue;
    const from = parseInt(start, 16);
    entries.push({ start: from, end: from + parseInt(size, 16), name: name.join(' ') });
  }
  // Each page lists the entries touching it, in the map's order.
  const pages = new Map<number, number[]>();
  entries.forEach((entry, i) => {
    for (let page = Math.floor(entry.start / JIT_PAGE); page <= Math.floor((entry.end - 1) / JIT_PAGE); page++) {
      const list = pages.get(page);
      if (list === undefined) pages.set(page, [i]);
      else list.push(i);
    }
  });
  return (address) => {
    const list = pages.get(Math.floor(address / JIT_PAGE));
    if (list === undefined) return undefined;
    for (let i = list.length - 1; i >= 0; i--) {
      const entry = entries[list[i]!]!;
      if (address >= entry.start && address < entry.end) return entry.name;
    }
    return undefined;
  };
}

/**
 * From `callgrind_annotate --tree=caller`: each function block lists its callers (`<` lines, the
 * cost spent through that call) above the function itself (the `*` line).
 */
function readCallers(tree: string, readable: (column: string) => string, requests: number): Map<string, Map<string, number>> {
  const found = new Map<string, Map<string, number>>();
  let pending: Array<[string, number]> = [];
  for (const line of tree.split('\n')) {
    const match = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+([<*])\s+(.*?)(?: \(\d+x\))?(?: \[.*\])?$/.exec(line);
    if (!match) {
      pending = [];
      continue;
    }
    const cost = Number(match[1]!.replace(/,/g, '')) / requests;
    if (match[2] === '<') {
      pending.push([readable(match[3]!), cost]);
      continue;
    }
    const name = readable(match[3]!);
    if (callersOf!.test(name)) {
      const callers = found.get(name) ?? new Map<string, number>();
      for (const [caller, n] of pending) callers.set(caller, (callers.get(caller) ?? 0) + n);
      found.set(name, callers);
    }
    pending = [];
  }
  return found;
}

/** A gateway configuration, or the floor proxy of bench/servers/floor-proxy.ts. */
type Target = GatewayTarget | { variant: 'floor'; checkout: string; label: string };

/** The server script, its arguments and environment for a target, with its files in `dir`. */
function serverCommand(t: Target, upstreamUrl: string, dir: string): { args: string[]; env: Record<string, string> } {
  if (t.variant === 'floor') return { args: [join(t.checkout, 'bench/servers/floor-proxy.ts')], env: { UPSTREAM_URL: upstreamUrl } };
  const config = join(dir, 'floodgate.yaml');
  const sqlitePath = join(dir, 'floodgate.db');
  writeFileSync(config, gatewayYaml(t.variant, upstreamUrl, sqlitePath));
  return { args: [join(t.checkout, 'bench/servers/gateway.ts'), config], env: { LOG_LEVEL: 'warn', ...gatewayEnv(t.variant, sqlitePath) } };
}

async function countTarget(t: Target, upstreamUrl: string): Promise<Counts> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-instructions-'));
  try {
    const server = serverCommand(t, upstreamUrl, dir);
    const dump = join(dir, 'callgrind.out');
    const child = spawn(
      'valgrind',
      ['--tool=callgrind', `--callgrind-out-file=${dump}`, process.execPath, '--predictable', '--perf-basic-prof', ...server.args],
      { cwd: t.checkout, env: { ...process.env, ...server.env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    const port = await new Promise<number>((done, fail) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const found = /^\{"port":(\d+)\}$/.exec(line);
        if (found) done(Number(found[1]));
      });
      void exited.then(() => fail(new Error(`${t.label}: the server exited under valgrind before listening:\n${stderr}`)));
    });
    const agent = new Agent({ connections: CONCURRENCY });
    const body = flags.stream ? STREAM_BODY : JSON_BODY;
    const send = async (n: number): Promise<void> => {
      let started = 0;
      const worker = async (): Promise<void> => {
        while (started < n) {
          started++;
          const res = await request(`http://127.0.0.1:${port}${CHAT_PATH}`, { method: 'POST', headers: REQUEST_HEADERS, body, dispatcher: agent });
          const text = await res.body.text();
          if (res.statusCode !== 200) throw new Error(`${t.label}: HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    };
    const pid = String(child.pid);
    try {
      await send(warmup);
      spawnSync('callgrind_control', ['--zero', pid], { stdio: 'ignore' });
      await send(measured);
      spawnSync('callgrind_control', ['--dump', pid], { stdio: 'ignore' });
    } finally {
      await agent.close();
      child.kill('SIGTERM');
      await exited;
    }
    // The --dump above is part 1; the exit writes the rest (shutdown) as part 2.
    const file = `${dump}.1`;
    if (!existsSync(file)) throw new Error(`${t.label}: no callgrind dump at ${file} (is callgrind_control on PATH?)`);
    return readDump(file, child.pid!, measured, t.checkout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const pad = (n: number, width = 9): string => Math.round(n).toLocaleString('en-US').padStart(width);

const targets: Target[] = flags.targets.split(',').map((spec) => (spec === 'floor' ? { variant: 'floor', checkout: REPO_DIR, label: 'floor' } : gatewayTarget('targets', spec)));
if (spawnSync('valgrind', ['--version']).status !== 0) throw new Error('valgrind is not installed (apt-get install valgrind)');
const upstream = await startUpstream();
const results: Counts[] = [];
try {
  for (const t of targets) {
    console.log(`${t.label}${flags.stream ? ', streaming' : ''}: ${warmup} warm-up requests, then ${measured} counted, under callgrind ...`);
    const counts = await countTarget(t, upstream.url);
    results.push(counts);
    console.log(`  ${pad(counts.total)} instructions/request, + ${pad(counts.gc, 0)} in garbage collection, + ${pad(counts.compile, 0)} in JIT compilation`);
    for (const [name, n] of [...counts.byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${pad(n)}  ${name}`);
    for (const [name, callers] of counts.callers) {
      console.log(`  callers of ${name}:`);
      for (const [caller, n] of [...callers].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`    ${pad(n)}  ${caller}`);
    }
    if (counts.inclusive.size > 0) console.log('  with their callees:');
    for (const [name, n] of [...counts.inclusive].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`    ${pad(n)}  ${name}`);
  }
} finally {
  await upstream.stop();
}
for (let i = 1; i < targets.length; i++) {
  const [a, b] = [results[0]!, results[i]!];
  console.log(`\n${targets[i]!.label} vs ${targets[0]!.label}: ${pad(b.total - a.total, 0)} instructions/request (${(b.total / a.total).toFixed(4)}x); garbage collection ${pad(b.gc - a.gc, 0)}; by function:`);
  const names = new Set([...a.byFunction.keys(), ...b.byFunction.keys()]);
  const deltas = [...names].map((name) => [name, (b.byFunction.get(name) ?? 0) - (a.byFunction.get(name) ?? 0)] as const);
  for (const [name, delta] of deltas.sort((x, y) => Math.abs(y[1]) - Math.abs(x[1])).slice(0, top)) console.log(`  ${pad(delta)}  ${name}`);
}
