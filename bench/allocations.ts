/**
 * Bytes allocated per request of gateway configurations, by allocating function: V8's sampling
 * heap profiler with garbage included (`includeObjectsCollectedBy{Minor,Major}GC`), so it sees the
 * short-lived objects of each request, not only what survives. Each sample is scaled by V8 to an
 * estimate of all the bytes allocated at its site; totals repeat to a few percent.
 *
 *   node bench/allocations.ts --targets none,ten                # bytes per request, and what the 10 rules add
 *   node bench/allocations.ts --targets ten,ten@/tmp/fg-base --stream
 *   flags: --seconds N (6) --warmup N (6) --connections N (50) --top N (25) --interval BYTES (256)
 *
 * A target is VARIANT[@CHECKOUT] as in bench/compare.ts. Each gateway is loaded for the warm-up,
 * then profiled during --seconds of load; the profile's bytes are divided by the requests answered
 * in that time. The profiler costs time, so requests/s here mean nothing.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import {
  JSON_BODY, STREAM_BODY, gatewayTarget, load, relativeToCheckout, startGateway, startUpstream, wholeNumber, type ChildServer, type GatewayTarget,
} from './lib.ts';

const { values: flags } = parseArgs({
  options: {
    targets: { type: 'string', default: 'none,ten' },
    stream: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '6' },
    warmup: { type: 'string', default: '6' },
    connections: { type: 'string', default: '50' },
    top: { type: 'string', default: '25' },
    interval: { type: 'string', default: '256' },
  },
  strict: true,
});

const seconds = wholeNumber('seconds', flags.seconds, 1);
const warmup = wholeNumber('warmup', flags.warmup, 0);
const connections = wholeNumber('connections', flags.connections, 1);
const top = wholeNumber('top', flags.top, 1);
const interval = wholeNumber('interval', flags.interval, 1);
const targets = flags.targets.split(',').map((spec, i) => gatewayTarget(`targets[${i}]`, spec.trim()));
const body = flags.stream ? STREAM_BODY : JSON_BODY;

/** A node of V8's SamplingHeapProfile (Chrome DevTools Protocol). */
interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

interface Allocations {
  total: number;
  /** Bytes per request by allocating function (name and place). */
  bySite: Map<string, number>;
}

/** A site named relative to its checkout, so two checkouts' profiles line up. */
function siteName(frame: ProfileNode['callFrame'], checkout: string): string {
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
  if (frame.url === '') return name;
  const place = relativeToCheckout(frame.url, checkout).replace(/^node:/, '');
  return `${name} ${place}:${frame.lineNumber + 1}`;
}

function summarize(root: ProfileNode, requests: number, checkout: string): Allocations {
  const bySite = new Map<string, number>();
  let total = 0;
  const stack = [root];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node.selfSize > 0) {
      const site = siteName(node.callFrame, checkout);
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize / requests);
      total += node.selfSize / requests;
    }
    stack.push(...node.children);
  }
  return { total, bySite };
}

async function profile(target: GatewayTarget, upstreamUrl: string, dir: string): Promise<Allocations> {
  const file = join(dir, `${targets.indexOf(target)}.heapprofile`);
  let server: ChildServer | undefined;
  try {
    const profiling = { BENCH_ALLOCATION_PROFILE: file, BENCH_ALLOCATION_INTERVAL: String(interval) };
    server = await startGateway(target.variant, upstreamUrl, [], target.checkout, profiling);
    if (warmup > 0) await load(server.url, body, warmup, connections);
    process.kill(server.pid, 'SIGUSR2');
    await sleep(100);
    const figures = await load(server.url, body, seconds, connections);
    process.kill(server.pid, 'SIGUSR2');
    for (let waited = 0; !existsSync(file); waited += 100) {
      if (waited > 30_000) throw new Error(`${target.label}: no heap profile after 30 s`);
      await sleep(100);
    }
    if (figures.errors + figures.non2xx > 0) throw new Error(`${target.label}: errors or non-2xx answers while profiling`);
    const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: ProfileNode };
    return summarize(head, figures.requests, target.checkout);
  } finally {
    await server?.stop();
  }
}

const bytes = (n: number): string => Math.round(n).toLocaleString('en-US').padStart(8);

const dir = mkdtempSync(join(tmpdir(), 'floodgate-alloc-'));
const upstream = await startUpstream();
try {
  const results: Allocations[] = [];
  for (const target of targets) {
    const result = await profile(target, upstream.url, dir);
    results.push(result);
    console.log(`\n${target.label}${flags.stream ? ', streaming' : ''}: ${bytes(result.total).trim()} bytes allocated per request`);
    for (const [site, n] of [...result.bySite].sort((x, y) => y[1] - x[1]).slice(0, top)) console.log(`  ${bytes(n)}  ${site}`);
  }
  for (let i = 1; i < results.length; i++) {
    const [base, other] = [results[0]!, results[i]!];
    console.log(`\n${targets[i]!.label} - ${targets[0]!.label}: ${bytes(other.total - base.total).trim()} bytes per request`);
    const sites = new Set([...base.bySite.keys(), ...other.bySite.keys()]);
    const deltas = [...sites].map((site) => [site, (other.bySite.get(site) ?? 0) - (base.bySite.get(site) ?? 0)] as const);
    for (const [site, n] of deltas.sort((x, y) => Math.abs(y[1]) - Math.abs(x[1])).slice(0, top)) console.log(`  ${bytes(n)}  ${site}`);
  }
} finally {
  await upstream.stop();
  rmSync(dir, { recursive: true, force: true });
}
