import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { UsageBufferOverflowError, UsageRecorder, UsageRecordsLostError, type UsageEntry } from '../../src/usage/recorder.ts';
import { UsageRejectedError, type UsageRecord } from '../../src/storage/usage/types.ts';

function rec(n: number): UsageEntry {
  return {
    timestampMs: 1_700_000_000_000 + n,
    userPath: '/t',
    provider: 'mock',
    model: 'm',
    endpoint: '/v1/chat/completions',
    promptTokens: n,
    completionTokens: 0,
    totalTokens: n,
    cachedPromptTokens: 0,
    cached: false,
    status: 200,
    latencyMs: 1,
    apiKeyId: null,
    requestId: `req-${n}`,
    estimated: false,
  };
}

/**
 * A fake sink that records each batch and can be told to fail or to block, as a whole (`failNext`,
 * `down`) or for batches holding certain records: `refused` ones the database refuses (a
 * UsageRejectedError), `broken` ones it fails on with an error it does not explain.
 */
class FakeSink {
  batches: UsageRecord[][] = [];
  failNext = 0;
  down = false;
  refused = new Set<number>();
  broken = new Set<number>();
  gate: Promise<void> | undefined;
  calls = 0;

  get written(): number[] {
    return this.batches.flat().map((r) => r.promptTokens);
  }

  async insert(records: readonly UsageRecord[]): Promise<void> {
    this.calls++;
    if (this.gate) await this.gate;
    if (this.down) throw new Error('database is down');
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('database is down');
    }
    if (records.some((r) => this.refused.has(r.promptTokens))) throw new UsageRejectedError(new Error('invalid byte sequence for encoding "UTF8": 0x00'));
    if (records.some((r) => this.broken.has(r.promptTokens))) throw new Error('something about this row');
    this.batches.push([...records]);
  }
}

const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from }, (_, i) => from + i);

describe('UsageRecorder', () => {
  it('record() does no I/O; flush() writes in batches, in order', async () => {
    const sink = new FakeSink();
    const recorder = new UsageRecorder(sink, { batchSize: 4, flushIntervalMs: 60_000 });
    for (const n of range(0, 3)) recorder.record(rec(n));
    assert.equal(sink.calls, 0);
    assert.equal(recorder.pending, 3);
    await recorder.flush();
    assert.deepEqual(sink.written, [0, 1, 2]);
    assert.equal(recorder.pending, 0);

    for (const n of range(3, 13)) recorder.record(rec(n));
    await recorder.close();
    assert.deepEqual(sink.written, range(0, 13));
    assert.ok(sink.batches.every((b) => b.length <= 4));
  });

  it('flushes early once a batch is full', async () => {
    const sink = new FakeSink();
    const recorder = new UsageRecorder(sink, { batchSize: 3, flushIntervalMs: 60_000 });
    for (const n of range(0, 3)) recorder.record(rec(n));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(sink.written, [0, 1, 2]);
    await recorder.close();
  });

  it('a flush triggered by a full batch leaves the batch being filled to the timer', async () => {
    const sink = new FakeSink();
    const recorder = new UsageRecorder(sink, { batchSize: 3, flushIntervalMs: 60_000 });
    for (const n of range(0, 4)) recorder.record(rec(n));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(sink.batches.map((b) => b.map((r) => r.promptTokens)), [[0, 1, 2]]);
    assert.equal(recorder.pending, 1);
    await recorder.flush();
    assert.deepEqual(sink.batches.map((b) => b.map((r) => r.promptTokens)), [[0, 1, 2], [3]]);
    await recorder.close();
  });

  it('lets the event loop run between the batches of a backlog', async () => {
    const sink = new FakeSink();
    const recorder = new UsageRecorder(sink, { batchSize: 10, flushIntervalMs: 60_000 });
    sink.failNext = 1;
    for (const n of range(0, 10)) recorder.record(rec(n)); // this background flush fails
    await new Promise((r) => setImmediate(r));
    for (const n of range(10, 50)) recorder.record(rec(n));
    const flushed = recorder.flush();
    let callsSeenByOtherWork = -1;
    setImmediate(() => (callsSeenByOtherWork = sink.calls));
    await flushed;
    assert.deepEqual(sink.written, range(0, 50));
    assert.ok(callsSeenByOtherWork > 1 && callsSeenByOtherWork < sink.calls, `other work ran after ${callsSeenByOtherWork} of ${sink.calls} writes`);
    await recorder.close();
  });

  it('flushes on the timer', async () => {
    mock.timers.enable({ apis: ['setInterval'] });
    try {
      const sink = new FakeSink();
      const recorder = new UsageRecorder(sink, { flushIntervalMs: 1000 });
      recorder.record(rec(1));
      mock.timers.tick(999);
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(sink.written, []);
      mock.timers.tick(1);
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(sink.written, [1]);
      await recorder.close();
    } finally {
      mock.timers.reset();
    }
  });

  it('keeps records when a write fails and retries them first on the next flush', async () => {
    const sink = new FakeSink();
    const errors: Error[] = [];
    const recorder = new UsageRecorder(sink, {
      batchSize: 2,
      flushIntervalMs: 60_000,
      onError: (e) => errors.push(e),
    });
    for (const n of range(0, 5)) recorder.record(rec(n));
    await recorder.flush(); // full-batch trigger wrote [0,1]; [2,3],[4] now pending
    sink.failNext = 1;
    recorder.record(rec(5));
    await recorder.flush();
    assert.equal(errors.length, 1);
    assert.match(errors[0]?.message ?? '', /database is down/);
    assert.equal(recorder.pending, 4 - sink.written.length + 2);

    recorder.record(rec(6));
    await recorder.flush();
    assert.deepEqual(sink.written, range(0, 7));
    assert.equal(recorder.pending, 0);
    await recorder.close();
  });

  it('does not retry on every record() while storage is failing', async () => {
    const sink = new FakeSink();
    const recorder = new UsageRecorder(sink, { batchSize: 1, flushIntervalMs: 60_000, onError: () => {} });
    sink.failNext = 2;
    recorder.record(rec(0)); // background flush fails
    await recorder.flush(); // and so does this one
    const calls = sink.calls;
    assert.equal(calls, 2);
    for (const n of range(1, 50)) recorder.record(rec(n));
    await new Promise((r) => setImmediate(r));
    assert.equal(sink.calls, calls);
    await recorder.flush();
    assert.deepEqual(sink.written, range(0, 50));
    await recorder.close();
  });

  it('flush() waits for a write already in progress and for records queued meanwhile', async () => {
    const sink = new FakeSink();
    let open!: () => void;
    sink.gate = new Promise((r) => (open = r));
    const recorder = new UsageRecorder(sink, { batchSize: 2, flushIntervalMs: 60_000 });
    recorder.record(rec(0));
    recorder.record(rec(1)); // triggers a background flush, now blocked on the gate
    recorder.record(rec(2));
    assert.equal(recorder.pending, 3);
    const flushed = recorder.flush();
    open();
    sink.gate = undefined;
    await flushed;
    assert.deepEqual(sink.written, [0, 1, 2]);
    await recorder.close();
  });

  it('bounds the buffer, dropping the oldest records with a counted warning', async () => {
    const sink = new FakeSink();
    const errors: Error[] = [];
    const recorder = new UsageRecorder(sink, {
      batchSize: 2,
      maxBuffered: 10,
      flushIntervalMs: 60_000,
      onError: (e) => errors.push(e),
    });
    sink.failNext = 1_000;
    recorder.record(rec(0));
    recorder.record(rec(1)); // background flush fails
    await recorder.flush();
    for (const n of range(2, 14)) recorder.record(rec(n));
    assert.ok(recorder.pending <= 10);
    assert.ok(recorder.dropped > 0);
    assert.equal(recorder.dropped, 14 - recorder.pending);
    sink.failNext = 0;
    await recorder.flush();
    const overflow = errors.find((e) => e instanceof UsageBufferOverflowError);
    assert.ok(overflow instanceof UsageBufferOverflowError);
    assert.equal(overflow.totalDropped, recorder.dropped);
    // What survived is the newest records, in order.
    assert.deepEqual(sink.written, range(14 - sink.written.length, 14));
    await recorder.close();
  });

  it('a throwing onError does not break flushing', async () => {
    const sink = new FakeSink();
    const recorder = new UsageRecorder(sink, {
      flushIntervalMs: 60_000,
      onError: () => {
        throw new Error('bad callback');
      },
    });
    sink.failNext = 1;
    recorder.record(rec(0));
    await recorder.flush();
    await recorder.flush();
    assert.deepEqual(sink.written, [0]);
    await recorder.close();
  });

  it('prices each record, keeps a cost a record carries, and shows every record to onRecord', async () => {
    const sink = new FakeSink();
    const seen: UsageRecord[] = [];
    const recorder = new UsageRecorder(sink, {
      flushIntervalMs: 60_000,
      price: (entry) => entry.promptTokens / 100,
      onRecord: (record) => seen.push(record),
    });
    recorder.record(rec(3));
    recorder.record({ ...rec(4), costUsd: 9 });
    assert.deepEqual(seen.map((r) => r.costUsd), [0.03, 9]);
    await recorder.flush();
    assert.deepEqual(sink.batches.flat().map((r) => r.costUsd), [0.03, 9]);
    await recorder.close();
  });

  it('says it is failing from a failed write until the next successful one', async () => {
    const sink = new FakeSink();
    const recorder = new UsageRecorder(sink, { flushIntervalMs: 60_000 });
    assert.equal(recorder.failing, false);
    sink.failNext = 1;
    recorder.record(rec(0));
    await recorder.flush();
    assert.equal(recorder.failing, true);
    await recorder.flush();
    assert.equal(recorder.failing, false);
    assert.deepEqual(sink.written, [0]);
    await recorder.close();
  });

  it('is a no-op when disabled', async () => {
    const sink = new FakeSink();
    const recorder = new UsageRecorder(sink, { enabled: false });
    recorder.record(rec(0));
    assert.equal(recorder.pending, 0);
    await recorder.flush();
    await recorder.close();
    assert.equal(sink.calls, 0);
  });

  it('writes through real SQLite storage', async () => {
    const { SqliteStorage } = await import('../../src/storage/sqlite.ts');
    const storage = new SqliteStorage({ path: ':memory:' });
    await storage.migrate();
    const recorder = new UsageRecorder(storage.usage, { batchSize: 100, flushIntervalMs: 60_000 });
    for (const n of range(0, 1234)) recorder.record(rec(1));
    await recorder.close();
    const rows = await storage.usage.summarize({
      userPathPrefix: '/',
      from: new Date(0),
      to: new Date(2_000_000_000_000),
    });
    assert.equal(rows[0]?.requests, 1234);
    await storage.close();
  });

  it('writes the other records of a batch the database refuses, and sets the refused one aside at once', async () => {
    const sink = new FakeSink();
    sink.refused.add(2);
    const errors: Error[] = [];
    const setAside: Array<{ record: UsageRecord; reason: Error }> = [];
    const recorder = new UsageRecorder(sink, { batchSize: 4, flushIntervalMs: 60_000, onError: (e) => errors.push(e), onSetAside: (record, reason) => setAside.push({ record, reason }) });
    for (const n of range(0, 7)) recorder.record(rec(n));
    await recorder.flush();
    assert.deepEqual(sink.written, [0, 1, 3, 4, 5, 6]);
    assert.deepEqual(setAside.map((s) => s.record.requestId), ['req-2']);
    assert.ok(setAside[0]?.reason instanceof UsageRejectedError);
    assert.equal(recorder.setAside, 1);
    assert.equal(recorder.pending, 0);
    assert.equal(recorder.failing, false);
    assert.deepEqual(errors, []);
    // Never tried again.
    const calls = sink.calls;
    recorder.record(rec(7));
    await recorder.flush();
    assert.equal(sink.calls, calls + 1);
    await recorder.close();
  });

  it('sets aside a record that keeps failing while the records after it are written, and holds nothing back meanwhile', async () => {
    const sink = new FakeSink();
    sink.broken.add(1);
    const setAside: UsageRecord[] = [];
    const recorder = new UsageRecorder(sink, { batchSize: 10, flushIntervalMs: 60_000, onError: () => {}, onSetAside: (record) => setAside.push(record) });
    recorder.record(rec(0));
    recorder.record(rec(1));
    recorder.record(rec(2));
    await recorder.flush();
    assert.deepEqual(sink.written, [0, 2]);
    assert.equal(recorder.pending, 1);
    for (let pass = 0; pass < 5 && setAside.length === 0; pass++) {
      recorder.record(rec(10 + pass));
      await recorder.flush();
    }
    assert.deepEqual(setAside.map((r) => r.requestId), ['req-1']);
    assert.equal(recorder.pending, 0);
    // Every other record was written at its first flush.
    assert.deepEqual(sink.written, [0, 2, 10, 11]);
    await recorder.close();
  });

  it('sets nothing aside while the database is down, and stops a row-by-row pass after a few failures', async () => {
    const sink = new FakeSink();
    const setAside: UsageRecord[] = [];
    const recorder = new UsageRecorder(sink, { batchSize: 50, flushIntervalMs: 60_000, onError: () => {}, onSetAside: (record) => setAside.push(record) });
    sink.down = true;
    for (const n of range(0, 40)) recorder.record(rec(n));
    for (let i = 0; i < 5; i++) await recorder.flush();
    assert.deepEqual(setAside, []);
    assert.equal(recorder.pending, 40);
    assert.ok(sink.calls <= 5 * 4, `${sink.calls} writes for five flushes`);
    sink.down = false;
    await recorder.flush();
    assert.deepEqual(sink.written, range(0, 40));
    await recorder.close();
  });

  it('reports the records it could not write before closing, with their request ids', async () => {
    const sink = new FakeSink();
    const errors: Error[] = [];
    const recorder = new UsageRecorder(sink, { flushIntervalMs: 60_000, onError: (e) => errors.push(e) });
    sink.down = true;
    recorder.record(rec(1));
    recorder.record({ ...rec(2), requestId: null });
    await recorder.close();
    const lost = errors.find((e) => e instanceof UsageRecordsLostError);
    assert.ok(lost instanceof UsageRecordsLostError);
    assert.match(lost.message, /2 usage record\(s\) could not be written/);
    assert.deepEqual(lost.requestIds, ['req-1']);
  });

  it('cleans every record before it is priced, counted or written', async () => {
    const sink = new FakeSink();
    const seen: UsageRecord[] = [];
    const priced: UsageEntry[] = [];
    const recorder = new UsageRecorder(sink, {
      flushIntervalMs: 60_000,
      price: (entry) => {
        priced.push(entry);
        return entry.promptTokens === 11 ? Infinity : NaN;
      },
      onRecord: (r) => seen.push(r),
    });
    recorder.record({ ...rec(0), model: 'a\u0000b', userPath: '/t/\ud800x', endpoint: 'e\udc00', requestId: 'id\u0000', promptTokens: 10.5, completionTokens: -3, totalTokens: 1e300, cachedPromptTokens: 99, latencyMs: 12.7 });
    recorder.record({ ...rec(1), promptTokens: NaN, completionTokens: Infinity, totalTokens: 2 ** 70 });
    await recorder.flush();
    const [a, b] = sink.batches.flat();
    assert.equal(a?.model, 'a\ufffdb');
    assert.equal(a?.userPath, '/t/\ufffdx');
    assert.equal(a?.endpoint, 'e\ufffd');
    assert.equal(a?.requestId, 'id\ufffd');
    assert.deepEqual([a?.promptTokens, a?.completionTokens, a?.totalTokens, a?.cachedPromptTokens, a?.latencyMs], [11, 0, 1e12, 11, 13]);
    assert.equal(a?.costUsd, 1e12);
    assert.deepEqual([b?.promptTokens, b?.completionTokens, b?.totalTokens, b?.costUsd], [0, 1e12, 1e12, 0]);
    assert.equal(priced[0]?.promptTokens, 11);
    assert.deepEqual(seen, sink.batches.flat());
    await recorder.close();
  });
});
