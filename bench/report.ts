/**
 * Renders a benchmark result file as the markdown tables of docs/performance.md.
 *   node bench/report.ts [bench/results/latest.json]
 */
import { readFileSync } from 'node:fs';
import type { LongStreamResult } from './long-stream.bench.ts';
import type { WaitingResult } from './waiting.bench.ts';

interface Row { label: string; rps: number; p50Ms: number; p99Ms: number; medianCpuUsPerRequest: number; errors: number; non2xx: number; vsFloor: number }
interface Target { target: string; value: number; goal: string; pass: boolean; sideBySideRatios?: number[]; roundRatios?: number[]; roundValues?: number[] }
interface Results {
  date: string;
  machine: { cpuModel: string; cores: number; node: string };
  method: { durationSeconds: number; connections: number; rounds: number; pairRounds: number; instances: number };
  rows: Row[];
  engine: { figures: Array<{ scenario: string; nsPerOp: number }> };
  admission?: { figures: Array<{ store: string; load: string; admissionsPerSecond: number; p50Us: number; p99Us: number }> };
  longStreams?: Pick<LongStreamResult, 'method' | 'shapes'>;
  waiting?: Pick<WaitingResult, 'method' | 'rows' | 'memory'>;
  targets: Target[];
  /** Present when the run had --baseline: the commit its rows marked @ ran from. */
  baseline?: { rev: string; commit: string };
}

/** One table per shape: medians over the rounds; latency added over the upstream directly. */
function longStreamTables(long: Results['longStreams']): string[] {
  if (long === undefined) return [];
  return long.shapes.flatMap((shape) => [
    `Long streams, C = ${shape.concurrency}, ${shape.events} events every ${shape.intervalMs} ms (medians of ${long.method['rounds']} rounds of ${long.method['windowSeconds']} s; TTFB and gap added over the upstream directly):`,
    '',
    '| Row | streams/s | events/s | server CPU ms / 1k events | KB / stream | TTFB + p50 / p99 ms | worst gap + p50 / p99 ms | event-loop delay p99 ms | GC pauses % | errors |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...shape.rows.map((row) => `| ${row.label} | ${row.streamsPerSecond} | ${row.eventsPerSecond} | ${row.cpuMsPer1000Events} | ${row.memoryKbPerStream} | ${row.ttfbAddedMs.p50} / ${row.ttfbAddedMs.p99} | ${row.worstGapAddedMs.p50} / ${row.worstGapAddedMs.p99} | ${row.loopDelayMs.p99} | ${row.gcPausePct} | ${row.errors} |`),
    '',
  ]);
}

/** The waiting rows (wake-up latency per store) and the memory a waiting request costs. */
function waitingTables(waiting: Results['waiting']): string[] {
  if (waiting === undefined) return [];
  const { method, memory } = waiting;
  return [
    `Waiting for capacity: ${method['clients']} clients sending back to back with \`X-Floodgate-Max-Wait: 30\` on a provider concurrency cap of ${method['cap']}, an upstream answering in ${method['upstreamMs']} ms (medians of ${method['rounds']} rounds of ${method['durationSeconds']} s):`,
    '',
    '| Counters | admissions/s | wake-up p50 ms | wake-up p99 ms | wake-ups | errors + non-2xx |',
    '|---|--:|--:|--:|--:|--:|',
    ...waiting.rows.map((row) => `| ${row.store} | ${row.admissionsPerSecond} | ${row.wakeUpMs.p50} | ${row.wakeUpMs.p99} | ${row.wakeUps} | ${row.errors + row.non2xx} |`),
    '',
    `Memory per waiting request (${memory.waiters} waiting behind a cap of 1, connection and request included): ${(memory.heapBytesPerWaiter / 1024).toFixed(1)} KB of heap, ${(memory.rssBytesPerWaiter / 1024).toFixed(1)} KB of RSS.`,
    '',
  ];
}

const file = process.argv[2] ?? new URL('./results/latest.json', import.meta.url).pathname;
const r = JSON.parse(readFileSync(file, 'utf8')) as Results;
const m = r.method;
const lines: string[] = [
  `Run of ${r.date.slice(0, 16).replace('T', ' ')} UTC: ${r.machine.cpuModel}, ${r.machine.cores} cores, Node ${r.machine.node}; ${m.instances} processes per server, rows ${m.rounds} rounds of ${m.durationSeconds} s at ${m.connections} connections, pairs ${m.pairRounds} rounds.${r.baseline ? ` Rows marked @: the baseline ${r.baseline.rev} (${r.baseline.commit.slice(0, 12)}) in the same run.` : ''}`,
  '',
  '| Row | req/s (best round) | p50 ms | p99 ms | server CPU µs/req | vs floor | errors + non-2xx |',
  '|---|--:|--:|--:|--:|--:|--:|',
  ...r.rows.map((row) => `| ${row.label} | ${row.rps} | ${row.p50Ms} | ${row.p99Ms} | ${row.medianCpuUsPerRequest} | ${row.vsFloor} | ${row.errors + row.non2xx} |`),
  '',
  '| Target | Goal | Side-by-side median (range) | Verdict |',
  '|---|---|--:|---|',
  ...r.targets.map((t) => {
    const ratios = t.sideBySideRatios ?? t.roundRatios ?? t.roundValues;
    const range = ratios === undefined ? '' : ` (${Math.min(...ratios)}–${Math.max(...ratios)})`;
    return `| ${t.target} | ${t.goal} | ${t.value}${range} | ${t.pass ? 'PASS' : '**FAIL**'} |`;
  }),
  '',
  ...longStreamTables(r.longStreams),
  ...waitingTables(r.waiting),
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
