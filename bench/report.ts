/**
 * Renders a benchmark result file as the markdown tables of docs/performance.md.
 *   node bench/report.ts [bench/results/latest.json]
 */
import { readFileSync } from 'node:fs';

interface Row { label: string; rps: number; p50Ms: number; p99Ms: number; medianCpuUsPerRequest: number; medianFaultsPerRequest: number; errors: number; non2xx: number; vsUpstream: number; vsFloor: number; roundsRps: number[] }
interface Target { target: string; value: number; goal: string; pass: boolean; sideBySideRatios?: number[]; sequentialMedianRatio?: number; cpuRatio?: number }
interface Results {
  date: string;
  machine: { cpuModel: string; cores: number; memoryGb: number; node: string };
  method: { durationSeconds: number; connections: number; rounds: number; pairRounds: number; instances: number; warmup: string; placement: string };
  rows: Row[];
  engine: { figures: Array<{ scenario: string; rules: number; nsPerOp: number }> };
  targets: Target[];
}

const file = process.argv[2] ?? new URL('./results/latest.json', import.meta.url).pathname;
const r = JSON.parse(readFileSync(file, 'utf8')) as Results;
const m = r.method;
const lines: string[] = [];
lines.push(`Run of ${r.date}: ${r.machine.cpuModel}, ${r.machine.cores} cores, ${r.machine.memoryGb} GB, Node ${r.machine.node}. ${m.instances} processes per server under test, taken in turn. Rows: ${m.rounds} rounds of ${m.durationSeconds} s, ${m.connections} connections; pairs: ${m.pairRounds} rounds. Warm-up: ${m.warmup}. Placement: ${m.placement}.`);
lines.push('');
lines.push('| Row | req/s (best round) | p50 ms | p99 ms | errors + non-2xx | vs upstream | vs floor | server CPU µs/req (median) | page faults/req (median) | req/s of each round |');
lines.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|---|');
for (const row of r.rows) {
  lines.push(`| ${row.label} | ${row.rps} | ${row.p50Ms} | ${row.p99Ms} | ${row.errors + row.non2xx} | ${row.vsUpstream} | ${row.vsFloor} | ${row.medianCpuUsPerRequest} | ${row.medianFaultsPerRequest} | ${row.roundsRps.join(' / ')} |`);
}
lines.push('');
lines.push('| Engine (admit + release) | rules | ns/op |');
lines.push('|---|--:|--:|');
for (const f of r.engine.figures) lines.push(`| ${f.scenario} | ${f.rules} | ${f.nsPerOp} |`);
lines.push('');
lines.push('| Target | Goal | Side-by-side median | Side-by-side ratio of each round | Rows phase: paired median | By CPU per request | Verdict |');
lines.push('|---|---|--:|---|--:|--:|---|');
for (const t of r.targets) {
  const rounds = t.sideBySideRatios?.join(', ') ?? '';
  lines.push(`| ${t.target} | ${t.goal} | ${t.value} | ${rounds} | ${t.sequentialMedianRatio ?? ''} | ${t.cpuRatio ?? ''} | **${t.pass ? 'PASS' : 'FAIL'}** |`);
}
process.stdout.write(`${lines.join('\n')}\n`);
