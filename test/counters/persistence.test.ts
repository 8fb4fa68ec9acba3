/**
 * Saved counters (rate_limits.persist_counters) over the memory storage, with the timers and the
 * clock under the test's control: what is saved, when, what a restart puts back, and that resets
 * and deletes stay done.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { CounterPersistence } from '../../src/counters/persistence.ts';
import { RateLimiter, type RuleDefinition } from '../../src/ratelimit/index.ts';
import { MemoryStorage, MemoryStore } from '../../src/storage/memory.ts';
import type { CounterRemovals, CounterRepository, SavedCounter } from '../../src/storage/counters/types.ts';
import { admitted, immediate, MIDNIGHT, refused, rule } from '../ratelimit/helpers.ts';

const DAY = rule('user_path', '/team', 86_400, { maxRequests: 10, maxTokens: 1000 });
const SLOTS = rule('user_path', '/team', 0, { maxRequests: 5 });
const PER_CHILD: RuleDefinition = { ...rule('user_path', '/org', 3600, { maxRequests: 3 }), perChild: true };
const TEAM_KEY = 'user_path\u0000/team\u000086400';

/** The memory storage's saved counters, recording every write, and able to fail. */
class WatchedCounters implements CounterRepository {
  readonly #saved: CounterRepository;
  writes: Array<{ counters: SavedCounter[]; removals: CounterRemovals | undefined }> = [];
  failing = false;

  constructor(database: MemoryStore) {
    this.#saved = new MemoryStorage(database).counters;
  }

  list(): Promise<SavedCounter[]> {
    return this.#saved.list();
  }

  async write(counters: readonly SavedCounter[], removals?: CounterRemovals): Promise<void> {
    if (this.failing) throw new Error('storage is down');
    this.writes.push({ counters: [...counters], removals });
    await this.#saved.write(counters, removals);
  }
}

const logger = { info: () => {}, warn: () => {} };

/** Lets a save started by the timer finish (the memory storage answers within a turn). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** One gateway's counters on `database`: an engine over a persistence, on a clock the test sets. */
async function gateway(database: MemoryStore, rules: RuleDefinition[], options: { seconds: number; maxChildren?: number }) {
  const storage = new WatchedCounters(database);
  let nowMs = options.seconds * 1000;
  const now = () => nowMs;
  const persistence = new CounterPersistence({ storage, now, logger, maxChildren: options.maxChildren });
  const limiter = new RateLimiter({ clock: { now }, store: persistence.store });
  limiter.replaceRules(rules);
  await persistence.start();
  storage.writes = [];
  return {
    storage,
    persistence,
    limiter,
    setSeconds(seconds: number) {
      nowMs = seconds * 1000;
    },
  };
}

function burst(limiter: RateLimiter, userPath: string, count: number): void {
  for (let i = 0; i < count; i++) admitted(limiter.admit({ userPath })).release();
}

const used = (limiter: RateLimiter, periodSeconds: number, subject = '/team') =>
  immediate(limiter.status()).find((s) => s.subject === subject && s.period_seconds === periodSeconds)!.requests_used;

describe('CounterPersistence', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setInterval'] }));
  afterEach(() => mock.timers.reset());

  it('saves the changed windows once a second, only those, and never slots', async () => {
    const database = new MemoryStore();
    const gw = await gateway(database, [DAY, SLOTS], { seconds: MIDNIGHT + 10 });
    burst(gw.limiter, '/team/a', 5);
    immediate(gw.limiter.chargeTokens({ userPath: '/team' }, 40));
    mock.timers.tick(999);
    await settle();
    assert.equal(gw.storage.writes.length, 0, 'nothing before the second is over');
    mock.timers.tick(1);
    await settle();
    assert.deepEqual(gw.storage.writes, [
      {
        counters: [{ key: TEAM_KEY, periodSeconds: 86_400, windowStart: MIDNIGHT, requestsPrevious: 0, requestsCurrent: 5, tokensPrevious: 0, tokensCurrent: 40 }],
        removals: { all: false, keys: [], prefixes: [] },
      },
    ]);
    mock.timers.tick(5000);
    await settle();
    assert.equal(gw.storage.writes.length, 1, 'nothing changed since');
    burst(gw.limiter, '/team', 1);
    await gw.persistence.close();
    assert.equal(gw.storage.writes.length, 2, 'the last change is saved at shutdown');
    assert.deepEqual(await gw.storage.list(), [{ key: TEAM_KEY, periodSeconds: 86_400, windowStart: MIDNIGHT, requestsPrevious: 0, requestsCurrent: 6, tokensPrevious: 0, tokensCurrent: 40 }]);
  });

  it("restores a day window's count after a restart, and drops windows that no longer matter", async () => {
    const database = new MemoryStore();
    const first = await gateway(database, [DAY, SLOTS], { seconds: MIDNIGHT + 10 });
    burst(first.limiter, '/team', 7);
    const held = admitted(first.limiter.admit({ userPath: '/team' }));
    await first.persistence.close();

    const second = await gateway(database, [DAY, SLOTS], { seconds: MIDNIGHT + 3600 });
    assert.equal(used(second.limiter, 86_400), 8);
    assert.equal(used(second.limiter, 0), 0, 'slots in flight are not saved');
    burst(second.limiter, '/team', 2);
    refused(second.limiter.admit({ userPath: '/team' }));
    held.release();
    await second.persistence.close();

    // A day later the window is the previous one: still weighed by the sliding estimate.
    const third = await gateway(database, [DAY], { seconds: MIDNIGHT + 86_400 + 43_200 });
    assert.equal(used(third.limiter, 86_400), 5);
    await third.persistence.close();

    // Two days on, nothing of it matters: not restored, and deleted from storage.
    const fourth = await gateway(database, [DAY], { seconds: MIDNIGHT + 2 * 86_400 });
    assert.equal(used(fourth.limiter, 86_400), 0);
    assert.deepEqual(await fourth.storage.list(), []);
    await fourth.persistence.close();
  });

  it('keeps a reset and a delete done across a restart: written through before they answer', async () => {
    const database = new MemoryStore();
    const first = await gateway(database, [DAY, PER_CHILD], { seconds: MIDNIGHT + 10 });
    burst(first.limiter, '/team', 4);
    burst(first.limiter, '/org/alice', 3);
    burst(first.limiter, '/org', 1);
    await first.persistence.save();
    assert.equal((await first.storage.list()).length, 3);
    burst(first.limiter, '/team', 1); // changed again, not saved yet when the reset comes

    await first.limiter.resetRule({ scope: 'user_path', subject: '/team', periodSeconds: 86_400 });
    await first.limiter.resetRule({ scope: 'user_path', subject: '/org', periodSeconds: 3600 });
    assert.deepEqual(await first.storage.list(), [], 'gone before the reset answered');
    // A crash now: the restart finds nothing to restore.
    const second = await gateway(database, [DAY, PER_CHILD], { seconds: MIDNIGHT + 20 });
    assert.equal(used(second.limiter, 86_400), 0);
    burst(second.limiter, '/org/alice', 3);
    await second.persistence.save();
    await second.limiter.deleteRule({ scope: 'user_path', subject: '/org', periodSeconds: 3600 });
    assert.deepEqual(await second.storage.list(), []);
    await second.persistence.close();

    const third = await gateway(database, [DAY, PER_CHILD], { seconds: MIDNIGHT + 30 });
    burst(third.limiter, '/org/alice', 3);
    await third.persistence.save();
    await third.limiter.resetAll();
    assert.deepEqual(await third.storage.list(), []);
    await third.persistence.close();
  });

  it("restores the children of a per-child rule (within max_children), not a rule whose per_child changed", async () => {
    const database = new MemoryStore();
    const first = await gateway(database, [PER_CHILD, DAY], { seconds: MIDNIGHT + 10 });
    burst(first.limiter, '/org/alice', 2);
    first.setSeconds(MIDNIGHT + 20);
    burst(first.limiter, '/org/bob/x', 3);
    burst(first.limiter, '/org', 1);
    burst(first.limiter, '/team', 1);
    await first.persistence.close();

    const second = await gateway(database, [PER_CHILD, DAY], { seconds: MIDNIGHT + 60 });
    assert.deepEqual((await second.limiter.status({ expandChildren: true })).map((s) => [s.user_path, s.requests_used]), [
      ['/org', 1],
      ['/org/alice', 2],
      ['/org/bob', 3],
      ['/team', 1],
    ]);
    refused(second.limiter.admit({ userPath: '/org/bob' }));
    await second.persistence.close();

    // With room for one child only, the one restored first (the least recent) makes way.
    const narrow = await gateway(database, [PER_CHILD, DAY], { seconds: MIDNIGHT + 60, maxChildren: 1 });
    assert.deepEqual((await narrow.limiter.status({ expandChildren: true })).map((s) => s.user_path), ['/org', '/org/bob', '/team']);
    await narrow.persistence.close();

    // /org is no longer per-child: the rule moved, its counters start over.
    const moved = await gateway(database, [{ ...PER_CHILD, perChild: undefined }, DAY], { seconds: MIDNIGHT + 60 });
    assert.equal(used(moved.limiter, 3600, '/org'), 0);
    assert.deepEqual((await moved.storage.list()).map((c) => c.key), [TEAM_KEY]);
    await moved.persistence.close();
  });

  it('tries a failed save again with the next one, but never brings back a reset counter', async () => {
    const database = new MemoryStore();
    const gw = await gateway(database, [DAY], { seconds: MIDNIGHT + 10 });
    burst(gw.limiter, '/team', 2);
    gw.storage.failing = true;
    mock.timers.tick(1000);
    await settle();
    gw.storage.failing = false;
    mock.timers.tick(1000);
    await settle();
    assert.equal((await gw.storage.list())[0]?.requestsCurrent, 2);

    burst(gw.limiter, '/team', 1);
    gw.storage.failing = true;
    mock.timers.tick(1000);
    await settle();
    gw.storage.failing = false;
    await gw.limiter.resetRule({ scope: 'user_path', subject: '/team', periodSeconds: 86_400 });
    await gw.persistence.close();
    assert.deepEqual(await gw.storage.list(), []);
  });
});
