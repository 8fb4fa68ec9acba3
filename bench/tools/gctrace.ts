/**
 * Summarizes a v8.GCProfiler trace (written by bench/servers/stats.ts with BENCH_PROFILE_DIR, or
 * any `new v8.GCProfiler()` ... `stop()` saved as JSON): collections by type, their cost, what
 * the program allocated between them and what scavenges promoted into the old generation.
 *   node bench/tools/gctrace.ts <gc.json> [events]   (events: per-event figures for that many events)
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface HeapSpace { spaceName: string; spaceUsedSize: number }
interface HeapSnapshotStats { heapStatistics: { usedHeapSize: number; totalHeapSize: number }; heapSpaceStatistics: HeapSpace[] }
interface GcEntry { gcType: string; cost: number; beforeGC: HeapSnapshotStats; afterGC: HeapSnapshotStats }
export interface GcTrace { version: number; startTime: number; endTime: number; statistics: GcEntry[] }

export interface GcSummary {
  windowMs: number;
  byType: Array<{ type: string; count: number; totalMs: number; maxMs: number }>;
  /** Sum of the collections' cost (main-thread time V8 reports for each), ms. */
  totalMs: number;
  /** Heap growth between collections: what the program allocated, bytes. */
  allocatedBytes: number;
  /** Old-generation growth during scavenges: young objects that survived twice, bytes. */
  promotedBytes: number;
  /** Young-generation bytes that survived a scavenge (copied within the young generation or promoted). */
  survivedBytes: number;
  youngCollections: number;
  oldUsedStartBytes: number;
  oldUsedEndBytes: number;
}

const YOUNG = new Set(['new_space', 'new_large_object_space']);
const OLD = new Set(['old_space', 'large_object_space', 'code_space', 'trusted_space']);
const used = (s: HeapSnapshotStats, spaces: Set<string>): number =>
  s.heapSpaceStatistics.reduce((sum, space) => sum + (spaces.has(space.spaceName) ? space.spaceUsedSize : 0), 0);
const isYoung = (type: string): boolean => type === 'Scavenge' || type === 'MinorMarkSweep';

export function summarizeGc(trace: GcTrace): GcSummary {
  const byType = new Map<string, { count: number; totalMs: number; maxMs: number }>();
  let allocated = 0;
  let promoted = 0;
  let survived = 0;
  let young = 0;
  let previousAfter: number | undefined;
  for (const e of trace.statistics) {
    const ms = e.cost / 1000;
    const t = byType.get(e.gcType) ?? { count: 0, totalMs: 0, maxMs: 0 };
    t.count++;
    t.totalMs += ms;
    t.maxMs = Math.max(t.maxMs, ms);
    byType.set(e.gcType, t);
    const before = e.beforeGC.heapStatistics.usedHeapSize;
    if (previousAfter !== undefined) allocated += Math.max(0, before - previousAfter);
    previousAfter = e.afterGC.heapStatistics.usedHeapSize;
    if (isYoung(e.gcType)) {
      young++;
      promoted += Math.max(0, used(e.afterGC, OLD) - used(e.beforeGC, OLD));
      survived += used(e.afterGC, YOUNG) + Math.max(0, used(e.afterGC, OLD) - used(e.beforeGC, OLD));
    }
  }
  const first = trace.statistics[0];
  const last = trace.statistics.at(-1);
  const r = (x: number): number => Math.round(x * 10) / 10;
  return {
    windowMs: trace.endTime - trace.startTime,
    byType: [...byType].map(([type, t]) => ({ type, count: t.count, totalMs: r(t.totalMs), maxMs: r(t.maxMs) })).sort((a, b) => b.totalMs - a.totalMs),
    totalMs: r([...byType.values()].reduce((s, t) => s + t.totalMs, 0)),
    allocatedBytes: allocated,
    promotedBytes: promoted,
    survivedBytes: survived,
    youngCollections: young,
    oldUsedStartBytes: first === undefined ? 0 : used(first.beforeGC, OLD),
    oldUsedEndBytes: last === undefined ? 0 : used(last.afterGC, OLD),
  };
}

/** `windowMs`: the window the trace covers, when known better than by the trace's own times. */
export function printGcSummary(title: string, s: GcSummary, events?: number, windowMs = s.windowMs): void {
  const mb = (b: number): string => `${(b / 2 ** 20).toFixed(1)} MB`;
  const perEvent = (b: number): string => (events ? ` = ${Math.round(b / events)} B/event` : '');
  console.log(`\n=== ${title}: ${Math.round(windowMs)} ms window, GC ${s.totalMs} ms (${((s.totalMs / Math.max(1, windowMs)) * 100).toFixed(1)}% of the window) ===`);
  for (const t of s.byType) console.log(`  ${t.type.padEnd(36)} ${String(t.count).padStart(6)} x  ${String(t.totalMs).padStart(8)} ms  max ${t.maxMs} ms`);
  console.log(`  allocated between collections      ${mb(s.allocatedBytes)}${perEvent(s.allocatedBytes)}`);
  console.log(`  survived young collections         ${mb(s.survivedBytes)}${perEvent(s.survivedBytes)} (${s.youngCollections} young collections)`);
  console.log(`  promoted into the old generation   ${mb(s.promotedBytes)}${perEvent(s.promotedBytes)} (${((s.promotedBytes / Math.max(1, s.allocatedBytes)) * 100).toFixed(1)}% of the allocation)`);
  console.log(`  old generation used                ${mb(s.oldUsedStartBytes)} at the first collection, ${mb(s.oldUsedEndBytes)} after the last`);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = process.argv[2];
  if (!path) throw new Error('usage: node bench/tools/gctrace.ts <gc.json> [events]');
  const events = process.argv[3] === undefined ? undefined : Number(process.argv[3]);
  printGcSummary(path, summarizeGc(JSON.parse(readFileSync(path, 'utf8')) as GcTrace), events);
}
