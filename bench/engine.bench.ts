/**
 * Micro-benchmark of the rate-limit engine's hot path: admit + release.
 *
 *   node bench/engine.bench.ts            # prints a table
 *   import { runEngineBench } from './engine.bench.ts'   # returns the figures
 *
 * Scenarios: 10 rules that all match one request (user-path minute and day windows on
 * three ancestor paths, a user-path concurrency cap, provider minute + concurrency,
 * model minute), the same 10 matching rules hidden among 10,000, the same 10 over requests from
 * 10,000 distinct children of `/org/team`, and those with the `/org/team` minute rule per-child.
 */
import { fileURLToPath } from 'node:url';
import { MemoryCounterStore } from '../src/counters/memory.ts';
import { RateLimiter } from '../src/ratelimit/index.ts';
import type { AdmissionTarget, RuleDefinition, Scope } from '../src/ratelimit/index.ts';

export interface EngineBenchFigure {
  readonly scenario: string;
  readonly rules: number;
  readonly matching: number;
  readonly ops: number;
  readonly nsPerOp: number;
}

export interface EngineBenchResult {
  readonly figures: readonly EngineBenchFigure[];
  /** ns/op with 10,000 rules divided by ns/op with 10. */
  readonly scaleRatio: number;
  /** ns/op with one of the 10 rules per-child, over 10,000 children, divided by ns/op with 10. */
  readonly perChildRatio: number;
  /** The same, divided by ns/op of the 10 plain rules over the same 10,000 paths: what per-child itself costs. */
  readonly perChildSameTrafficRatio: number;
}

const CREATED = new Date(0);
const HUGE = 1_000_000_000; // caps that are never reached during the run

function rule(scope: Scope, subject: string, periodSeconds: number, maxTokens?: number, perChild?: true): RuleDefinition {
  return { scope, subject, periodSeconds, maxRequests: HUGE, maxTokens, perChild, source: 'config', createdAt: CREATED, updatedAt: CREATED };
}

/** The 10 rules that all match BENCH_TARGET; their caps are never reached. */
export function matchingRules(): RuleDefinition[] {
  return [
    rule('user_path', '/', 60),
    rule('user_path', '/', 86400),
    rule('user_path', '/org', 60),
    rule('user_path', '/org', 86400),
    rule('user_path', '/org/team', 60, HUGE),
    rule('user_path', '/org/team', 86400),
    rule('user_path', '/org/team', 0),
    rule('provider', 'openai', 60),
    rule('provider', 'openai', 0),
    rule('model', 'openai/gpt-4o', 60, HUGE),
  ];
}

/** The 10 matching rules with the `/org/team` minute rule per-child: each child of /org/team has its own counter. */
export function matchingRulesPerChild(): RuleDefinition[] {
  return matchingRules().map((r) => (r.subject === '/org/team' && r.periodSeconds === 60 ? { ...r, perChild: true } : r));
}

/** Requests from 10,000 distinct children of /org/team, through the same provider and model. */
const CHILD_TARGETS = Array.from({ length: 10_000 }, (_, i) => ({ userPath: `/org/team/user-${i}`, provider: 'openai', model: 'gpt-4o' }));

/** Rules that share the index with the matching ones but never match the benchmark request. */
function distractors(count: number): RuleDefinition[] {
  const rules: RuleDefinition[] = [];
  for (let i = 0; rules.length < count; i++) {
    rules.push(rule('user_path', `/org/team-${i}`, 60));
    if (rules.length < count) rules.push(rule('user_path', `/org/team/user-${i}`, 86400));
    if (rules.length < count) rules.push(rule('provider', `openai-${i}`, 60));
    if (rules.length < count) rules.push(rule('model', `openai/gpt-4o-${i}`, 60));
  }
  return rules;
}

export const BENCH_TARGET = { userPath: '/org/team/alice', provider: 'openai', model: 'gpt-4o' } as const;

/** ns per admit + release, each request from the next of `targets` in turn. */
function timeAdmissions(limiter: RateLimiter, ops: number, targets: readonly AdmissionTarget[] = [BENCH_TARGET]): number {
  let refused = 0;
  const start = process.hrtime.bigint();
  for (let i = 0, t = 0; i < ops; i++) {
    const result = limiter.admit(targets[t]!);
    if (++t === targets.length) t = 0;
    if (result instanceof Promise) throw new Error('the memory store answers synchronously');
    if (result.ok) result.release();
    else refused++;
  }
  const elapsed = process.hrtime.bigint() - start;
  if (refused > 0) throw new Error(`benchmark request was refused ${refused} times`);
  return Number(elapsed) / ops;
}

const timeChildAdmissions = (limiter: RateLimiter, ops: number): number => timeAdmissions(limiter, ops, CHILD_TARGETS);

function prepared(rules: RuleDefinition[], time: (limiter: RateLimiter, ops: number) => number = timeAdmissions): RateLimiter {
  const limiter = new RateLimiter({ store: new MemoryCounterStore() });
  limiter.replaceRules(rules);
  time(limiter, 200_000); // warm up: JIT and the match cache
  return limiter;
}

export function runEngineBench(options: { ops?: number; rounds?: number } = {}): EngineBenchResult {
  const ops = options.ops ?? 1_000_000;
  const rounds = options.rounds ?? 5;
  const smallRules = matchingRules();
  const largeRules = [...matchingRules(), ...distractors(9_990)];
  const perChildRules = matchingRulesPerChild();
  const small = prepared(smallRules);
  const large = prepared(largeRules);
  const perChild = prepared(perChildRules, timeChildAdmissions);
  const spread = prepared(smallRules, timeChildAdmissions);
  // Alternate the scenarios round by round and keep each one's best round, so machine
  // noise (GC, other processes) hits all alike instead of skewing the ratios.
  let bestSmall = Infinity;
  let bestLarge = Infinity;
  let bestPerChild = Infinity;
  let bestSpread = Infinity;
  for (let round = 0; round < rounds; round++) {
    bestSmall = Math.min(bestSmall, timeAdmissions(small, ops));
    bestLarge = Math.min(bestLarge, timeAdmissions(large, ops));
    bestSpread = Math.min(bestSpread, timeChildAdmissions(spread, ops));
    bestPerChild = Math.min(bestPerChild, timeChildAdmissions(perChild, ops));
  }
  const figures: EngineBenchFigure[] = [
    { scenario: 'admit+release, 10 rules', rules: smallRules.length, matching: 10, ops, nsPerOp: Math.round(bestSmall) },
    { scenario: 'admit+release, 10,000 rules', rules: largeRules.length, matching: 10, ops, nsPerOp: Math.round(bestLarge) },
    { scenario: 'admit+release, 10 rules, 10,000 paths', rules: smallRules.length, matching: 10, ops, nsPerOp: Math.round(bestSpread) },
    { scenario: 'admit+release, 10 rules (1 per-child), 10,000 children', rules: perChildRules.length, matching: 10, ops, nsPerOp: Math.round(bestPerChild) },
  ];
  const ratio = (ns: number, base = bestSmall): number => Math.round((ns / base) * 100) / 100;
  return { figures, scaleRatio: ratio(bestLarge), perChildRatio: ratio(bestPerChild), perChildSameTrafficRatio: ratio(bestPerChild, bestSpread) };
}

function printTable(result: EngineBenchResult): void {
  const rows = result.figures.map((f) => ({
    scenario: f.scenario,
    rules: f.rules,
    matching: f.matching,
    ops: f.ops,
    'ns/op': f.nsPerOp,
  }));
  console.table(rows);
  console.log(`10,000 rules vs 10 rules: ${result.scaleRatio}x (target <= 1.2x); target < 2000 ns/op`);
  console.log(`1 per-child rule over 10,000 children vs 10 rules: ${result.perChildRatio}x (target <= 1.5x); vs 10 rules over the same 10,000 paths: ${result.perChildSameTrafficRatio}x`);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  printTable(runEngineBench());
}
