/**
 * Aggregates a V8 .cpuprofile (node --cpu-prof) by self time: per function and per file/package.
 *   node bench/tools/cpuprofile.ts <file.cpuprofile> [topN]
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface CallFrame { functionName: string; url: string; lineNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame; hitCount?: number; children?: number[] }
interface CpuProfile { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] }

export interface SelfTimeEntry { name: string; ms: number; pct: number }
export interface ProfileSummary {
  /** CPU time spent (idle excluded), ms. */
  totalMs: number;
  idleMs: number;
  byArea: SelfTimeEntry[];
  byFile: SelfTimeEntry[];
  byFunction: SelfTimeEntry[];
  /** Native frames (syscalls, JSON, builtins) keyed by the JavaScript function that called them. */
  nativeByCaller: SelfTimeEntry[];
  /**
   * Inclusive time of the gateway's own functions (src/**) and of a few framework entry points:
   * every sample whose synchronous stack contains the function. Async continuations start new
   * stacks, so this is time per synchronous segment, not per whole request.
   */
  inclusive: SelfTimeEntry[];
}

/** Where a script URL belongs: the project's own file, a package, or a Node internal. */
function fileOf(url: string): string {
  if (url === '') return '(native / V8)';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    const pkg = rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
    return `${pkg}/${rest.at(-1)}`;
  }
  const src = url.indexOf('/src/');
  if (src >= 0) return url.slice(src + 1);
  if (url.startsWith('node:')) return url;
  return url.replace(/^file:\/\//, '');
}

/** A coarse bucket: the gateway's own code by directory, fastify, undici, pino, zod, node internals. */
function areaOf(frame: CallFrame): string {
  const url = frame.url;
  if (url === '') {
    if (frame.functionName === '(garbage collector)') return 'GC';
    if (frame.functionName === '(idle)' || frame.functionName === '(program)') return frame.functionName;
    return 'native (V8 builtins, JSON, syscalls)';
  }
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return `pkg ${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  const src = url.indexOf('/src/');
  if (src >= 0) return `floodgate ${url.slice(src + 1).split('/').slice(0, 2).join('/')}`;
  if (url.startsWith('node:')) return `node ${url.slice(5).split('/').slice(0, 2).join('/')}`;
  return url;
}

export function summarize(profile: CpuProfile, top = 30): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (frame: CallFrame): string => `${frame.functionName || '(anonymous)'}  ${fileOf(frame.url)}${frame.url ? `:${frame.lineNumber + 1}` : ''}`;
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const fn = new Map<string, number>();
  const file = new Map<string, number>();
  const area = new Map<string, number>();
  const native = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const INCLUSIVE_URL = /\/src\/|secure-json-parse|better-sqlite3\/lib\/methods\/transaction/;
  let busy = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)!.callFrame;
    if (frame.functionName === '(idle)') {
      idle += us;
      continue;
    }
    busy += us;
    const a = areaOf(frame);
    area.set(a, (area.get(a) ?? 0) + us);
    const f = fileOf(frame.url);
    const name = label(frame);
    fn.set(name, (fn.get(name) ?? 0) + us);
    file.set(f, (file.get(f) ?? 0) + us);
    const seen = new Set<string>();
    for (let up: number | undefined = id; up !== undefined; up = parent.get(up)) {
      const f2 = byId.get(up)!.callFrame;
      if (INCLUSIVE_URL.test(f2.url)) seen.add(label(f2));
    }
    for (const key of seen) inclusive.set(key, (inclusive.get(key) ?? 0) + us);
    if (frame.url === '' && !frame.functionName.startsWith('(')) {
      let up = parent.get(id);
      while (up !== undefined && byId.get(up)!.callFrame.url === '') up = parent.get(up);
      const caller = up === undefined ? '(root)' : label(byId.get(up)!.callFrame);
      const key = `${frame.functionName} <- ${caller}`;
      native.set(key, (native.get(key) ?? 0) + us);
    }
  }
  const list = (m: Map<string, number>, total: number): SelfTimeEntry[] =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, us]) => ({ name, ms: Math.round(us / 100) / 10, pct: Math.round((us / total) * 1000) / 10 }));
  return { totalMs: Math.round(busy / 1000), idleMs: Math.round(idle / 1000), byArea: list(area, busy), byFile: list(file, busy), byFunction: list(fn, busy), nativeByCaller: list(native, busy), inclusive: list(inclusive, busy) };
}

/**
 * Prints the summary; with `requests`, also the CPU microseconds per request of each entry (per
 * `unit`: `requests` counts those, e.g. 1k events), sampled time multiplied by `cpuScale` (the
 * CPU time the sampled thread really had / its sampled busy time).
 */
export function printSummary(title: string, s: ProfileSummary, requests?: number, unit = 'request', cpuScale = 1): void {
  const perUnit = (ms: number): number => (ms * 1000 * cpuScale) / requests!;
  const perReq = requests ? ` = ${Math.round(perUnit(s.totalMs))} us/${unit} over ${Math.round(requests)} ${unit === 'request' ? 'requests' : `x ${unit}`}` : '';
  console.log(`\n=== ${title}: ${s.totalMs} ms sampled busy, ${s.idleMs} ms idle${perReq} ===`);
  const sections = [['by area', s.byArea], ['by file', s.byFile], ['by function (self time)', s.byFunction], ['native self time by JS caller', s.nativeByCaller], ['inclusive time of Floodgate functions', s.inclusive]] as const;
  for (const [heading, entries] of sections) {
    console.log(`-- ${heading}`);
    for (const e of entries) {
      const us = requests ? `${(Math.round(perUnit(e.ms) * 10) / 10).toFixed(1).padStart(6)} us/${unit === 'request' ? 'req' : unit}  ` : '';
      console.log(`  ${String(e.pct).padStart(5)}%  ${us}${e.name}`);
    }
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = process.argv[2];
  if (!path) throw new Error('usage: node bench/tools/cpuprofile.ts <file.cpuprofile> [topN]');
  printSummary(path, summarize(JSON.parse(readFileSync(path, 'utf8')) as CpuProfile, Number(process.argv[3] ?? 30)));
}
