/**
 * Per-child rules in the engine (CONTRACT §9), over the memory store on a clock that moves only
 * when told to: each direct child of the rule's path counts on a counter of its own with the
 * rule's caps, the path itself on the rule's own, and the children kept stay within max_children.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { RateLimiter, type RuleDefinition } from '../../src/ratelimit/index.ts';
import { admitted, immediate, refused, rule, T0 } from './helpers.ts';

function perChild(subject: string, periodSeconds: number, caps: { maxRequests?: number; maxTokens?: number }): RuleDefinition {
  return { ...rule('user_path', subject, periodSeconds, caps), perChild: true };
}

function setup(rules: RuleDefinition[], options: { maxChildren?: number; startSeconds?: number } = {}) {
  let nowMs = (options.startSeconds ?? T0) * 1000;
  const clock = {
    now: () => nowMs,
    setSeconds(seconds: number): void {
      nowMs = seconds * 1000;
    },
  };
  const store = new MemoryCounterStore({ maxChildren: options.maxChildren });
  const limiter = new RateLimiter({ clock, store });
  limiter.replaceRules(rules);
  return { clock, limiter, store };
}

function burst(limiter: RateLimiter, userPath: string, count: number): void {
  for (let i = 0; i < count; i++) admitted(limiter.admit({ userPath })).release();
}

const childrenOf = (limiter: RateLimiter) => immediate(limiter.status()).length;

async function expanded(limiter: RateLimiter) {
  return (await limiter.status({ expandChildren: true })).map((s) => ({ user_path: s.user_path, period_seconds: s.period_seconds, requests_used: s.requests_used, in_flight: s.in_flight }));
}

describe('per-child rules', () => {
  it('give every direct child its own counter with the rule caps, shared by everything below the child', () => {
    const { limiter } = setup([perChild('/team', 60, { maxRequests: 2 })]);
    burst(limiter, '/team/alice/x', 1);
    burst(limiter, '/team/alice/y', 1);
    const refusal = refused(limiter.admit({ userPath: '/team/alice' }));
    assert.equal(refusal.message, 'rate limit exceeded for /team/alice: minute request limit of 2 reached');
    assert.equal(refusal.breach.subject, '/team/alice');
    assert.equal(refusal.retryAfterSeconds, 61);
    assert.deepEqual(refusal.headers, { requests: { limit: 2, remaining: 0, reset: 61 } });
    assert.equal(refusal.userPathBreached, true);
    // Bob has a counter of his own.
    const ticket = admitted(limiter.admit({ userPath: '/team/bob/deep/below' }));
    assert.deepEqual(ticket.headers, { requests: { limit: 2, remaining: 1, reset: 60 } });
    burst(limiter, '/team/bob', 1);
    refused(limiter.admit({ userPath: '/team/bob/z' }));
  });

  it('counts a request on the path itself on the rule own counter', () => {
    const { limiter } = setup([perChild('/team', 60, { maxRequests: 2 })]);
    burst(limiter, '/team', 2);
    assert.equal(refused(limiter.admit({ userPath: '/team' })).message, 'rate limit exceeded for /team: minute request limit of 2 reached');
    burst(limiter, '/team/alice', 2);
    const [own] = immediate(limiter.status());
    assert.equal(own!.requests_used, 2);
    assert.equal(own!.per_child, true);
    assert.equal(own!.user_path, '/team');
  });

  it('ignores case, as every match does, and names the child in lowercase', () => {
    const { limiter } = setup([perChild('/Team', 60, { maxRequests: 2 })]);
    burst(limiter, '/team/ALICE', 1);
    burst(limiter, '/TEAM/alice/x', 1);
    assert.equal(refused(limiter.admit({ userPath: '/Team/Alice' })).message, 'rate limit exceeded for /Team/alice: minute request limit of 2 reached');
  });

  it('works on the root: each top-level path is a child of /', () => {
    const { limiter } = setup([perChild('/', 60, { maxRequests: 1 })]);
    burst(limiter, '/a/b', 1);
    burst(limiter, '/b', 1);
    assert.equal(refused(limiter.admit({ userPath: '/a' })).message, 'rate limit exceeded for /a: minute request limit of 1 reached');
    burst(limiter, '/', 1);
  });

  it('sits beside a shared rule on the same path: both are checked, the shared one for everyone', () => {
    const { limiter } = setup([perChild('/team', 60, { maxRequests: 2 }), rule('user_path', '/team', 3600, { maxRequests: 3 })]);
    burst(limiter, '/team/alice', 2);
    assert.match(refused(limiter.admit({ userPath: '/team/alice' })).message, /for \/team\/alice: minute request limit of 2/);
    burst(limiter, '/team/bob', 1);
    // The shared hour cap of 3 is reached: bob, below his own cap, is refused by it.
    assert.equal(refused(limiter.admit({ userPath: '/team/bob' })).message, 'rate limit exceeded for /team: hour request limit of 3 reached');
  });

  it('charges tokens to the child that made the request', () => {
    const { limiter } = setup([perChild('/team', 60, { maxTokens: 100 })]);
    burst(limiter, '/team/alice', 1);
    immediate(limiter.chargeTokens({ userPath: '/team/alice/x' }, 100));
    assert.equal(refused(limiter.admit({ userPath: '/team/alice' })).message, 'rate limit exceeded for /team/alice: minute token limit of 100 reached');
    burst(limiter, '/team/bob', 1);
  });

  it('shows the caller the counter that governs it in usageFor', () => {
    const { limiter } = setup([perChild('/team', 60, { maxRequests: 5 }), rule('user_path', '/', 60, { maxRequests: 100 })]);
    burst(limiter, '/team/alice/x', 3);
    burst(limiter, '/team/bob', 1);
    const usage = immediate(limiter.usageFor('/team/alice/y'));
    assert.deepEqual(usage.map((u) => [u.subject, u.user_path, u.requests_used, u.per_child]), [
      ['/', '/', 4, undefined],
      ['/team', '/team/alice', 3, true],
    ]);
    const stranger = immediate(limiter.usageFor('/team/carol'));
    assert.deepEqual(stranger.map((u) => [u.user_path, u.requests_used, u.exhausted]), [
      ['/', 4, false],
      ['/team/carol', 0, false],
    ]);
    assert.deepEqual(immediate(limiter.usageFor('/team')).map((u) => [u.user_path, u.requests_used]), [
      ['/', 4],
      ['/team', 0],
    ]);
  });

  it('lists the active children after their rule with expandChildren', async () => {
    const { limiter, clock } = setup([perChild('/team', 60, { maxRequests: 5 }), rule('user_path', '/', 60, { maxRequests: 100 })]);
    burst(limiter, '/team/bob', 1);
    burst(limiter, '/team/alice/x', 2);
    burst(limiter, '/team', 1);
    assert.deepEqual(await expanded(limiter), [
      { user_path: '/', period_seconds: 60, requests_used: 4, in_flight: 0 },
      { user_path: '/team', period_seconds: 60, requests_used: 1, in_flight: 0 },
      { user_path: '/team/alice', period_seconds: 60, requests_used: 2, in_flight: 0 },
      { user_path: '/team/bob', period_seconds: 60, requests_used: 1, in_flight: 0 },
    ]);
    assert.equal(childrenOf(limiter), 2, 'the plain list has no child records');
    // Two windows on, nothing of theirs matters: they are no longer listed.
    clock.setSeconds(T0 + 120);
    assert.deepEqual((await expanded(limiter)).map((s) => s.user_path), ['/', '/team']);
  });

  it('resets a per-child rule with all its children, and deleting it clears them', () => {
    const { limiter } = setup([perChild('/team', 60, { maxRequests: 1 })]);
    burst(limiter, '/team/alice', 1);
    burst(limiter, '/team', 1);
    refused(limiter.admit({ userPath: '/team/alice' }));
    assert.equal(immediate(limiter.resetRule({ scope: 'user_path', subject: '/team', periodSeconds: 60 })), true);
    burst(limiter, '/team/alice', 1);
    burst(limiter, '/team', 1);
    assert.equal(immediate(limiter.deleteRule({ scope: 'user_path', subject: '/team', periodSeconds: 60 })), true);
    limiter.upsertRule(perChild('/team', 60, { maxRequests: 1 }));
    burst(limiter, '/team/alice', 1);
  });

  it('moves the rule when per_child changes: its counters restart', () => {
    const { limiter } = setup([rule('user_path', '/team', 60, { maxRequests: 2 })]);
    burst(limiter, '/team/alice', 2);
    limiter.upsertRule(perChild('/team', 60, { maxRequests: 2 }));
    burst(limiter, '/team/alice', 2);
    burst(limiter, '/team/bob', 2);
    // Editing only the caps keeps the children's counters.
    limiter.upsertRule(perChild('/team', 60, { maxRequests: 3 }));
    burst(limiter, '/team/alice', 1);
    refused(limiter.admit({ userPath: '/team/alice' }));
    limiter.replaceRules([rule('user_path', '/team', 60, { maxRequests: 2 })]);
    burst(limiter, '/team/alice', 2);
  });
});

describe('per-child rules within max_children', () => {
  it('refuses a new child while every kept child is active, until the least recently used goes idle', () => {
    const { limiter, clock } = setup([perChild('/team', 60, { maxRequests: 10 })], { maxChildren: 2 });
    burst(limiter, '/team/a', 1);
    clock.setSeconds(T0 + 30);
    burst(limiter, '/team/b', 1);
    const refusal = refused(limiter.admit({ userPath: '/team/c/x' }));
    assert.equal(refusal.message, 'rate limit exceeded for /team/c: the minute limit of /team already counts 2 active children (rate_limits.max_children)');
    assert.equal(refusal.breach.kind, 'children');
    assert.equal(refusal.headers, undefined);
    // a counted in the window starting at T0: it matters until T0 + 120.
    assert.equal(refusal.retryAfterSeconds, 90);
    // The children kept still count, and the path itself too.
    burst(limiter, '/team/a', 1);
    burst(limiter, '/team', 1);
    clock.setSeconds(T0 + 119);
    refused(limiter.admit({ userPath: '/team/c' }));
    clock.setSeconds(T0 + 120);
    // Both are idle now (their requests were in the window starting at T0): c and d take their places.
    burst(limiter, '/team/c', 1);
    burst(limiter, '/team/d', 1);
    assert.equal(refused(limiter.admit({ userPath: '/team/a' })).retryAfterSeconds, 120);
  });

  it('drops the least recently used idle child first', async () => {
    const { limiter, clock } = setup([perChild('/team', 60, { maxRequests: 3 })], { maxChildren: 2 });
    burst(limiter, '/team/a', 1);
    clock.setSeconds(T0 + 60);
    burst(limiter, '/team/b', 1);
    clock.setSeconds(T0 + 120);
    // a (window T0) is idle, b (window T0 + 60) is not: c replaces a.
    burst(limiter, '/team/c', 3);
    assert.deepEqual((await expanded(limiter)).map((s) => [s.user_path, s.requests_used]), [
      ['/team', 0],
      ['/team/b', 1],
      ['/team/c', 3],
    ]);
    refused(limiter.admit({ userPath: '/team/c' }));
    // a comes back with a fresh counter: its old count was over anyway.
    refused(limiter.admit({ userPath: '/team/a' }));
    clock.setSeconds(T0 + 180);
    burst(limiter, '/team/a', 3);
  });

  it('keeps a child holding concurrency slots, and frees its place when the last slot comes back', () => {
    const { limiter } = setup([perChild('/team', 0, { maxRequests: 1 })], { maxChildren: 2 });
    const a = admitted(limiter.admit({ userPath: '/team/a' }));
    const b = admitted(limiter.admit({ userPath: '/team/b' }));
    assert.equal(a.holdsSlots, true);
    assert.equal(refused(limiter.admit({ userPath: '/team/a' })).message, 'rate limit exceeded for /team/a: concurrent request limit of 1 reached');
    const full = refused(limiter.admit({ userPath: '/team/c' }));
    assert.equal(full.breach.kind, 'children');
    assert.equal(full.retryAfterSeconds, 1);
    a.release();
    const c = admitted(limiter.admit({ userPath: '/team/c' }));
    refused(limiter.admit({ userPath: '/team/b' }));
    b.release();
    c.release();
    a.release();
    admitted(limiter.admit({ userPath: '/team/a' })).release();
  });

  it('does not refuse an admission without slots (a batch submission) for a concurrency rule with every child busy', () => {
    const { limiter } = setup([perChild('/team', 0, { maxRequests: 1 }), rule('user_path', '/team', 60, { maxRequests: 5 })], { maxChildren: 2 });
    admitted(limiter.admit({ userPath: '/team/a' }));
    admitted(limiter.admit({ userPath: '/team/b' }));
    assert.equal(refused(limiter.admit({ userPath: '/team/c' })).breach.kind, 'children');
    const submission = admitted(limiter.admit({ userPath: '/team/c' }, { holdSlot: false }));
    assert.equal(submission.holdsSlots, false);
    assert.equal(refused(limiter.admit({ userPath: '/team/c' })).breach.kind, 'children', 'the concurrency rule still refuses requests that take a slot');
  });

  it('counts a child whose cached counter was dropped on its new counter, once', () => {
    const { limiter, clock } = setup([perChild('/team', 60, { maxRequests: 2 })], { maxChildren: 1 });
    burst(limiter, '/team/a/x', 2);
    clock.setSeconds(T0 + 120);
    burst(limiter, '/team/b', 1); // a is idle: dropped for b
    clock.setSeconds(T0 + 240);
    burst(limiter, '/team/a/y', 1); // b is idle: dropped for a's new counter
    // The set cached for /team/a/x held a's old counter: it counts on the new one.
    burst(limiter, '/team/a/x', 1);
    refused(limiter.admit({ userPath: '/team/a/x' }));
    refused(limiter.admit({ userPath: '/team/a/y' }));
  });

  it('stays within max_children over many distinct children as their windows end', () => {
    const { limiter, clock, store } = setup([perChild('/team', 1, { maxRequests: 1 })], { maxChildren: 50 });
    for (let i = 0; i < 5_000; i++) {
      clock.setSeconds(T0 + Math.floor(i / 20));
      burst(limiter, `/team/user-${i}`, 1);
      assert.ok(store.childCount('user_path\u0000/team\u00001\u0000') <= 50);
    }
  });
});
