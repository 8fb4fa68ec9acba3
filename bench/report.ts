/**
 * Renders a benchmark result file as the markdown tables of docs/performance.md.
 *   node bench/report.ts [bench/results/latest.json]
 */
import { readFileSync } from 'node:fs';

interface Row { label: string; rps: number; p50Ms: number; p99Ms: number; medianCpuUsPerRequest: number; errors: number; non2xx: number; vsFloor: number }
interface Target { target: string; value: number; goal: string; pass: boolean; sideBySideRatios?: number[] }
interface Results {
  date: string;
  machine: { cpuModel: string; cores: number; node: string };
  method: { durationSeconds: number; connections: number; rounds: number; pairRounds: number; instances: number };
  rows: Row[];
  engine: { figures: Array<{ scenario: string; nsPerOp: number }> };
  admission?: { figures: Array<{ store: string; load: string; admissionsPerSecond: number; p50Us: number; p99Us: number }> };
  targets: Target[];
}

const file = process.argv[2] ?? new URL('./results/latest.json', import.meta.url).pathname;
const r = JSON.parse(readFileSync(file, 'utf8')) as Results;
const m = r.method;
const lines: string[] = [
  `Run of ${r.date.slice(0, 16).replace('T', ' ')} UTC: ${r.machine.cpuModel}, ${r.machine.cores} cores, Node ${r.machine.node}; ${m.instances} processes per server, rows ${m.rounds} rounds of ${m.durationSeconds} s at ${m.connections} connections, pairs ${m.pairRounds} rounds.`,
  '',
  '| Row | req/s (best round) | p50 ms | p99 ms | server CPU µs/req | vs floor | errors + non-2xx |',
  '|---|--:|--:|--:|--:|--:|--:|',
  ...r.rows.map((row) => `| ${row.label} | ${row.rps} | ${row.p50Ms} | ${row.p99Ms} | ${row.medianCpuUsPerRequest} | ${row.vsFloor} | ${row.errors + row.non2xx} |`),
  '',
  '| Target | Goal | Side-by-side median (range) | Verdict |',
  '|---|---|--:|---|',
  ...r.targets.map((t) => {
    const range = t.sideBySideRatios === undefined ? '' : ` (${Math.min(...t.sideBySideRatios)}–${Math.max(...t.sideBySideRatios)})`;
    return `| ${t.target} | ${t.goal} | ${t.value}${range} | ${t.pass ? 'PASS' : '**FAIL**'} |`;
  }),
  '',
  ...r.engine.figures.map((f) => `Engine, ${f.scenario}: ${f.nsPerOp} ns.`),
  ...(r.admission === undefined
    ? []
    : [
      '',
      '| Admission (10 rules) | store | admissions/s | p50 µs | p99 µs |',
      '|---|---|--:|--:|--:|',
      ...r.admission.figures.map((f) => `| ${f.load} | ${f.store} | ${f.admissionsPerSecond} | ${f.p50Us} | ${f.p99Us} |`),
    ]),
];
process.stdout.write(`${lines.join('\n')}\n`);
