/**
 * The refusal counts behind `/admin/usage`'s `refused`: counted in memory per minute, user path,
 * asked-for target and rule, written to storage at most once a minute in one call (a row per
 * count, never a row per refusal), kept across a failed write, bounded in memory.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import type { Refusal } from '../../src/admission/core.ts';
import type { RefusalCount } from '../../src/storage/refusals/types.ts';
import { RefusalCountsDroppedError, RefusalLog } from '../../src/usage/refusals.ts';

/** 2030-01-01T00:00:00Z. */
const T0 = Date.UTC(2030, 0, 1);
const MINUTE = 60_000;

const byRule = (userPath: string, subject = '/team', period = 'minute'): Refusal => ({ userPath, provider: 'a', model: 'm', scope: 'user_path', subject, period });

/** Storage's side: every call to add, and a switch to make them fail. */
class FakeStorage {
  readonly calls: RefusalCount[][] = [];
  failing = false;

  async add(counts: readonly RefusalCount[]): Promise<void> {
    if (this.failing) throw new Error('database is down');
    this.calls.push(counts.map((c) => ({ ...c })));
  }
}

/** Lets pending promises (a write in progress) settle. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const brief = (counts: readonly RefusalCount[]) => counts.map((c) => [c.minuteMs - T0, c.userPath, c.subject, c.count]).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

describe('RefusalLog', () => {
  let now = T0;
  const clock = { now: () => now };
  beforeEach(() => {
    now = T0;
    mock.timers.enable({ apis: ['setInterval'] });
  });
  afterEach(() => mock.timers.reset());

  it('counts per minute, user path and rule, and writes them in one call at most once a minute', async () => {
    const storage = new FakeStorage();
    const log = new RefusalLog(storage, clock);
    for (let i = 0; i < 1000; i++) log.refused(byRule('/team/alice'));
    for (let i = 0; i < 10; i++) log.refused(byRule('/team/bob'));
    log.refused(byRule('/team/bob', '/team', 'hour'));
    now = T0 + MINUTE + 5;
    for (let i = 0; i < 3; i++) log.refused(byRule('/team/alice'));
    mock.timers.tick(MINUTE - 1);
    await settle();
    assert.equal(storage.calls.length, 0, 'nothing before a minute has passed');
    mock.timers.tick(1);
    await settle();
    assert.equal(storage.calls.length, 1);
    assert.deepEqual(brief(storage.calls[0]!), [
      [0, '/team/alice', '/team', 1000],
      [0, '/team/bob', '/team', 1],
      [0, '/team/bob', '/team', 10],
      [MINUTE, '/team/alice', '/team', 3],
    ]);
    // The next write comes a minute later, with only what came since.
    log.refused(byRule('/team/alice'));
    mock.timers.tick(MINUTE / 2);
    await settle();
    assert.equal(storage.calls.length, 1);
    mock.timers.tick(MINUTE / 2);
    await settle();
    assert.deepEqual(storage.calls.map((call) => call.length), [4, 1]);
    // Nothing pending: no call at all.
    mock.timers.tick(MINUTE);
    await settle();
    assert.equal(storage.calls.length, 2);
    await log.close();
  });

  it('shows what is not written yet in the buckets of a usage query', async () => {
    const log = new RefusalLog(new FakeStorage(), clock);
    log.refused(byRule('/team/alice'));
    log.refused({ ...byRule('/team/alice'), provider: 'b', model: 'n' });
    now = T0 + 2 * 3_600_000;
    log.refused({ ...byRule('/batch'), provider: '', model: '' });
    const query = (groupBy: 'user_path' | 'provider' | 'model') => log.pending({ from: new Date(T0), to: new Date(T0 + 86_400_000), groupBy, bucketSeconds: 3600 });
    const hours = (groupBy: 'user_path' | 'provider' | 'model') => query(groupBy).map((b) => [(b.start.getTime() - T0) / 3_600_000, b.key, b.refused]);
    assert.deepEqual(hours('user_path'), [[0, '/team/alice', 2], [2, '/batch', 1]]);
    assert.deepEqual(hours('model'), [[0, 'a/m', 1], [0, 'b/n', 1], [2, '', 1]]);
    assert.deepEqual(hours('provider'), [[0, 'a', 1], [0, 'b', 1], [2, '', 1]]);
    await log.close();
    assert.deepEqual(query('user_path'), [], 'written at close');
  });

  it('keeps the counts of a failed write, merged with newer ones, for the next', async () => {
    const storage = new FakeStorage();
    const errors: Error[] = [];
    const log = new RefusalLog(storage, { ...clock, onError: (err) => errors.push(err) });
    log.refused(byRule('/team/alice'));
    storage.failing = true;
    await log.flush();
    assert.match(errors[0]?.message ?? '', /database is down/);
    log.refused(byRule('/team/alice'));
    log.refused(byRule('/team/carol'));
    storage.failing = false;
    await log.flush();
    assert.deepEqual(brief(storage.calls[0]!), [[0, '/team/alice', '/team', 2], [0, '/team/carol', '/team', 1]]);
    await log.close();
  });

  it('keeps at most max_pending counts in memory: refusals beyond are dropped and reported', async () => {
    const storage = new FakeStorage();
    const errors: Error[] = [];
    const log = new RefusalLog(storage, { ...clock, maxPending: 2, onError: (err) => errors.push(err) });
    log.refused(byRule('/a'));
    log.refused(byRule('/b'));
    log.refused(byRule('/c'));
    log.refused(byRule('/d'));
    log.refused(byRule('/a'));
    await log.flush();
    assert.deepEqual(brief(storage.calls[0]!), [[0, '/a', '/team', 2], [0, '/b', '/team', 1]]);
    assert.ok(errors[0] instanceof RefusalCountsDroppedError);
    assert.equal(errors[0].refusals, 2);
    assert.equal(errors[0].message, 'refusal counts full (2 kept in memory): 2 refusal(s) were not counted');
    await log.close();
  });

  it('a write in progress is waited for (settled), and close writes what is left', async () => {
    let release: () => void = () => {};
    const written: RefusalCount[][] = [];
    const slow = {
      add: (counts: readonly RefusalCount[]) => new Promise<void>((resolve) => {
        release = () => {
          written.push([...counts]);
          resolve();
        };
      }),
    };
    const log = new RefusalLog(slow, clock);
    log.refused(byRule('/team/alice'));
    const writing = log.flush();
    log.refused(byRule('/team/bob'));
    let settled = false;
    void log.settled().then(() => {
      settled = true;
    });
    await settle();
    assert.equal(settled, false);
    release();
    await writing;
    await settle();
    assert.equal(settled, true);
    const closing = log.close();
    await settle();
    release();
    await closing;
    assert.deepEqual(written.map(brief), [[[0, '/team/alice', '/team', 1]], [[0, '/team/bob', '/team', 1]]]);
  });
});
