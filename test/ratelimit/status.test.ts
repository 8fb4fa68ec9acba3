import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admitted, CREATED, MIDNIGHT, rule, setup } from './helpers.ts';

describe('status', () => {
  it('lists every rule with its counters, sorted by scope, subject and period', () => {
    const { clock, limiter } = setup(
      [
        rule('user_path', '/b', 60, { maxRequests: 10, maxTokens: 100 }),
        rule('user_path', '/A', 0, { maxRequests: 3 }),
        rule('provider', 'p', 86400, { maxTokens: 50 }),
        rule('user_path', '/a', 60, { maxRequests: 2 }),
        rule('model', 'p/m', 300, { maxRequests: 4 }),
      ],
      { startSeconds: MIDNIGHT + 61 },
    );
    admitted(limiter.admit({ userPath: '/a' }));
    admitted(limiter.admit({ userPath: '/b' }));
    limiter.chargeTokens({ userPath: '/b', provider: 'p', model: 'm' }, 70);
    clock.setSeconds(MIDNIGHT + 62);

    const status = limiter.status();
    assert.deepEqual(
      status.map((s) => `${s.scope} ${s.subject} ${s.period_label}`),
      ['model p/m 300s', 'provider p day', 'user_path /A concurrent', 'user_path /a minute', 'user_path /b minute'],
    );
    assert.deepEqual(status[4], {
      scope: 'user_path',
      subject: '/b',
      user_path: '/b',
      source: 'manual',
      period_label: 'minute',
      period_seconds: 60,
      max_requests: 10,
      max_tokens: 100,
      requests_used: 1,
      requests_remaining: 9,
      tokens_used: 70,
      tokens_remaining: 30,
      window_start: '2023-11-15T00:01:00Z',
      window_end: '2023-11-15T00:02:00Z',
      created_at: '2024-01-02T03:04:05Z',
      updated_at: '2024-01-02T03:04:05Z',
    });
    assert.deepEqual(status[1], {
      scope: 'provider',
      subject: 'p',
      user_path: '',
      source: 'manual',
      period_label: 'day',
      period_seconds: 86400,
      max_tokens: 50,
      requests_used: 0,
      tokens_used: 70,
      tokens_remaining: 0,
      window_start: '2023-11-15T00:00:00Z',
      window_end: '2023-11-16T00:00:00Z',
      created_at: '2024-01-02T03:04:05Z',
      updated_at: '2024-01-02T03:04:05Z',
    });
    // The unreleased ticket for /a holds a slot on the /A concurrency rule (same subject, any case).
    assert.equal(status[2]!.in_flight, 1);
    assert.equal(status[2]!.requests_remaining, 2);
    assert.equal(status[2]!.window_start, undefined);
    assert.equal(status[0]!.window_start, '2023-11-15T00:00:00Z');
    assert.equal(limiter.getRule({ scope: 'user_path', subject: 'a/', periodSeconds: 60 })?.subject, '/a');
    assert.equal(limiter.getRule({ scope: 'user_path', subject: '/a', periodSeconds: 3600 }), undefined);
    assert.equal(limiter.listRules()[0]!.createdAt, CREATED);
  });

  it('shows the rules governing a user path and whether each is exhausted', () => {
    const { limiter } = setup([
      rule('user_path', '/', 86400, { maxRequests: 100 }),
      rule('user_path', '/team', 60, { maxRequests: 1 }),
      rule('user_path', '/team', 0, { maxRequests: 5 }),
      rule('user_path', '/team/other', 60, { maxRequests: 1 }),
      rule('user_path', '/teammate', 60, { maxRequests: 1 }),
    ]);
    admitted(limiter.admit({ userPath: '/team/me' }, { holdSlot: false }));
    const usage = limiter.usageFor('/Team/me');
    assert.deepEqual(
      usage.map((u) => [u.subject, u.period_label, u.exhausted]),
      [
        ['/', 'day', false],
        ['/team', 'concurrent', false],
        ['/team', 'minute', true],
      ],
    );
    assert.equal(usage[2]!.requests_used, 1);
  });
});
