/**
 * The rule manager across gateways that share their storage: a write announced by one is reloaded by
 * the others, counters of unchanged rules survive a reload, a periodic reload catches what no
 * announcement said, and a reload never undoes a write that happened while it read storage.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChangeFeed } from '../../src/admin/definitions.ts';
import { startRuleManager } from '../../src/admin/rate-limit-rules.ts';
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { RateLimiter, type RuleKey } from '../../src/ratelimit/index.ts';
import { MemoryStorage, MemoryStore } from '../../src/storage/memory.ts';

/** An announcement bus between managers in one process, standing in for Redis pub/sub. */
class Bus {
  readonly #feeds: Array<{ listeners: Array<() => void> }> = [];

  feed(): ChangeFeed {
    const own = { listeners: [] as Array<() => void> };
    this.#feeds.push(own);
    return {
      announce: async () => {
        for (const other of this.#feeds) if (other !== own) for (const listener of other.listeners) listener();
      },
      onChange: (listener: () => void) => void own.listeners.push(listener),
    };
  }
}

async function gateway(storage: MemoryStorage) {
  const limiter = new RateLimiter({ store: new MemoryCounterStore() });
  const { manager } = await startRuleManager(storage.rules, limiter, [], Date.now);
  return { limiter, manager };
}

const failOnError = (err: unknown): void => assert.fail(`reload failed: ${String(err)}`);

const HOURLY: RuleKey = { scope: 'user_path', subject: '/team', periodSeconds: 3600 };

async function eventually(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await sleep(5);
  assert.ok(check(), 'never happened');
}

describe('rule manager: gateways sharing storage', () => {
  it('reload the rules another gateway announced, keeping the counters of rules that stay', async () => {
    const shared = new MemoryStore();
    const bus = new Bus();
    const a = await gateway(new MemoryStorage(shared));
    const b = await gateway(new MemoryStorage(shared));
    const stops = [a.manager.follow(bus.feed(), { intervalMs: 60_000, onError: failOnError }), b.manager.follow(bus.feed(), { intervalMs: 60_000, onError: failOnError })];
    try {
      await a.manager.put({ ...HOURLY, maxRequests: 2 });
      await eventually(() => b.limiter.getRule(HOURLY)?.maxRequests === 2);
      assert.equal((b.limiter.admit({ userPath: '/team/x' }) as { ok: boolean }).ok, true);

      await a.manager.put({ scope: 'provider', subject: 'openai', periodSeconds: 60, maxRequests: 9 });
      await eventually(() => b.limiter.ruleCount === 2);
      assert.equal((b.limiter.admit({ userPath: '/team' }) as { ok: boolean }).ok, true);
      assert.equal((b.limiter.admit({ userPath: '/team' }) as { ok: boolean }).ok, false, 'the count from before the reload was kept');

      await b.manager.delete(HOURLY);
      await eventually(() => a.limiter.getRule(HOURLY) === undefined);
    } finally {
      for (const stop of stops) stop();
    }
  });

  it('reload periodically what no announcement told', async () => {
    const shared = new MemoryStore();
    const b = await gateway(new MemoryStorage(shared));
    const silent: ChangeFeed = { announce: async () => {}, onChange: () => {} };
    const stop = b.manager.follow(silent, { intervalMs: 20, onError: failOnError });
    try {
      const writer = await gateway(new MemoryStorage(shared));
      await writer.manager.put({ ...HOURLY, maxRequests: 5 });
      await eventually(() => b.limiter.getRule(HOURLY)?.maxRequests === 5);
    } finally {
      stop();
    }
  });

  it('never let a reload that read storage before a write undo it', async () => {
    const storage = new MemoryStorage();
    const { limiter, manager } = await gateway(storage);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const listRules = storage.rules.list.bind(storage.rules);
    storage.rules.list = async () => {
      const rows = await listRules(); // read before the write below
      await gate;
      return rows;
    };
    const reload = manager.reload();
    const put = manager.put({ ...HOURLY, maxRequests: 3 });
    await sleep(10);
    open();
    await Promise.all([reload, put]);
    assert.equal(limiter.getRule(HOURLY)?.maxRequests, 3);
  });
});
