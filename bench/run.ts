/**
 * HTTP benchmark of Floodgate against its ceiling (the upstream alone) and its floor (a minimal
 * fastify + undici proxy), with its counters in memory and in Redis (REDIS_URL, default
 * 127.0.0.1:6379), plus the rate-limit engine and admission-latency micro-benchmarks. See
 * docs/performance.md.
 *
 *   npm run bench                  # 3 processes per server; 5 interleaved rounds of 4 s runs, then 9 side-by-side rounds
 *   npm run bench -- --quick       # 1 process per server, 1 round of 2 s runs, 3 side-by-side rounds (smoke test)
 *   BENCH_DURATION=10 BENCH_CONNECTIONS=100 BENCH_ROUNDS=5 BENCH_PAIR_ROUNDS=9 BENCH_INSTANCES=3 npm run bench
 *   flags: --duration N --connections N --rounds N --pair-rounds N --instances N --warmup N --quick --no-write
 *          --skip-long-streams (the long-stream rows, bench/long-stream.bench.ts: BENCH_LONG_* settings)
 *          --skip-waiting (the waiting rows, bench/waiting.bench.ts: BENCH_WAITING_* settings)
 *          --only ID,ID (these rows, with the ceiling and floor rows, and the pairs among them: e.g.
 *          --only ten,tenReserving,redisTen,redisTenReserving for the reservation targets)
 *   npm run bench -- --baseline 6c3b28a   # also the gateway of another commit, side by side with this code
 *
 * --baseline REV checks REV out in a temporary git worktree (under the system temp dir, removed at
 * the end; node_modules linked to this checkout's when package-lock.json is the same, else `npm
 * ci`), starts its gateway (its own bench/servers/gateway.ts) with no rules, 10 rules and 10 rules
 * on Redis, and adds rows 3@, 4@, 4s@, 4r@ and the pairs "this code / REV" of the 10-rule rows,
 * each with the target >= 0.95.
 *
 * Two phases. Rows: each configuration alone, the table of requests/s and latency. Pairs: the two
 * configurations a target compares, loaded at the same moment on one shared core with equal CPU
 * shares; their requests/s ratio decides the target. Every server runs in its own child process;
 * autocannon runs here. Then the long-stream rows (bench/long-stream.bench.ts): C slow streams at
 * once, each configuration in turn. Then the waiting rows (bench/waiting.bench.ts): requests waiting
 * for a saturated concurrency cap, their wake-up latency and what a waiting request costs in memory.
 * Exits 1 when a run saw an error or a non-2xx answer.
 */
import { cpus, totalmem } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runAdmissionBench, type AdmissionBenchResult } from './admission.bench.ts';
import { runEngineBench, type EngineBenchResult } from './engine.bench.ts';
import { longStreamSettings, printLongStreamTables, runLongStreamBench, type LongStreamResult } from './long-stream.bench.ts';
import { printWaitingTables, runWaitingBench, waitingSettings, type WaitingResult } from './waiting.bench.ts';
import {
  BENCH_DIR, LOAD_CPU, SERVER_CPU, STEADY_FAULTS_PER_REQUEST, WARM_MAX_SECONDS, canPin, checkoutBaseline, createCpuGroups, describeWarmUp, measure, median, pin, prime,
  probe, sideBySide, startFloorProxy, startGateway, startUpstream, warmUp, type BaselineCheckout, type ChildServer, type CpuGroups, type GatewayVariant, type RoundFigures,
  type WarmUp,
} from './lib.ts';

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    duration: { type: 'string' },
    connections: { type: 'string' },
    rounds: { type: 'string' },
    'pair-rounds': { type: 'string' },
    instances: { type: 'string' },
    warmup: { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    'skip-long-streams': { type: 'boolean', default: false },
    'skip-waiting': { type: 'boolean', default: false },
    only: { type: 'string' },
    baseline: { type: 'string' },
  },
  strict: true,
});

function setting(flag: string | undefined, envName: string, normal: number, quick: number): number {
  const raw = flag ?? process.env[envName];
  const value = raw === undefined ? (flags.quick ? quick : normal) : Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${envName}: expected a number, got ${raw}`);
  return value;
}

const DURATION = setting(flags.duration, 'BENCH_DURATION', 4, 2);
const CONNECTIONS = setting(flags.connections, 'BENCH_CONNECTIONS', 50, 50);
const ROUNDS = setting(flags.rounds, 'BENCH_ROUNDS', 5, 1);
const PAIR_ROUNDS = setting(flags['pair-rounds'], 'BENCH_PAIR_ROUNDS', 9, 3);
/**
 * Processes per server under test. Two processes of one configuration can differ by a few
 * percent for their whole life (where their memory landed, what the JIT made of the warm-up):
 * rounds rotate over several, so no single process decides a row or a target.
 */
const INSTANCES = Math.max(1, Math.round(setting(flags.instances, 'BENCH_INSTANCES', 3, 1)));
/** Minimum warm-up per server and answer kind; it goes on until the server is at steady state. */
const WARMUP = setting(flags.warmup, 'BENCH_WARMUP', 4, 2);
const WARMUP_MAX = Math.max(WARMUP, setting(undefined, 'BENCH_WARMUP_MAX', WARM_MAX_SECONDS, 10));
const LONG_STREAMS = flags['skip-long-streams'] ? undefined : longStreamSettings({}, flags.quick);
const WAITING = flags['skip-waiting'] ? undefined : waitingSettings({}, flags.quick);
const BASELINE_REV = flags.baseline;
if (BASELINE_REV !== undefined && BASELINE_REV.trim() === '') throw new Error('--baseline: expected a git revision (a commit, tag or branch), got an empty string');

// ---- rows -----------------------------------------------------------------------------------

/** The baseline revision's gateways (--baseline), by the configuration of this checkout they mirror. */
const BASELINE_SERVERS = { baseNone: 'none', baseTen: 'ten', baseRedisTen: 'redisTen' } as const satisfies Record<string, GatewayVariant>;
type BaselineKey = keyof typeof BASELINE_SERVERS;

type ServerKey = 'upstream' | 'floor' | 'floorReply' | GatewayVariant | BaselineKey;

interface RowSpec {
  id: string;
  label: string;
  server: ServerKey;
  stream: boolean;
}

const BASE_ROWS: RowSpec[] = [
  { id: 'upstream', label: '1. upstream directly (ceiling)', server: 'upstream', stream: false },
  { id: 'floor', label: '2. minimal fastify+undici proxy (floor)', server: 'floor', stream: false },
  { id: 'floorReply', label: '2b. minimal proxy answering through reply', server: 'floorReply', stream: false },
  { id: 'none', label: '3. Floodgate, no rules', server: 'none', stream: false },
  { id: 'disabled', label: '3b. Floodgate, rate limits disabled', server: 'disabled', stream: false },
  { id: 'ten', label: '4. Floodgate, 10 matching rules', server: 'ten', stream: false },
  { id: 'tenThousand', label: '5. Floodgate, 10,000 rules (10 match)', server: 'tenThousand', stream: false },
  { id: 'redisNone', label: '3r. Floodgate, no rules, Redis counters', server: 'redisNone', stream: false },
  { id: 'redisTen', label: '4r. Floodgate, 10 matching rules, Redis counters', server: 'redisTen', stream: false },
  { id: 'tenReserving', label: '4v. Floodgate, 10 matching rules, token reservations', server: 'tenReserving', stream: false },
  { id: 'redisTenReserving', label: '4rv. Floodgate, 10 matching rules, Redis, reservations', server: 'redisTenReserving', stream: false },
  { id: 'upstream-stream', label: '1s. upstream directly, streaming', server: 'upstream', stream: true },
  { id: 'floor-stream', label: '2s. minimal proxy, streaming', server: 'floor', stream: true },
  { id: 'floorReply-stream', label: '2bs. minimal proxy through reply, streaming', server: 'floorReply', stream: true },
  { id: 'none-stream', label: '3s. Floodgate, no rules, streaming', server: 'none', stream: true },
  { id: 'ten-stream', label: '4s. Floodgate, 10 matching rules, streaming', server: 'ten', stream: true },
];

/** The same configurations run from the --baseline revision. */
const BASELINE_ROWS: RowSpec[] = BASELINE_REV === undefined ? [] : [
  { id: 'baseNone', label: `3@. baseline ${BASELINE_REV}, no rules`, server: 'baseNone', stream: false },
  { id: 'baseTen', label: `4@. baseline ${BASELINE_REV}, 10 matching rules`, server: 'baseTen', stream: false },
  { id: 'baseRedisTen', label: `4r@. baseline ${BASELINE_REV}, 10 rules, Redis`, server: 'baseRedisTen', stream: false },
  { id: 'baseTen-stream', label: `4s@. baseline ${BASELINE_REV}, 10 rules, streaming`, server: 'baseTen', stream: true },
];

const ALL_ROWS: RowSpec[] = [...BASE_ROWS, ...BASELINE_ROWS];

/** `--only`: the rows asked for, with the ceiling and floor every row is compared to. */
const ONLY = flags.only === undefined ? undefined : new Set(['upstream', 'floor', 'upstream-stream', 'floor-stream', ...flags.only.split(',').map((id) => id.trim())]);
for (const id of ONLY ?? []) if (!ALL_ROWS.some((row) => row.id === id)) throw new Error(`--only: no row "${id}" (rows: ${ALL_ROWS.map((row) => row.id).join(', ')})`);
const ROWS: RowSpec[] = ONLY === undefined ? ALL_ROWS : ALL_ROWS.filter((row) => ONLY.has(row.id) && (!row.stream || ALL_ROWS.some((r) => r.stream && ONLY.has(r.id) && r.server !== 'upstream' && r.server !== 'floor')));

/**
 * The comparisons the targets make, each measured side by side: both servers at once, under the
 * same load, on one core with equal CPU shares. Whatever the machine's other tenants do at that
 * moment slows both alike, so the ratio of their requests/s is the ratio of their costs.
 */
interface PairSpec {
  target: string;
  /** Row ids: `a` is measured against `b`. */
  a: string;
  b: string;
  /** Ratio a/b must reach this; undefined for the "same within noise" comparison. */
  goal: number | undefined;
}

const BASE_PAIRS: PairSpec[] = [
  { target: 'no rules >= 70% of minimal proxy (row 3 / row 2)', a: 'none', b: 'floor', goal: 0.7 },
  { target: 'no rules >= 60% of minimal proxy, streaming (3s / 2s)', a: 'none-stream', b: 'floor-stream', goal: 0.6 },
  { target: '10 matching rules >= 93% of no rules (row 4 / row 3)', a: 'ten', b: 'none', goal: 0.93 },
  { target: '10 matching rules >= 93% of no rules, streaming (4s / 3s)', a: 'ten-stream', b: 'none-stream', goal: 0.93 },
  { target: '10,000 rules >= 93% of 10 rules (row 5 / row 4)', a: 'tenThousand', b: 'ten', goal: 0.93 },
  { target: '10 matching rules on Redis >= 60% of 10 in memory (row 4r / row 4)', a: 'redisTen', b: 'ten', goal: 0.6 },
  { target: 'no rules vs disabled within noise (3b / 3)', a: 'disabled', b: 'none', goal: undefined },
  { target: '10 matching rules with token reservations >= 90% of without (row 4v / row 4)', a: 'tenReserving', b: 'ten', goal: 0.9 },
  { target: '10 matching rules on Redis with token reservations >= 90% of without (row 4rv / row 4r)', a: 'redisTenReserving', b: 'redisTen', goal: 0.9 },
];

/** This code against the --baseline revision, the same configuration on both sides. */
const BASELINE_PAIRS: PairSpec[] = BASELINE_REV === undefined ? [] : [
  { target: `10 matching rules >= 95% of baseline ${BASELINE_REV} (row 4 / row 4@)`, a: 'ten', b: 'baseTen', goal: 0.95 },
  { target: `10 matching rules >= 95% of baseline ${BASELINE_REV}, streaming (4s / 4s@)`, a: 'ten-stream', b: 'baseTen-stream', goal: 0.95 },
  { target: `10 matching rules on Redis >= 95% of baseline ${BASELINE_REV} (4r / 4r@)`, a: 'redisTen', b: 'baseRedisTen', goal: 0.95 },
];

const PAIRS: PairSpec[] = [...BASE_PAIRS, ...BASELINE_PAIRS].filter((pair) => ROWS.some((row) => row.id === pair.a) && ROWS.some((row) => row.id === pair.b));

interface PairRound {
  a: RoundFigures;
  b: RoundFigures;
  ratio: number;
}

interface RowResult extends RoundFigures {
  /** Median over the rounds of the server's CPU microseconds per request. */
  medianCpuUsPerRequest: number;
  /** Median over the rounds of the server's page faults per request (steady state: about 0). */
  medianFaultsPerRequest: number;
  id: string;
  label: string;
  stream: boolean;
  /** Requests/s of every round, in order; the row's figures are those of its best round. */
  roundsRps: number[];
  vsUpstream: number;
  vsFloor: number;
}

// ---- main -----------------------------------------------------------------------------------

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

const rowById = (id: string): RowSpec => ROWS.find((r) => r.id === id)!;

const flagErrors = (f: RoundFigures): string => (f.errors + f.non2xx > 0 ? `  ERRORS ${f.errors} non2xx ${f.non2xx}` : '');

async function main(): Promise<number> {
  const machine = { cpuModel: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memoryGb: Math.round(totalmem() / 2 ** 30), node: process.version, platform: `${process.platform} ${process.arch}` };
  const pinned = canPin();
  // Children inherit the affinity: the upstream stays with the load generator, servers under test move.
  if (pinned) pin(process.pid, LOAD_CPU);
  const groups: CpuGroups | undefined = pinned ? createCpuGroups() : undefined;
  const placement = pinned
    ? `load generator and upstream on CPU ${LOAD_CPU}, each server under test on CPU ${SERVER_CPU}; side by side: ${groups ? `equal CPU shares per server (${groups.kind})` : 'CPU shared per thread (no writable cgroup here)'}`
    : 'not pinned (needs taskset and 2 CPUs): every process shares every core';
  console.log(`Floodgate benchmark: ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}`);
  console.log(`${INSTANCES} process(es) per server under test, rounds take them in turn; rows: ${ROUNDS} round(s) x ${ROWS.length} rows, ${DURATION} s each; pairs: ${PAIR_ROUNDS} round(s) x ${PAIRS.length} pairs; ${CONNECTIONS} connections per load; warm-up per row: ${WARMUP}-${WARMUP_MAX} s, until <= ${STEADY_FAULTS_PER_REQUEST} page faults/request`);
  if (LONG_STREAMS) console.log(`long streams: ${LONG_STREAMS.shapes.map((sh) => `C=${sh.concurrency} (${sh.events} events every ${sh.intervalMs} ms)`).join(', ')}; ${LONG_STREAMS.rounds} round(s) of ${LONG_STREAMS.windowSeconds} s; rows ${LONG_STREAMS.rows.join(', ')}`);
  if (WAITING) console.log(`waiting: ${WAITING.clients} clients on a concurrency cap, ${WAITING.rounds} round(s) of ${WAITING.durationSeconds} s, memory and Redis; ${WAITING.waiters} requests held for the memory figure`);
  console.log(`placement: ${placement}\n`);

  let baseline: BaselineCheckout | undefined;
  if (BASELINE_REV !== undefined) {
    console.log(`baseline: checking out ${BASELINE_REV} ...`);
    baseline = checkoutBaseline(BASELINE_REV);
    console.log(`baseline: ${BASELINE_REV} = ${baseline.commit} in ${baseline.dir} (node_modules: ${baseline.nodeModules})\n`);
  }
  const baselineFacts = baseline && { rev: baseline.rev, commit: baseline.commit, nodeModules: baseline.nodeModules };
  // An interrupted run still removes the worktree; the servers, its children, get the signal too.
  const removeBaseline = (): void => {
    baseline?.remove();
    baseline = undefined;
  };
  const interrupted = (): void => {
    removeBaseline();
    process.exit(130);
  };
  if (baseline) {
    process.once('SIGINT', interrupted);
    process.once('SIGTERM', interrupted);
  }

  let engine: EngineBenchResult;
  let admission: AdmissionBenchResult;
  try {
    console.log('engine micro-benchmark (admit + release) ...');
    engine = flags.quick ? runEngineBench({ ops: 300_000, rounds: 3 }) : runEngineBench();
    for (const f of engine.figures) console.log(`  ${f.scenario}: ${f.nsPerOp} ns/op`);
    console.log('admission latency, memory and Redis counters ...');
    admission = await runAdmissionBench({ connections: CONNECTIONS, seconds: flags.quick ? 2 : DURATION });
    for (const f of admission.figures) console.log(`  ${f.store.padEnd(6)} ${f.load.padEnd(16)} ${String(f.admissionsPerSecond).padStart(8)} admissions/s  p50 ${f.p50Us} us  p99 ${f.p99Us} us`);
  } catch (err) {
    removeBaseline();
    throw err;
  }

  const servers = new Map<ServerKey, ChildServer[]>();
  /** The process of `key` a round uses: instances in turn, shifted by `offset`. */
  const serverFor = (key: ServerKey, round: number, offset = 0): ChildServer => {
    const list = servers.get(key)!;
    return list[(round + offset) % list.length]!;
  };
  const rows = new Map<string, RoundFigures[]>();
  const pairs = new Map<string, PairRound[]>();
  const warmUps: Array<WarmUp & { row: string; instance: number }> = [];
  let failed = false;
  const note = (f: RoundFigures): void => {
    if (f.errors > 0 || f.non2xx > 0) failed = true;
  };
  try {
    const upstream = await startUpstream();
    servers.set('upstream', [upstream]);
    const keys: ServerKey[] = ['floor', 'floorReply', 'none', 'ten', 'tenThousand', 'disabled', 'redisNone', 'redisTen', 'tenReserving', 'redisTenReserving'];
    if (baseline) keys.push(...Object.keys(BASELINE_SERVERS) as BaselineKey[]);
    // With --only, the servers of the rows asked for alone.
    const used = keys.filter((key) => ROWS.some((row) => row.server === key));
    for (const key of used) {
      const list: ChildServer[] = [];
      for (let i = 0; i < INSTANCES; i++) {
        const server = key === 'floor' || key === 'floorReply'
          ? await startFloorProxy(upstream.url, [], key === 'floor' ? 'hijack' : 'reply')
          : key in BASELINE_SERVERS
            ? await startGateway(BASELINE_SERVERS[key as BaselineKey], upstream.url, [], baseline!.dir)
            : await startGateway(key as GatewayVariant, upstream.url);
        list.push(server);
        pin(server.pid, SERVER_CPU);
        groups?.add(`${key}-${i}`, server.pid);
      }
      servers.set(key, list);
    }
    // Sanity: each target answers 200 with the right body, and the rules really match.
    for (const row of ROWS) {
      const limited = row.server === 'ten' || row.server === 'tenThousand' || row.server === 'redisTen' || row.server === 'tenReserving' || row.server === 'redisTenReserving' || row.server === 'baseTen' || row.server === 'baseRedisTen';
      for (const server of servers.get(row.server)!) await probe(server.url, row.stream, limited ? 'x-ratelimit-limit-requests' : undefined);
    }
    // Each process and answer kind until steady state: a new process first grows its heap and
    // buffers, and every page it touches for the first time costs it a fault (see lib.ts warmUp).
    console.log('warming up ...');
    for (const row of ROWS) {
      const list = servers.get(row.server)!;
      for (const [instance, server] of list.entries()) {
        const warm = await warmUp(server, row.stream, CONNECTIONS, WARMUP, WARMUP_MAX);
        console.log(`  ${row.label.padEnd(46)} #${instance + 1}  ${describeWarmUp(warm)}`);
        warmUps.push({ row: row.id, instance: instance + 1, ...warm });
      }
    }

    // Rows: rounds interleave the rows, each round in a rotated order, so drift in machine load
    // (thermal, other tenants, GC of a long-lived child) spreads over all rows alike.
    console.log('rows (each configuration alone):');
    for (let round = 0; round < ROUNDS; round++) {
      const order = ROWS.map((_, i) => ROWS[(i + round * 3) % ROWS.length]!);
      for (const row of order) {
        const server = serverFor(row.server, round);
        // The ceiling gets the server core too while it is the one measured.
        if (row.server === 'upstream') pin(server.pid, SERVER_CPU);
        await prime(server, row.stream, CONNECTIONS);
        const figures = await measure(server, row.stream, DURATION, CONNECTIONS);
        if (row.server === 'upstream') pin(server.pid, LOAD_CPU);
        console.log(`  round ${round + 1}  ${row.label.padEnd(46)} ${String(figures.rps).padStart(6)} req/s  p50 ${figures.p50Ms} ms  p99 ${figures.p99Ms} ms  server CPU ${figures.cpuUsPerRequest} us/req  ${figures.faultsPerRequest} faults/req${flagErrors(figures)}`);
        note(figures);
        rows.set(row.id, [...(rows.get(row.id) ?? []), figures]);
      }
    }

    // Pairs: both sides of a comparison at the same moment, sharing the server core.
    console.log('\npairs (side by side on one core, equal CPU shares):');
    for (let round = 0; round < PAIR_ROUNDS; round++) {
      const order = PAIRS.map((_, i) => PAIRS[(i + round) % PAIRS.length]!);
      // Side b's instance shifts by one every INSTANCES rounds: INSTANCES^2 rounds meet every
      // process of a with every process of b once.
      const shiftB = Math.floor(round / INSTANCES);
      for (const pair of order) {
        const [rowA, rowB] = [rowById(pair.a), rowById(pair.b)];
        const [a, b] = await sideBySide(
          { server: serverFor(rowA.server, round), stream: rowA.stream },
          { server: serverFor(rowB.server, round, shiftB), stream: rowB.stream },
          DURATION, CONNECTIONS, round % 2 === 1,
        );
        note(a);
        note(b);
        const ratio = a.rps / b.rps;
        const instances = INSTANCES > 1 ? ` #${(round % INSTANCES) + 1}/#${((round + shiftB) % INSTANCES) + 1}` : '';
        console.log(`  round ${round + 1}  ${`${pair.a} / ${pair.b}${instances}`.padEnd(32)} ${String(a.rps).padStart(6)} / ${String(b.rps).padEnd(6)} req/s = ${round3(ratio).toFixed(3)}  (CPU ${a.cpuUsPerRequest} / ${b.cpuUsPerRequest} us/req, faults ${a.faultsPerRequest} / ${b.faultsPerRequest})${flagErrors(a)}${flagErrors(b)}`);
        pairs.set(pair.target, [...(pairs.get(pair.target) ?? []), { a, b, ratio }]);
      }
    }
  } finally {
    await Promise.all([...servers.values()].flat().map((s) => s.stop()));
    groups?.remove();
    removeBaseline();
    process.removeListener('SIGINT', interrupted);
    process.removeListener('SIGTERM', interrupted);
  }

  // Long streams: servers of their own, started fresh (their idle memory is a figure).
  let longStreams: LongStreamResult | undefined;
  if (LONG_STREAMS) {
    console.log('');
    longStreams = await runLongStreamBench(LONG_STREAMS);
    if (!longStreams.ok) failed = true;
  }

  let waiting: WaitingResult | undefined;
  if (WAITING) {
    console.log('');
    waiting = await runWaitingBench(WAITING);
    if (!waiting.ok) failed = true;
  }

  // Best round per row (highest req/s): the least disturbed measurement of each configuration.
  const best = (id: string): RoundFigures => [...rows.get(id)!].sort((a, b) => b.rps - a.rps)[0]!;
  const results: RowResult[] = ROWS.map((row) => {
    const b = best(row.id);
    const all = rows.get(row.id)!;
    const ceiling = best(row.stream ? 'upstream-stream' : 'upstream').rps;
    const floor = best(row.stream ? 'floor-stream' : 'floor').rps;
    return {
      id: row.id,
      label: row.label,
      stream: row.stream,
      ...b,
      errors: all.reduce((s, f) => s + f.errors, 0),
      non2xx: all.reduce((s, f) => s + f.non2xx, 0),
      roundsRps: all.map((f) => f.rps),
      medianCpuUsPerRequest: median(all.map((f) => f.cpuUsPerRequest)),
      medianFaultsPerRequest: median(all.map((f) => f.faultsPerRequest)),
      vsUpstream: round3(b.rps / ceiling),
      vsFloor: round3(b.rps / floor),
    };
  });

  // Secondary estimates, from the rows phase: the same round's runs of the two rows (run
  // minutes apart at most), and the ratio of their median CPU time per request.
  const sequentialPairs = (a: string, b: string): number[] => rows.get(a)!.map((f, i) => f.rps / rows.get(b)![i]!.rps);
  const cpuOf = (id: string): number => results.find((r) => r.id === id)!.medianCpuUsPerRequest;
  const engine10 = engine.figures[0]!.nsPerOp;
  const targets = [
    ...PAIRS.map((pair) => {
      const ratios = pairs.get(pair.target)!.map((p) => p.ratio);
      const value = median(ratios);
      const [low, high] = [Math.min(...ratios), Math.max(...ratios)];
      // "Same within noise": 1.0 lies within the range of the side-by-side ratios (with 9 rounds,
      // a distribution-free ~99.6% confidence interval for the median ratio).
      const pass = pair.goal === undefined ? low <= 1 && high >= 1 : value >= pair.goal;
      return {
        target: pair.target,
        value: round3(value),
        goal: pair.goal === undefined ? `1.0 within [${round3(low)}, ${round3(high)}]` : `>= ${pair.goal}`,
        pass,
        sideBySideRatios: ratios.map(round3),
        sequentialMedianRatio: round3(median(sequentialPairs(pair.a, pair.b))),
        cpuRatio: round3(cpuOf(pair.b) / cpuOf(pair.a)),
      };
    }),
    { target: 'engine admit+release, 10 matching rules < 2 us', value: engine10, goal: '< 2000 ns', pass: engine10 < 2000 },
    {
      // The issue's row without per-child: the same 10 rules over the same 10,000 distinct paths.
      target: 'engine, 1 of the 10 rules per-child over 10,000 children, within 1.5x of the same traffic without per-child',
      value: engine.perChildSameTrafficRatio,
      goal: '<= 1.5',
      pass: engine.perChildSameTrafficRatio <= 1.5,
    },
    {
      target: `admission latency added by Redis at a steady ${admission.rate} requests/s, p50 <= 0.5 ms`,
      value: admission.addedP50Us,
      goal: '<= 500 us',
      pass: admission.addedP50Us <= 500,
    },
    ...(longStreams?.targets ?? []),
    ...(waiting?.targets ?? []),
  ];

  console.log('\nrows, best round of each:');
  console.table(results.map((r) => ({ row: r.label, 'req/s': r.rps, 'p50 ms': r.p50Ms, 'p99 ms': r.p99Ms, 'CPU us/req': r.medianCpuUsPerRequest, 'faults/req': r.medianFaultsPerRequest, 'errors+non2xx': r.errors + r.non2xx, 'vs upstream': r.vsUpstream, 'vs floor': r.vsFloor, rounds: r.roundsRps.join(' / ') })));
  console.table(engine.figures.map((f) => ({ scenario: f.scenario, rules: f.rules, 'ns/op': f.nsPerOp })));
  console.table(admission.figures.map((f) => ({ store: f.store, load: f.load, 'admissions/s': f.admissionsPerSecond, 'p50 us': f.p50Us, 'p99 us': f.p99Us })));
  if (longStreams) printLongStreamTables(longStreams);
  if (waiting) printWaitingTables(waiting);
  console.log('targets (decided side by side; long streams: one configuration after the other in every round):');
  for (const t of targets) {
    const detail = 'sideBySideRatios' in t
      ? ` [side-by-side median of ${t.sideBySideRatios.join(', ')}; rows phase: paired median ${t.sequentialMedianRatio}, by CPU per request ${t.cpuRatio}]`
      : 'roundRatios' in t ? ` [median of the rounds ${t.roundRatios.join(', ')}]`
        : 'roundValues' in t ? ` [median of the rounds ${t.roundValues.join(', ')}]` : '';
    console.log(`  ${t.pass ? 'PASS' : 'FAIL'}  ${t.target}: ${t.value} (${t.goal})${detail}`);
  }
  if (failed) console.error('\nFAIL: some runs saw errors or non-2xx answers (see the runs above)');

  const output = {
    date: new Date().toISOString(),
    machine,
    method: {
      durationSeconds: DURATION,
      connections: CONNECTIONS,
      rounds: ROUNDS,
      pairRounds: PAIR_ROUNDS,
      instances: INSTANCES,
      warmup: `per row (server and answer kind), 2 s steps: at least ${WARMUP} s, then until a step has <= ${STEADY_FAULTS_PER_REQUEST} page faults/request, at most ${WARMUP_MAX} s`,
      warmUps,
      placement,
      rows: 'each configuration alone, interleaved round by round in rotated order; row figures from the best round',
      targets: 'median over rounds of the requests/s ratio of the two configurations loaded side by side on one core with equal CPU shares',
    },
    ...(baselineFacts ? { baseline: { ...baselineFacts, rows: BASELINE_ROWS.map((r) => r.id) } } : {}),
    rows: results,
    pairs: PAIRS.map((pair) => ({ ...pair, rounds: pairs.get(pair.target)!.map((p) => ({ a: p.a, b: p.b, ratio: round3(p.ratio) })) })),
    engine,
    admission,
    ...(longStreams ? { longStreams: { method: longStreams.method, shapes: longStreams.shapes } } : {}),
    ...(waiting ? { waiting: { method: waiting.method, rows: waiting.rows, memory: waiting.memory } } : {}),
    targets,
    ok: !failed,
  };
  if (!flags['no-write']) {
    const dir = join(BENCH_DIR, 'results');
    mkdirSync(dir, { recursive: true });
    // One file, replaced by every run: earlier results are in git history.
    writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(output, null, 2)}\n`);
    console.log('\nwritten: bench/results/latest.json');
  }
  return failed ? 1 : 0;
}

process.exitCode = await main();
