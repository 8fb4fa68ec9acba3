import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UsageRecord } from '../../src/storage/types.ts';
import { UsageBatch, recordsOf } from '../../src/storage/usage-batch.ts';

function record(n: number, overrides: Partial<UsageRecord> = {}): UsageRecord {
  return {
    timestampMs: 1_700_000_000_000 + n,
    userPath: `/team/${n % 3}`,
    provider: 'openai',
    model: 'gpt-4o',
    endpoint: 'chat',
    promptTokens: n,
    completionTokens: 2 * n,
    totalTokens: 3 * n,
    cached: n % 2 === 0,
    status: 200,
    latencyMs: n + 0.4,
    apiKeyId: n % 4 === 0 ? null : `key-${n % 2}`,
    ...overrides,
  };
}

describe('UsageBatch', () => {
  it('gives back every record it was given, in order, past its initial capacity', () => {
    const input = Array.from({ length: 300 }, (_, i) => record(i));
    const batch = new UsageBatch(4);
    for (const r of input) batch.add(r);
    assert.equal(batch.size, 300);
    // Latency is stored in whole milliseconds, as the database column keeps it.
    assert.deepEqual(batch.records(), input.map((r) => ({ ...r, latencyMs: Math.round(r.latencyMs) })));
  });

  it('sends each distinct string once', () => {
    const batch = UsageBatch.from(Array.from({ length: 1000 }, (_, i) => record(i)));
    const columns = batch.columns();
    // 3 user paths, provider, model, endpoint, 2 key ids.
    assert.deepEqual([...columns.strings].sort(), ['/team/0', '/team/1', '/team/2', 'chat', 'gpt-4o', 'key-0', 'key-1', 'openai']);
    assert.equal(columns.numbers.length, 1000 * 12);
  });

  it('hands out copies: a batch is intact for a retry after its columns were sent away', () => {
    const batch = UsageBatch.from([record(1), record(2)]);
    const sent = batch.columns();
    sent.numbers.fill(0);
    sent.strings.length = 0;
    assert.equal(batch.records()[1]?.totalTokens, 6);
    assert.equal(batch.records()[0]?.userPath, '/team/1');
    assert.deepEqual(recordsOf(batch.columns()), batch.records());
  });

  it('is empty when new', () => {
    const batch = new UsageBatch();
    assert.equal(batch.size, 0);
    assert.deepEqual(batch.records(), []);
    assert.equal(batch.columns().count, 0);
  });
});
