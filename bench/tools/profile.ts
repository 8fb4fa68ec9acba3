/**
 * CPU profile of the gateway process under load (rows 3 and 4 of bench/run.ts, JSON answers;
 * add --stream for streaming answers). Each gateway runs with `node --cpu-prof`; the profile
 * is written when it exits and summarized by self time (bench/tools/cpuprofile.ts). The profile covers
 * the whole process life: start-up (module compilation, config) shows up as a small fixed part.
 *
 *   node bench/tools/profile.ts [--duration 10] [--connections 50] [--stream] [--keep] [--targets floor,none,ten]
 *   node bench/tools/profile.ts --targets ten,ten@/tmp/fg-base   # a configuration run from another copy of the repository
 *
 * `floor` profiles the minimal fastify + undici proxy the same way: the difference between its
 * CPU time per request and the gateway's is what Floodgate adds.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { printSummary, summarize } from './cpuprofile.ts';
import { JSON_BODY, STREAM_BODY, load, probe, startUpstream } from '../lib.ts';
import { parseTargets, startTarget, targetTitle } from './targets.ts';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    stream: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    top: { type: 'string', default: '25' },
    targets: { type: 'string', default: 'floor,none,ten' },
  },
  strict: true,
});

const targets = parseTargets(values.targets);
const upstream = await startUpstream();
try {
  for (const target of targets) {
    const dir = mkdtempSync(join(tmpdir(), `floodgate-prof-${target.name}-`));
    const gateway = await startTarget(target, upstream.url, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
    let figures;
    let warmupRequests = 0;
    try {
      await probe(gateway.url, values.stream);
      warmupRequests = (await load(gateway.url, values.stream ? STREAM_BODY : JSON_BODY, 2, Number(values.connections))).requests;
      figures = await load(gateway.url, values.stream ? STREAM_BODY : JSON_BODY, Number(values.duration), Number(values.connections));
    } finally {
      await gateway.stop();
    }
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error(`no .cpuprofile written in ${dir}`);
    const summary = summarize(JSON.parse(readFileSync(join(dir, file), 'utf8')), Number(values.top));
    printSummary(`${targetTitle(target)}${values.stream ? ', streaming' : ''} (${figures.rps} req/s under profiling)`, summary, figures.requests + warmupRequests + 1);
    if (values.keep) console.log(`profile kept: ${join(dir, file)}`);
    else rmSync(dir, { recursive: true, force: true });
  }
} finally {
  await upstream.stop();
}
