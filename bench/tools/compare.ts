/**
 * Two gateways side by side, measured the way bench/run.ts decides its targets (both loaded at
 * the same moment on the server core, equal CPU shares, alternating start order): for trying a
 * change in a few minutes before a full run.
 *
 *   node bench/tools/compare.ts --a ten --b none                  # two configurations of this checkout
 *   git worktree add /tmp/fg-base HEAD && ln -s "$PWD/node_modules" /tmp/fg-base/node_modules
 *   node bench/tools/compare.ts --a ten --b ten@/tmp/fg-base      # this checkout against a commit
 *   node bench/tools/compare.ts --a none --b none '--a-node-flags=--max-semi-space-size=32'   # node/V8 flags on one side
 *   flags: --stream --rounds N (9) --duration N (4) --connections N (50) --warmup N (4; minimum
 *          seconds, then until steady state as in bench/run.ts) '--a-node-flags=FLAGS' /
 *          '--b-node-flags=FLAGS' (in the = form, as the value starts with --)
 *
 *   node bench/tools/compare.ts --a none --b floor --stream       # a gateway against the minimal proxy
 *   node bench/tools/compare.ts --a floor-reply --b floor --stream # the reply answer path alone against the floor
 *
 * A side is VARIANT[@CHECKOUT]: a configuration of bench/lib.ts (none, ten, tenThousand,
 * disabled), optionally run from another copy of the repository; or `floor`, the minimal proxy, or
 * `floor-reply`, the minimal proxy answering through fastify's reply as the gateway does.
 */
import { parseArgs } from 'node:util';
import {
  GATEWAY_LABELS, LOAD_CPU, SERVER_CPU, WARM_MAX_SECONDS, canPin, createCpuGroups, describeWarmUp, median, pin, probe, sideBySide,
  startFloorProxy, startGateway, startUpstream, warmUp, type ChildServer, type GatewayVariant,
} from '../lib.ts';
import { atCheckout, wholeNumber } from './targets.ts';

const { values: flags } = parseArgs({
  options: {
    a: { type: 'string' },
    b: { type: 'string' },
    stream: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '9' },
    duration: { type: 'string', default: '4' },
    connections: { type: 'string', default: '50' },
    warmup: { type: 'string', default: '4' },
    'a-node-flags': { type: 'string', default: '' },
    'b-node-flags': { type: 'string', default: '' },
  },
  strict: true,
});

/** Extra node flags for one side. */
function nodeFlagList(value: string): string[] {
  return value.split(' ').filter((flag) => flag !== '');
}

type Floor = 'floor' | 'floor-reply';
const FLOORS: readonly string[] = ['floor', 'floor-reply'];

/** A gateway configuration (or the minimal proxy) to run, possibly from another copy of the repository. */
interface GatewayTarget {
  variant: GatewayVariant | Floor;
  /** The repository copy to run (this one by default). */
  checkout: string;
  /** As given: VARIANT[@CHECKOUT]. */
  label: string;
}

/** Parses VARIANT[@CHECKOUT] (e.g. `ten` or `ten@/tmp/fg-base`) given for `--flag`. */
function side(flag: string, spec: string | undefined): GatewayTarget {
  if (spec === undefined) throw new Error(`--${flag}: required, as VARIANT[@CHECKOUT] (e.g. ten or ten@/tmp/fg-base)`);
  const { name: variant, checkout } = atCheckout(spec);
  if (!FLOORS.includes(variant) && !(variant in GATEWAY_LABELS)) {
    throw new Error(`--${flag}: unknown configuration "${variant}" (floor, floor-reply or one of ${Object.keys(GATEWAY_LABELS).join(', ')})`);
  }
  return { variant: variant as GatewayVariant | Floor, checkout, label: spec };
}

const a = side('a', flags.a);
const b = side('b', flags.b);
const rounds = wholeNumber('rounds', flags.rounds, 1);
const seconds = wholeNumber('duration', flags.duration, 1);
const connections = wholeNumber('connections', flags.connections, 1);
const warmup = wholeNumber('warmup', flags.warmup, 0);
const stream = flags.stream;

const pinned = canPin();
if (pinned) pin(process.pid, LOAD_CPU);
const groups = pinned ? createCpuGroups() : undefined;
const servers: ChildServer[] = [];
try {
  const upstream = await startUpstream();
  servers.push(upstream);
  const start = (s: GatewayTarget, nodeFlags: readonly string[]): Promise<ChildServer> =>
    s.variant === 'floor' || s.variant === 'floor-reply'
      ? startFloorProxy(upstream.url, nodeFlags, s.variant === 'floor' ? 'hijack' : 'reply')
      : startGateway(s.variant, upstream.url, nodeFlags, s.checkout);
  const [serverA, serverB] = [await start(a, nodeFlagList(flags['a-node-flags'])), await start(b, nodeFlagList(flags['b-node-flags']))];
  servers.push(serverA, serverB);
  for (const [name, server] of [['a', serverA], ['b', serverB]] as const) {
    pin(server.pid, SERVER_CPU);
    groups?.add(name, server.pid);
    await probe(server.url, stream);
    console.log(`warm-up ${name}: ${describeWarmUp(await warmUp(server, stream, connections, warmup, Math.max(warmup, WARM_MAX_SECONDS)))}`);
  }
  console.log(`${a.label} / ${b.label}${stream ? ', streaming' : ''}: ${rounds} rounds of ${seconds} s, ${connections} connections each${groups ? `, equal CPU shares (${groups.kind})` : ''}`);
  const ratios: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const [fa, fb] = await sideBySide({ server: serverA, stream }, { server: serverB, stream }, seconds, connections, round % 2 === 1);
    if (fa.errors + fa.non2xx + fb.errors + fb.non2xx > 0) throw new Error(`round ${round + 1}: errors or non-2xx answers (a ${fa.errors}+${fa.non2xx}, b ${fb.errors}+${fb.non2xx})`);
    const ratio = fa.rps / fb.rps;
    ratios.push(ratio);
    console.log(`  round ${round + 1}  ${String(fa.rps).padStart(6)} / ${String(fb.rps).padEnd(6)} req/s = ${ratio.toFixed(3)}  (CPU ${fa.cpuUsPerRequest} / ${fb.cpuUsPerRequest} us/req, faults ${fa.faultsPerRequest} / ${fb.faultsPerRequest})`);
  }
  console.log(`median ${median(ratios).toFixed(3)}, range ${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}`);
} finally {
  await Promise.all(servers.map((s) => s.stop()));
  groups?.remove();
}
