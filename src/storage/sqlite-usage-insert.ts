/**
 * The usage insert, in a form both threads share: records are packed into columns on the main
 * thread and written in one transaction by whichever connection owns the insert.
 */

import type { Database as Db } from 'better-sqlite3';
import type { UsageRecord } from './types.ts';

/**
 * A usage batch as columns. Structured-cloning one typed array (transferred, not copied) and one
 * flat string array to the writer thread is far cheaper than cloning an object and a Date per
 * record; the record fields are already reduced to what the row stores.
 */
export interface UsageColumns {
  count: number;
  /** NUMBERS per record: ts (epoch ms), prompt, completion, total tokens, cached (0/1), status, latency ms. */
  numbers: Float64Array<ArrayBuffer>;
  /** STRINGS per record: user path, provider, model, endpoint, api key id (or null). */
  strings: (string | null)[];
}

const NUMBERS = 7;
const STRINGS = 5;

export function encodeUsage(records: readonly UsageRecord[]): UsageColumns {
  const numbers = new Float64Array(records.length * NUMBERS);
  const strings = new Array<string | null>(records.length * STRINGS);
  let n = 0;
  let s = 0;
  for (const r of records) {
    numbers[n++] = r.timestamp.getTime();
    numbers[n++] = r.promptTokens;
    numbers[n++] = r.completionTokens;
    numbers[n++] = r.totalTokens;
    numbers[n++] = r.cached ? 1 : 0;
    numbers[n++] = r.status;
    numbers[n++] = Math.round(r.latencyMs);
    strings[s++] = r.userPath;
    strings[s++] = r.provider;
    strings[s++] = r.model;
    strings[s++] = r.endpoint;
    strings[s++] = r.apiKeyId;
  }
  return { count: records.length, numbers, strings };
}

/** Prepares the insert on `db` (the schema must exist); the returned function throws on failure. */
export function prepareUsageInsert(db: Db): (batch: UsageColumns) => void {
  const stmt = db.prepare<unknown[]>(
    `INSERT INTO usage_records
       (ts, user_path, provider, model, endpoint, prompt_tokens, completion_tokens, total_tokens,
        cached, status, latency_ms, api_key_id)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  // One transaction per batch: one commit instead of one per record.
  const insertAll = db.transaction(({ count, numbers: num, strings: str }: UsageColumns) => {
    for (let i = 0, n = 0, s = 0; i < count; i++, n += NUMBERS, s += STRINGS) {
      stmt.run(
        num[n], str[s], str[s + 1], str[s + 2], str[s + 3],
        num[n + 1], num[n + 2], num[n + 3], num[n + 4], num[n + 5], num[n + 6],
        str[s + 4],
      );
    }
  });
  // IMMEDIATE takes the write lock up front, so contention with the other connection to the
  // file waits in the busy handler instead of failing halfway through a deferred transaction.
  return (batch) => insertAll.immediate(batch);
}
