/**
 * Shared pieces of the HTTP benchmark (bench/run.ts) and the tools in bench/tools:
 * child-process servers, the gateway configurations, the request bodies and autocannon.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';

export const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
export const REPO_DIR = dirname(BENCH_DIR);

// ---- requests -------------------------------------------------------------------------------

const USER_PATH = '/org/team/alice';
export const CHAT_PATH = '/v1/chat/completions';
const messages = [{ role: 'user', content: 'Say hello in one short sentence.' }];
export const JSON_BODY = JSON.stringify({ model: 'gpt-4o', messages, max_tokens: 32 });
export const STREAM_BODY = JSON.stringify({ model: 'gpt-4o', messages, max_tokens: 32, stream: true });
/**
 * A long stream (bench/long-stream.bench.ts): the fake upstream answers it with `events` content
 * chunks `intervalMs` apart, then the usage chunk the client asks for and [DONE].
 */
export const longStreamBody = (events: number, intervalMs: number): string => JSON.stringify({
  model: 'gpt-4o',
  messages,
  max_tokens: events,
  stream: true,
  stream_options: { include_usage: true },
  metadata: { stream_events: String(events), stream_interval_ms: String(intervalMs) },
});
export const REQUEST_HEADERS: Record<string, string> = {
  'content-type': 'application/json',
  'x-floodgate-user-path': USER_PATH,
};

// ---- child-process servers ------------------------------------------------------------------

export interface ChildServer {
  readonly name: string;
  readonly url: string;
  readonly pid: number;
  /** The process's own accounting (bench/servers/stats.ts), when it was started with STATS_PRELOAD. */
  readonly statsUrl: string | undefined;
  /** CPU seconds (user + system) the process used so far; NaN where /proc is missing. */
  cpuSeconds(): number;
  /** Page faults (minor + major) of the process so far; NaN where /proc is missing. */
  faults(): number;
  stop(): Promise<void>;
}

const CLOCK_TICKS = 100; // USER_HZ: the unit of /proc/<pid>/stat times on Linux

/** Fields of /proc/<pid>/stat from field 3 (state) on; undefined where /proc is missing. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is parenthesised and may hold spaces: count from its closing parenthesis.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** utime + stime of a process from /proc/<pid>/stat, in seconds (10 ms resolution). */
function processCpuSeconds(pid: number): number {
  const fields = statFields(pid);
  // utime is field 14, stime 15.
  return fields === undefined ? Number.NaN : (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** minflt + majflt of a process from /proc/<pid>/stat (fields 10 and 12). */
function processFaults(pid: number): number {
  const fields = statFields(pid);
  return fields === undefined ? Number.NaN : Number(fields[7]) + Number(fields[9]);
}

/**
 * Node flags that load bench/servers/stats.ts into a server: its CPU time, RSS, event-loop delay
 * and GC pauses, reported on a port of its own (ChildServer.statsUrl).
 */
export const STATS_PRELOAD: readonly string[] = ['--import', pathToFileURL(join(BENCH_DIR, 'servers/stats.ts')).href];

/**
 * The gateway's own src/runtime/tick-shape.ts, loaded first into every server the benchmark
 * starts, so the floor proxy, the fake upstream and a baseline checkout hold one
 * `process.nextTick` entry from start-up as the gateway does. Without it V8 builds every tick of a
 * process in its slow path whenever an early full collection falls with no tick pending, which
 * comes and goes from one process to the next: a comparison would measure that, not the code.
 */
const TICK_HOLD: readonly string[] = ['--import', pathToFileURL(join(REPO_DIR, 'src/runtime/tick-shape.ts')).href];

/**
 * Starts `node <script> ...args` and waits for the stdout line `{"port":N}` (after
 * `{"statsPort":N}` with STATS_PRELOAD). `script` is relative to bench/ unless absolute; the
 * child runs in `cwd` (this checkout by default).
 * stderr is passed through (prefixed) so warnings and crashes are visible.
 */
async function startChild(
  name: string,
  script: string,
  args: readonly string[],
  env: Record<string, string>,
  nodeFlags: readonly string[] = [],
  cwd: string = REPO_DIR,
): Promise<ChildServer> {
  const child: ChildProcess = spawn(process.execPath, [...TICK_HOLD, ...nodeFlags, resolve(BENCH_DIR, script), ...args], {
    cwd,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // stderr is passed through, except the config warnings the 10,000-rule file repeats for
  // each of its 2,497 rules on unconfigured providers: those are counted, then summarized.
  let repeated = 0;
  createInterface({ input: child.stderr! }).on('line', (line) => {
    if (line.includes('which is not configured')) {
      if (repeated++ === 0) process.stderr.write(`[${name}] ${line}\n[${name}] (repeats of this warning for other subjects are not shown)\n`);
    } else {
      process.stderr.write(`[${name}] ${line}\n`);
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let statsPort: unknown;
  const port = await new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      let parsed: { port?: unknown; statsPort?: unknown } = {};
      try {
        parsed = JSON.parse(line) as typeof parsed;
      } catch {
        // not a port line
      }
      if (typeof parsed.port === 'number') resolve(parsed.port);
      else if (typeof parsed.statsPort === 'number') statsPort = parsed.statsPort;
      else process.stderr.write(`[${name}] ${line}\n`);
    });
    void exited.then((code) => reject(new Error(`${name} exited with code ${code} before listening`)));
  });
  return {
    name,
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    statsUrl: typeof statsPort === 'number' ? `http://127.0.0.1:${statsPort}` : undefined,
    cpuSeconds: () => processCpuSeconds(child.pid!),
    faults: () => processFaults(child.pid!),
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export const startUpstream = (nodeFlags: readonly string[] = []): Promise<ChildServer> => startChild('upstream', 'servers/fake-upstream.ts', [], {}, nodeFlags);

/** The minimal proxy; `send: 'reply'` answers through fastify's reply, as the gateway does (see floor-proxy.ts). */
export const startFloorProxy = (upstreamUrl: string, nodeFlags: readonly string[] = [], send: 'hijack' | 'reply' = 'hijack'): Promise<ChildServer> =>
  startChild(send === 'reply' ? 'floor proxy (reply)' : 'floor proxy', 'servers/floor-proxy.ts', [], { UPSTREAM_URL: upstreamUrl, FLOOR_SEND: send }, nodeFlags);

// ---- gateway configurations -----------------------------------------------------------------

export type GatewayVariant = 'none' | 'ten' | 'tenThousand' | 'disabled' | 'redisNone' | 'redisTen' | 'tenReserving' | 'redisTenReserving' | 'queue10' | 'redisQueue10' | 'queue1';

/** The Redis the `redis*` variants share their counters in (each process under a prefix of its own). */
export const BENCH_REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

const HUGE = 1_000_000_000; // caps that are never reached during a run

/**
 * The 10 rules that all match the bench request: user-path minute + day windows on the
 * request's path and its ancestors (with a token cap on /org/team), a user-path concurrency
 * cap, provider minute + concurrency, model minute.
 */
function matchingRules(): string {
  return `rate_limits:
  user_paths:
    - path: /
      limits: [{ period: minute, max_requests: ${HUGE} }, { period: day, max_requests: ${HUGE} }]
    - path: /org
      limits: [{ period: minute, max_requests: ${HUGE} }, { period: day, max_requests: ${HUGE} }]
    - path: /org/team
      limits:
        - { period: minute, max_requests: ${HUGE}, max_tokens: ${HUGE} }
        - { period: day, max_requests: ${HUGE} }
        - { period: concurrent, max_requests: ${HUGE} }
`;
}

const TEN_TAIL = (extraProviders: string, extraModels: string): string => `  providers:
    - name: openai
      limits: [{ period: minute, max_requests: ${HUGE} }, { period: concurrent, max_requests: ${HUGE} }]
${extraProviders}  models:
    - model: openai/gpt-4o
      limits: [{ period: minute, max_requests: ${HUGE}, max_tokens: ${HUGE} }]
${extraModels}`;

/** 9,990 rules that share the index with the matching ones but never match the bench request. */
function distractors(count: number): { userPaths: string; providers: string; models: string } {
  let userPaths = '';
  let providers = '';
  let models = '';
  let n = 0;
  for (let i = 0; n < count; i++) {
    userPaths += `    - path: /org/team-${i}\n      limits: [{ period: minute, max_requests: 100 }]\n`;
    if (++n >= count) break;
    userPaths += `    - path: /org/team/user-${i}\n      limits: [{ period: day, max_requests: 100 }]\n`;
    if (++n >= count) break;
    providers += `    - name: openai-${i}\n      limits: [{ period: minute, max_requests: 100 }]\n`;
    if (++n >= count) break;
    models += `    - model: openai/gpt-4o-${i}\n      limits: [{ period: minute, max_requests: 100 }]\n`;
    ++n;
  }
  return { userPaths, providers, models };
}

/** The waiting rows (bench/waiting.bench.ts): one concurrency cap on the provider, its requests waiting for a slot. */
function concurrencyCap(slots: number): string {
  return `rate_limits:
  providers:
    - name: openai
      limits: [{ period: concurrent, max_requests: ${slots} }]
`;
}

function gatewayYaml(variant: GatewayVariant, upstreamUrl: string, sqlitePath: string): string {
  const base = `server:
  host: 127.0.0.1
storage:
  type: sqlite
  sqlite: { path: ${JSON.stringify(sqlitePath)} }
usage:
  enabled: true
providers:
  openai:
    type: openai
    base_url: ${upstreamUrl}/v1
    api_key: sk-bench
    models: [gpt-4o]
`;
  if (variant === 'none' || variant === 'disabled' || variant === 'redisNone') return base;
  if (variant === 'queue10' || variant === 'redisQueue10') return base + concurrencyCap(10);
  if (variant === 'queue1') return base + concurrencyCap(1);
  if (variant === 'ten' || variant === 'redisTen' || variant === 'tenReserving' || variant === 'redisTenReserving') return base + matchingRules() + TEN_TAIL('', '');
  const d = distractors(9_990);
  return base + matchingRules() + d.userPaths + TEN_TAIL(d.providers, d.models);
}

export const GATEWAY_LABELS: Record<GatewayVariant, string> = {
  none: 'no rules',
  ten: '10 matching rules',
  tenThousand: '10,000 rules (10 match)',
  disabled: 'rate limits disabled',
  redisNone: 'no rules, Redis counters',
  redisTen: '10 matching rules, Redis counters',
  tenReserving: '10 matching rules, token reservations',
  redisTenReserving: '10 matching rules, Redis counters, token reservations',
  queue10: 'provider concurrency cap of 10',
  redisQueue10: 'provider concurrency cap of 10, Redis counters',
  queue1: 'provider concurrency cap of 1',
};

/** Deletes the counter keys a gateway left under `prefix` (its day windows would otherwise live two days). */
async function dropRedisPrefix(prefix: string): Promise<void> {
  const client = new Redis(BENCH_REDIS_URL, { lazyConnect: true });
  try {
    await client.connect();
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `{${prefix}}*`, 'COUNT', 1000);
      if (keys.length > 0) await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}

export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((x, y) => x - y);
  const m = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[m]! : (sorted[m - 1]! + sorted[m]!) / 2;
}

/**
 * A gateway in its own process on a fresh temp dir (YAML file + SQLite file). `checkout` runs
 * another copy of the repository instead of this one (bench/tools/compare.ts: a git worktree of
 * an earlier commit, with its own node_modules or a link to these).
 */
export async function startGateway(
  variant: GatewayVariant,
  upstreamUrl: string,
  nodeFlags: readonly string[] = [],
  checkout: string = REPO_DIR,
): Promise<ChildServer & { dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), `floodgate-bench-${variant}-`));
  const file = join(dir, 'floodgate.yaml');
  const sqlitePath = join(dir, 'floodgate.db');
  writeFileSync(file, gatewayYaml(variant, upstreamUrl, sqlitePath));
  const env: Record<string, string> = { SQLITE_PATH: sqlitePath, USAGE_ENABLED: 'true', RATE_LIMITS_ENABLED: variant === 'disabled' ? 'false' : 'true' };
  const redisPrefix = variant.startsWith('redis') ? `floodgate-bench-${randomBytes(4).toString('hex')}:` : undefined;
  if (redisPrefix !== undefined) Object.assign(env, { RATE_LIMITS_BACKEND: 'redis', REDIS_URL: BENCH_REDIS_URL, RATE_LIMITS_REDIS_PREFIX: redisPrefix });
  // Each request's estimate (its prompt counted, plus the default completion) reserved on the two token rules.
  if (variant === 'tenReserving' || variant === 'redisTenReserving') env['RATE_LIMITS_RESERVATIONS'] = 'true';
  const name = `gateway (${GATEWAY_LABELS[variant]}${checkout === REPO_DIR ? '' : ` at ${checkout}`})`;
  const child = await startChild(name, join(checkout, 'bench/servers/gateway.ts'), [file], env, nodeFlags, checkout);
  return {
    ...child,
    dir,
    async stop() {
      await child.stop();
      rmSync(dir, { recursive: true, force: true });
      if (redisPrefix !== undefined) await dropRedisPrefix(redisPrefix);
    },
  };
}

// ---- a baseline checkout ---------------------------------------------------------------------

/** Another revision of this repository checked out to run beside the current code (`--baseline`). */
export interface BaselineCheckout {
  /** As given, e.g. `6c3b28a` or `main~3`. */
  readonly rev: string;
  /** The commit it names. */
  readonly commit: string;
  /** The git worktree, under the system temp dir. */
  readonly dir: string;
  /** `linked` when its package-lock.json is this checkout's (node_modules shared), else `npm ci`. */
  readonly nodeModules: 'linked' | 'npm ci';
  /** Removes the worktree (and the link, never what it points to). */
  remove(): void;
}

function git(args: readonly string[]): { ok: boolean; out: string; err: string } {
  const r = spawnSync('git', ['-C', REPO_DIR, ...args], { encoding: 'utf8' });
  return { ok: r.status === 0, out: r.stdout.trim(), err: r.stderr.trim() };
}

/**
 * A temporary git worktree of `rev`, ready to run: the revision's own bench/servers/gateway.ts
 * starts its gateway (startGateway's `checkout`), so it runs as it did at that commit. Its
 * node_modules is a link to this checkout's when the two package-lock.json are identical, else
 * `npm ci` installs its own (a few minutes). Throws with a clear message when `rev` names no
 * commit or the revision cannot run here.
 */
export function checkoutBaseline(rev: string): BaselineCheckout {
  const resolved = git(['rev-parse', '--verify', '--quiet', `${rev}^{commit}`]);
  if (!resolved.ok) throw new Error(`--baseline: "${rev}" names no commit in ${REPO_DIR}`);
  const commit = resolved.out;
  const launcher = git(['cat-file', '-e', `${commit}:bench/servers/gateway.ts`]);
  if (!launcher.ok) throw new Error(`--baseline: ${rev} has no bench/servers/gateway.ts to start its gateway with`);
  const parent = mkdtempSync(join(tmpdir(), 'floodgate-baseline-'));
  const dir = join(parent, 'checkout');
  const added = git(['worktree', 'add', '--detach', dir, commit]);
  if (!added.ok) {
    rmSync(parent, { recursive: true, force: true });
    throw new Error(`--baseline: git worktree add ${dir} ${rev} failed: ${added.err}`);
  }
  const modules = join(dir, 'node_modules');
  let linked = false;
  const remove = (): void => {
    // Unlinked first: removing the worktree must not reach into this checkout's node_modules.
    if (linked) unlinkSync(modules);
    linked = false;
    const removed = git(['worktree', 'remove', '--force', dir]);
    rmSync(parent, { recursive: true, force: true });
    if (!removed.ok) git(['worktree', 'prune']);
  };
  try {
    const lock = git(['show', `${commit}:package-lock.json`]);
    if (lock.ok && lock.out === readFileSync(join(REPO_DIR, 'package-lock.json'), 'utf8').trim()) {
      symlinkSync(join(REPO_DIR, 'node_modules'), modules, 'dir');
      linked = true;
    } else {
      // This checkout's .bin first: its lifecycle scripts (the dashboard build) need the pinned Node.
      const path = `${join(REPO_DIR, 'node_modules/.bin')}:${process.env['PATH'] ?? ''}`;
      const npm = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir, encoding: 'utf8', env: { ...process.env, PATH: path } });
      if (npm.status !== 0) throw new Error(`--baseline: npm ci in ${dir} failed:\n${`${npm.stdout}\n${npm.stderr}`.trim().split('\n').slice(-20).join('\n')}`);
    }
  } catch (error) {
    remove();
    throw error;
  }
  return { rev, commit, dir, nodeModules: linked ? 'linked' : 'npm ci', remove };
}

// ---- autocannon -----------------------------------------------------------------------------

interface AutocannonHistogram {
  average: number;
  mean: number;
  p50: number;
  p99: number;
  total: number;
}
interface AutocannonResult {
  requests: AutocannonHistogram;
  latency: AutocannonHistogram;
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  duration: number;
}
type Autocannon = (opts: Record<string, unknown>) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

export interface LoadFigures {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  errors: number;
  non2xx: number;
}

export interface LoadOptions {
  /** Sent besides REQUEST_HEADERS. */
  headers?: Record<string, string>;
  /** A request unanswered this long counts as a timeout; default 10. */
  timeoutSeconds?: number;
}

/** One fixed-duration autocannon run POSTing `body`; errors, timeouts and non-2xx are counted. */
export async function load(url: string, body: string, seconds: number, connections: number, options: LoadOptions = {}): Promise<LoadFigures> {
  const r = await autocannon({
    url: url + CHAT_PATH,
    method: 'POST',
    headers: { ...REQUEST_HEADERS, ...options.headers },
    body,
    connections,
    duration: seconds,
    pipelining: 1,
    timeout: options.timeoutSeconds ?? 10,
  });
  return {
    // requests.total / elapsed: counts every answered request, not only whole sampled seconds.
    rps: Math.round(r['2xx'] / r.duration),
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    requests: r.requests.total,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
  };
}

export interface RoundFigures extends LoadFigures {
  /** CPU time of the server process per answered request, microseconds. */
  cpuUsPerRequest: number;
  /**
   * Page faults of the server process per answered request. On virtual machines a fault can cost
   * as much as a whole request, so a run with faults measures memory growth, not requests.
   */
  faultsPerRequest: number;
}

const perRequest = (delta: number, requests: number, digits: number): number => {
  const scale = 10 ** digits;
  return Math.round((delta / Math.max(1, requests)) * scale) / scale;
};

/** One load run against `server` with its CPU time and page faults per answered request. */
export async function measure(server: ChildServer, stream: boolean, seconds: number, connections: number): Promise<RoundFigures> {
  const cpuBefore = server.cpuSeconds();
  const faultsBefore = server.faults();
  const figures = await load(server.url, stream ? STREAM_BODY : JSON_BODY, seconds, connections);
  return {
    ...figures,
    cpuUsPerRequest: perRequest((server.cpuSeconds() - cpuBefore) * 1e6, figures.requests, 1),
    faultsPerRequest: perRequest(server.faults() - faultsBefore, figures.requests, 3),
  };
}

/** Steady state: a 2 s step of load with at most this many page faults per request. */
export const STEADY_FAULTS_PER_REQUEST = 0.05;
const WARM_STEP_SECONDS = 2;
/** Longest warm-up before giving up on steady state. */
export const WARM_MAX_SECONDS = 30;

export interface WarmUp {
  seconds: number;
  /** Faults per request of the last step. */
  faultsPerRequest: number;
  /** Whether the last step was at steady state (false: gave up at `maxSeconds`). */
  steady: boolean;
}

/**
 * Loads a fresh server until it runs at steady state: its heap and buffers grown to their working
 * size, so the measured runs pay for requests, not for first touches of memory: measured while
 * it still grows, a server looks much slower than it is.
 * At least `minSeconds`, then until a step stays under STEADY_FAULTS_PER_REQUEST, at most `maxSeconds`.
 */
export async function warmUp(server: ChildServer, stream: boolean, connections: number, minSeconds: number, maxSeconds = WARM_MAX_SECONDS): Promise<WarmUp> {
  let seconds = 0;
  for (;;) {
    const step = await measure(server, stream, WARM_STEP_SECONDS, connections);
    seconds += WARM_STEP_SECONDS;
    const steady = step.faultsPerRequest <= STEADY_FAULTS_PER_REQUEST;
    if ((steady && seconds >= minSeconds) || seconds >= maxSeconds) return { seconds, faultsPerRequest: step.faultsPerRequest, steady };
  }
}

/** `8 s, then 0.012 faults/req`, flagged when steady state was not reached. */
export function describeWarmUp(warm: WarmUp): string {
  return `${String(warm.seconds).padStart(3)} s, then ${warm.faultsPerRequest} faults/req${warm.steady ? '' : ' (NOT STEADY: gave up)'}`;
}

export interface LoadSide {
  server: ChildServer;
  stream: boolean;
}

/**
 * Unmeasured load before a measured run, on the same sides at once: a process that sat idle for
 * a minute while others were measured starts its run as warm as one measured a moment ago. Idle,
 * V8 gives heap pages back, and the first requests after pay a page fault each to take them again;
 * so the load goes on in short steps until a step runs at steady state, as the warm-up does.
 */
const PRIME_STEP_SECONDS = 1;
const PRIME_MAX_SECONDS = 8;

export async function prime(server: ChildServer, stream: boolean, connections: number): Promise<void> {
  for (let seconds = 0; seconds < PRIME_MAX_SECONDS; seconds += PRIME_STEP_SECONDS) {
    const step = await measure(server, stream, PRIME_STEP_SECONDS, connections);
    if (step.faultsPerRequest <= STEADY_FAULTS_PER_REQUEST) return;
  }
}

/**
 * Loads both sides at the same moment, after the same load unmeasured until both run at steady
 * state; returns a's figures, then b's. The caller alternates `bFirst` round by round: the side
 * started a moment earlier has a small head start.
 */
export async function sideBySide(a: LoadSide, b: LoadSide, seconds: number, connections: number, bFirst: boolean): Promise<[RoundFigures, RoundFigures]> {
  await Promise.all([prime(a.server, a.stream, connections), prime(b.server, b.stream, connections)]);
  const runA = (): Promise<RoundFigures> => measure(a.server, a.stream, seconds, connections);
  const runB = (): Promise<RoundFigures> => measure(b.server, b.stream, seconds, connections);
  if (!bFirst) return Promise.all([runA(), runB()]);
  const [fb, fa] = await Promise.all([runB(), runA()]);
  return [fa, fb];
}

/** One request through `url`, checked: 200, the expected body shape, optional header. */
export async function probe(url: string, stream: boolean, expectHeader?: string): Promise<void> {
  const res = await fetch(url + CHAT_PATH, { method: 'POST', headers: REQUEST_HEADERS, body: stream ? STREAM_BODY : JSON_BODY });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`probe ${url} (stream=${stream}): HTTP ${res.status}: ${text.slice(0, 300)}`);
  if (stream ? !text.includes('data: [DONE]') : !text.includes('"chat.completion"')) {
    throw new Error(`probe ${url} (stream=${stream}): unexpected body: ${text.slice(0, 300)}`);
  }
  if (expectHeader !== undefined && res.headers.get(expectHeader) === null) {
    throw new Error(`probe ${url}: header ${expectHeader} missing (the rate-limit rules did not match)`);
  }
}

// ---- CPU placement --------------------------------------------------------------------------

/**
 * Where the benchmark puts its processes on a machine with 2 cores or more: the load generator
 * and the fake upstream on CPU 0, each server under test on CPU 1. A server then competes with
 * nothing of the benchmark's own for its core, and its requests/s reflect its own cost.
 */
export const LOAD_CPU = 0;
export const SERVER_CPU = 1;

let tasksetChecked: boolean | undefined;

/** Whether processes can be pinned here (Linux `taskset`, at least 2 CPUs). */
export function canPin(): boolean {
  if (tasksetChecked === undefined) {
    tasksetChecked = availableParallelism() >= 2 && spawnSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' }).status === 0;
  }
  return tasksetChecked;
}

/** Pins every thread of `pid` to `cpu` (threads started later inherit it). No-op where pinning is unavailable. */
export function pin(pid: number, cpu: number): void {
  if (!canPin()) return;
  const result = spawnSync('taskset', ['-a', '-pc', String(cpu), String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  if (result.status !== 0) throw new Error(`taskset -a -pc ${cpu} ${pid} failed: ${result.stderr.toString().trim()}`);
}

/**
 * A CPU-controller cgroup per server, all with the same weight: when two servers share a core
 * side by side, each gets half of it whatever its thread count (the kernel shares CPU between
 * threads, and the gateway has a usage-writer thread besides its event loop). cgroup v2 where
 * its cpu controller is enabled, else v1's cpu hierarchy; undefined where neither is writable
 * (not root, no cgroupfs), and the comparison then shares the core between threads.
 */
export interface CpuGroups {
  readonly kind: 'cgroup v2' | 'cgroup v1';
  add(name: string, pid: number): void;
  remove(): void;
}

export function createCpuGroups(): CpuGroups | undefined {
  const v2 = '/sys/fs/cgroup';
  const v1 = '/sys/fs/cgroup/cpu';
  let root: string;
  let kind: CpuGroups['kind'];
  let weightFile: string;
  let weight: string;
  try {
    if (readFileSync(join(v2, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('cpu')) {
      [root, kind, weightFile, weight] = [v2, 'cgroup v2', 'cpu.weight', '100'];
    } else if (existsSync(join(v1, 'cpu.shares'))) {
      [root, kind, weightFile, weight] = [v1, 'cgroup v1', 'cpu.shares', '1024'];
    } else {
      return undefined;
    }
  } catch {
    if (!existsSync(join(v1, 'cpu.shares'))) return undefined;
    [root, kind, weightFile, weight] = [v1, 'cgroup v1', 'cpu.shares', '1024'];
  }
  const created: string[] = [];
  const base = `floodgate-bench-${process.pid}`;
  try {
    const probe = join(root, `${base}-probe`);
    mkdirSync(probe);
    rmdirSync(probe);
  } catch {
    return undefined;
  }
  return {
    kind,
    add(name, pid) {
      const dir = join(root, `${base}-${name}`);
      if (!existsSync(dir)) {
        mkdirSync(dir);
        created.push(dir);
      }
      writeFileSync(join(dir, weightFile), weight);
      writeFileSync(join(dir, 'cgroup.procs'), String(pid));
    },
    remove() {
      // A group can be removed once its processes have exited.
      for (const dir of created.splice(0)) {
        try {
          rmdirSync(dir);
        } catch {
          // still populated (a server that did not exit): left for the system to clean up
        }
      }
    },
  };
}
