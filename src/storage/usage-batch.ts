/**
 * Usage records as they travel from the request path to storage: packed into columns as they
 * are recorded. One record per request would otherwise be an object (and a Date) held for up to
 * a second until the next flush; objects that live that long are promoted out of V8's young
 * generation and cost a full mark-sweep to free. Packed, a record is a dozen numbers in a typed
 * array, and its strings (user path, provider, model, endpoint, key id: the same few values over
 * and over) are indices into a small per-batch dictionary. Handing a batch to the SQLite writer
 * thread then transfers one typed array and clones a handful of strings.
 */

import type { UsageRecord } from './types.ts';

/** The transferable form of a batch (structured-clone friendly). */
export interface UsageColumns {
  count: number;
  /** FIELDS numbers per record, in the order of the F_* offsets below. */
  numbers: Float64Array<ArrayBuffer>;
  /** Every distinct string of the batch; string fields hold an index into it (-1 for null). */
  strings: string[];
}

export const F_TS = 0;
export const F_PROMPT = 1;
export const F_COMPLETION = 2;
export const F_TOTAL = 3;
export const F_CACHED = 4;
export const F_STATUS = 5;
export const F_LATENCY = 6;
export const F_USER_PATH = 7;
export const F_PROVIDER = 8;
export const F_MODEL = 9;
export const F_ENDPOINT = 10;
export const F_API_KEY = 11;
/** Numbers per record. */
export const FIELDS = 12;

const NULL_STRING = -1;
const INITIAL_CAPACITY = 64;

export class UsageBatch {
  private numbers: Float64Array<ArrayBuffer>;
  private readonly strings: string[] = [];
  private readonly stringIndex = new Map<string, number>();
  private count = 0;

  constructor(capacity = INITIAL_CAPACITY) {
    this.numbers = new Float64Array(Math.max(1, capacity) * FIELDS);
  }

  static from(records: Iterable<UsageRecord>): UsageBatch {
    const batch = new UsageBatch();
    for (const r of records) batch.add(r);
    return batch;
  }

  get size(): number {
    return this.count;
  }

  add(r: UsageRecord): void {
    let at = this.count * FIELDS;
    if (at + FIELDS > this.numbers.length) this.grow();
    const n = this.numbers;
    n[at++] = r.timestampMs;
    n[at++] = r.promptTokens;
    n[at++] = r.completionTokens;
    n[at++] = r.totalTokens;
    n[at++] = r.cached ? 1 : 0;
    n[at++] = r.status;
    n[at++] = Math.round(r.latencyMs);
    n[at++] = this.intern(r.userPath);
    n[at++] = this.intern(r.provider);
    n[at++] = this.intern(r.model);
    n[at++] = this.intern(r.endpoint);
    n[at] = r.apiKeyId === null ? NULL_STRING : this.intern(r.apiKeyId);
    this.count++;
  }

  /** The batch for another thread or a bulk insert; a copy, so the batch stays usable for a retry. */
  columns(): UsageColumns {
    return { count: this.count, numbers: this.numbers.slice(0, this.count * FIELDS), strings: [...this.strings] };
  }

  /** The records back as objects (for stores that keep objects, and for tests). */
  records(): UsageRecord[] {
    return recordsOf(this.columns());
  }

  private intern(value: string): number {
    let index = this.stringIndex.get(value);
    if (index === undefined) {
      index = this.strings.length;
      this.strings.push(value);
      this.stringIndex.set(value, index);
    }
    return index;
  }

  private grow(): void {
    const bigger = new Float64Array(this.numbers.length * 2);
    bigger.set(this.numbers);
    this.numbers = bigger;
  }
}

/** The string of a string field: its dictionary entry, or null. */
export function stringAt(columns: UsageColumns, index: number): string | null {
  return index === NULL_STRING ? null : columns.strings[index] ?? null;
}

export function recordsOf(columns: UsageColumns): UsageRecord[] {
  const { count, numbers: n } = columns;
  const out: UsageRecord[] = new Array(count);
  for (let i = 0, at = 0; i < count; i++, at += FIELDS) {
    out[i] = {
      timestampMs: n[at + F_TS]!,
      promptTokens: n[at + F_PROMPT]!,
      completionTokens: n[at + F_COMPLETION]!,
      totalTokens: n[at + F_TOTAL]!,
      cached: n[at + F_CACHED] === 1,
      status: n[at + F_STATUS]!,
      latencyMs: n[at + F_LATENCY]!,
      userPath: stringAt(columns, n[at + F_USER_PATH]!) ?? '',
      provider: stringAt(columns, n[at + F_PROVIDER]!) ?? '',
      model: stringAt(columns, n[at + F_MODEL]!) ?? '',
      endpoint: stringAt(columns, n[at + F_ENDPOINT]!) ?? '',
      apiKeyId: stringAt(columns, n[at + F_API_KEY]!),
    };
  }
  return out;
}
