/**
 * End-to-end: per-child rules (CONTRACT §9) over HTTP, on a gateway whose clock the test sets:
 * each child of the rule's path has its own counter, 429s and headers name and count the child,
 * the admin list expands the children, /v1/usage shows the caller its child's counter, and a full
 * rule refuses a new child until one goes idle. Then counters that survive a restart.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { admin, assertRateLimited, assertRefusalTriple, chat, chatAs, USER_PATH_HEADER, type StatusRecord } from '../support/rate-limits.ts';

/** 2030-01-01T00:00:10Z: ten seconds into a minute, an hour and a day window. */
const T0 = 1_893_456_010;

const MOCK = chat('mock/mock-1');

function clock(seconds = T0) {
  let nowMs = seconds * 1000;
  return {
    now: () => nowMs,
    set(at: number): void {
      nowMs = at * 1000;
    },
  };
}

const ask = (gw: TestGateway, userPath: string): Promise<TestResponse> => chatAs(gw, userPath, MOCK);

async function ok(gw: TestGateway, userPath: string, times = 1): Promise<TestResponse> {
  let res: TestResponse | undefined;
  for (let i = 0; i < times; i++) {
    res = await ask(gw, userPath);
    assert.equal(res.status, 200, `${userPath}: ${res.text}`);
  }
  return res!;
}

async function listed(gw: TestGateway, query = ''): Promise<StatusRecord[]> {
  const res = await admin(gw, 'GET', `/admin/rate-limits${query}`, undefined, '');
  assert.equal(res.status, 200, res.text);
  return res.json().rate_limits;
}

const brief = (records: Array<StatusRecord & { per_child?: boolean }>) =>
  records.map((r) => [r.user_path, r.period_label, r.requests_used, r.per_child ?? false]);

const TEAM_RULES = `
rate_limits:
  user_paths:
    - path: /team
      limits:
        - { period: minute, max_requests: 2, per_child: true }
        - { period: hour, max_requests: 5 }
`;

describe('rate limits: per-child rules over HTTP', { concurrency: true, timeout: 60_000 }, () => {
  it('counts each child apart, below it together, the path on its own, beside a shared rule', async () => {
    const time = clock();
    const gw = await startTestGateway({ yaml: TEAM_RULES, now: time.now });
    try {
      let res = await ok(gw, '/team/alice/x');
      assert.equal(res.headers.get('x-ratelimit-limit-requests'), '2');
      assert.equal(res.headers.get('x-ratelimit-remaining-requests'), '1');
      assert.equal(res.headers.get('x-ratelimit-reset-requests'), '50');
      res = await ok(gw, '/team/alice/y');
      assert.equal(res.headers.get('x-ratelimit-remaining-requests'), '0');
      res = await ask(gw, '/team/Alice');
      // Two in the window's tenth second: one second into the next window they weigh 1 of 2.
      assert.equal(assertRateLimited(res, 'rate limit exceeded for /team/alice: minute request limit of 2 reached'), 51);
      assertRefusalTriple(res, 'requests', 2);

      await ok(gw, '/team/bob', 2);
      await ok(gw, '/team');
      // Five requests counted on the shared hour cap: carol, with a fresh child counter, meets it.
      assertRateLimited(await ask(gw, '/team/carol'), 'rate limit exceeded for /team: hour request limit of 5 reached');

      assert.deepEqual(brief(await listed(gw)), [
        ['/team', 'minute', 1, true],
        ['/team', 'hour', 5, false],
      ]);
      const expanded = await listed(gw, '?expand=children');
      assert.deepEqual(brief(expanded), [
        ['/team', 'minute', 1, true],
        ['/team/alice', 'minute', 2, true],
        ['/team/bob', 'minute', 2, true],
        ['/team', 'hour', 5, false],
      ]);
      const alice = expanded[1]!;
      assert.equal(alice.subject, '/team');
      assert.equal(alice.requests_remaining, 0);
      assert.equal(alice.window_start, '2030-01-01T00:00:00Z');

      const usage = await gw.request('GET', '/v1/usage', { headers: { [USER_PATH_HEADER]: '/team/alice/z' } });
      assert.equal(usage.status, 200, usage.text);
      const records = usage.json().rate_limits as Array<StatusRecord & { per_child?: boolean; exhausted: boolean }>;
      assert.deepEqual(records.map((r) => [r.user_path, r.period_label, r.requests_used, r.exhausted]), [
        ['/team/alice', 'minute', 2, true],
        ['/team', 'hour', 5, true],
      ]);

      // The dry run speaks of the child too, and makes no counter for one never seen.
      const explain = async (userPath: string) => {
        const answer = await admin(gw, 'GET', `/admin/rate-limits/explain?model=mock/mock-1&user_path=${encodeURIComponent(userPath)}`, undefined, '');
        assert.equal(answer.status, 200, answer.text);
        return answer.json() as { decision: string; rules: StatusRecord[]; breach?: { subject: string; message: string } };
      };
      let explained = await explain('/team/alice/x');
      assert.equal(explained.decision, 'refused');
      assert.deepEqual(explained.rules.map((r) => [r.user_path, r.requests_used]), [['/team/alice', 2], ['/team', 5]]);
      explained = await explain('/team/dave');
      assert.deepEqual(explained.rules.map((r) => [r.user_path, r.requests_used]), [['/team/dave', 0], ['/team', 5]]);
      assert.equal(explained.breach?.message, 'rate limit exceeded for /team: hour request limit of 5 reached');

      // Both alice's own cap and the shared one refuse her now: the longest Retry-After is reported.
      assertRateLimited(await ask(gw, '/team/alice'), 'rate limit exceeded for /team: hour request limit of 5 reached');
    } finally {
      await gw.close();
    }
  });

  it('takes per_child through the admin API; a change of per_child moves the rule and its counters restart', async () => {
    const time = clock();
    const gw = await startTestGateway({ now: time.now });
    try {
      const put = (body: Record<string, unknown>) => admin(gw, 'PUT', '/admin/rate-limits', body, '');
      let res = await put({ user_path: '/org', limit_key: { period: 'minute' }, max_requests: 1, per_child: true });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json().rate_limits[0].per_child, true);
      await ok(gw, '/org/a');
      await ok(gw, '/org/b');
      assertRateLimited(await ask(gw, '/org/a/deeper'), 'rate limit exceeded for /org/a: minute request limit of 1 reached');
      // Caps only: the children keep their counts.
      res = await put({ user_path: '/org', limit_key: { period: 'minute' }, max_requests: 2, per_child: true });
      assert.equal(res.status, 200, res.text);
      await ok(gw, '/org/a');
      assert.equal((await ask(gw, '/org/a')).status, 429);
      // No per_child: the rule is moved to one shared counter, starting at zero.
      res = await put({ user_path: '/org', limit_key: { period: 'minute' }, max_requests: 2 });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json().rate_limits[0].per_child, undefined);
      assert.equal(res.json().rate_limits[0].requests_used, 0);
      await ok(gw, '/org/a');
      await ok(gw, '/org/b');
      assertRateLimited(await ask(gw, '/org/c'), 'rate limit exceeded for /org: minute request limit of 2 reached');

      const bad = async (body: Record<string, unknown>, message: string, param: string) => {
        const answer = await put(body);
        assert.equal(answer.status, 400, answer.text);
        assert.equal(answer.json().error.message, message);
        assert.equal(answer.json().error.param, param);
      };
      await bad({ user_path: '/org', limit_key: { period: 'minute' }, max_requests: 2, per_child: 'yes' }, 'per_child: must be true or false', 'per_child');
      await bad(
        { scope: 'provider', subject: 'mock', limit_key: { period: 'minute' }, max_requests: 2, per_child: true },
        'per_child is only for user-path rules (a provider rule has no children)',
        'per_child',
      );
      res = await admin(gw, 'GET', '/admin/rate-limits?expand=everything', undefined, '');
      assert.equal(res.status, 400);
      assert.equal(res.json().error.message, 'expand: must be children');
    } finally {
      await gw.close();
    }
  });

  it('resets every child of a per-child rule with the rule', async () => {
    const gw = await startTestGateway({ yaml: TEAM_RULES, now: clock().now });
    try {
      await ok(gw, '/team/alice', 2);
      await ok(gw, '/team/bob', 1);
      const res = await admin(gw, 'POST', '/admin/rate-limits/reset-one', { user_path: '/team', period: 'minute' }, '');
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(brief(await listed(gw, '?expand=children')), [
        ['/team', 'minute', 0, true],
        ['/team', 'hour', 3, false],
      ]);
      await ok(gw, '/team/alice', 2);
    } finally {
      await gw.close();
    }
  });

  it('refuses a new child while max_children active children fill the rule, until one goes idle', async () => {
    const time = clock();
    const gw = await startTestGateway({
      yaml: 'rate_limits:\n  max_children: 2\n  user_paths: [ { path: /team, limits: [ { period: minute, max_requests: 5, per_child: true } ] } ]\n',
      now: time.now,
    });
    try {
      await ok(gw, '/team/a');
      await ok(gw, '/team/b');
      const res = await ask(gw, '/team/c/x');
      assert.equal(assertRateLimited(res, 'rate limit exceeded for /team/c: the minute limit of /team already counts 2 active children (rate_limits.max_children)'), 110);
      assert.deepEqual(res.headers.get('x-ratelimit-limit-requests'), null);
      await ok(gw, '/team/a/y');
      await ok(gw, '/team');
      time.set(T0 + 110);
      await ok(gw, '/team/c/x');
      await ok(gw, '/team/d');
      assert.deepEqual(brief(await listed(gw, '?expand=children')).map((r) => r[0]), ['/team', '/team/c', '/team/d']);
    } finally {
      await gw.close();
    }
  });

  it('children_limit lists a rule\'s busiest children first; active_children counts them all', async () => {
    const gw = await startTestGateway({ yaml: 'rate_limits:\n  user_paths: [ { path: /team, limits: [ { period: minute, max_requests: 3, per_child: true } ] } ]\n', now: clock().now });
    try {
      await ok(gw, '/team/a');
      await ok(gw, '/team/b', 3);
      await ok(gw, '/team/c', 2);
      await ok(gw, '/team/d');
      const top = await listed(gw, '?expand=children&children_limit=2');
      assert.deepEqual(top.map((r) => [r.user_path, r.requests_used, r.requests_remaining, (r as { active_children?: number }).active_children]), [
        ['/team', 0, 3, 4],
        ['/team/b', 3, 0, undefined],
        ['/team/c', 2, 1, undefined],
      ]);
      const all = await listed(gw, '?expand=children');
      assert.deepEqual(all.map((r) => [r.user_path, (r as { active_children?: number }).active_children]), [['/team', 4], ['/team/a', undefined], ['/team/b', undefined], ['/team/c', undefined], ['/team/d', undefined]]);
      assert.equal((await listed(gw, '?expand=children&children_limit=0')).length, 1);
      assert.ok(!('active_children' in (await listed(gw))[0]!), 'only with the children expanded');
      for (const [query, message] of [
        ['?children_limit=2', 'children_limit: needs expand=children'],
        ['?expand=children&children_limit=1001', 'children_limit: must be an integer from 0 to 1000'],
        ['?expand=children&children_limit=two', 'children_limit: must be an integer from 0 to 1000'],
      ] as const) {
        const res = await admin(gw, 'GET', `/admin/rate-limits${query}`, undefined, '');
        assert.equal(res.status, 400, query);
        assert.deepEqual([res.json().error.message, res.json().error.param], [message, 'children_limit'], query);
      }
    } finally {
      await gw.close();
    }
  });
});

describe('rate limits: counters that survive a restart (persist_counters)', { timeout: 60_000 }, () => {
  const yaml = 'rate_limits:\n  persist_counters: true\n  user_paths: [ { path: /team, limits: [ { period: day, max_requests: 10, per_child: true } ] } ]\n';

  it("keeps a day window's count through a restart, and a reset before it stays reset", async () => {
    const time = clock();
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-persist-'));
    let gw: TestGateway | undefined;
    const restart = async (): Promise<TestGateway> => {
      await gw?.close();
      gw = await startTestGateway({ yaml, now: time.now, dir });
      return gw;
    };
    try {
      await ok(await restart(), '/team/alice', 4);
      await ok(gw!, '/team', 1);
      time.set(T0 + 3600);
      assert.deepEqual(brief(await listed(await restart(), '?expand=children')), [
        ['/team', 'day', 1, true],
        ['/team/alice', 'day', 4, true],
      ]);
      await ok(gw!, '/team/alice', 6);
      assert.equal((await ask(gw!, '/team/alice')).status, 429);
      const res = await admin(gw!, 'POST', '/admin/rate-limits/reset-one', { user_path: '/team', period: 'day' }, '');
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(brief(await listed(await restart(), '?expand=children')), [['/team', 'day', 0, true]]);
      await ok(gw!, '/team/alice', 10);
    } finally {
      await gw?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
