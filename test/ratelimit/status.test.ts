import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admitted, immediate, MIDNIGHT, rule, setup, T0 } from './helpers.ts';

describe('status', () => {
  it('lists every rule with its counters, sorted by scope, subject and period; every record is whole', () => {
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

    const status = immediate(limiter.status());
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
      in_flight: 0,
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
      in_flight: 0,
      window_start: '2023-11-15T00:00:00Z',
      window_end: '2023-11-16T00:00:00Z',
      created_at: '2024-01-02T03:04:05Z',
      updated_at: '2024-01-02T03:04:05Z',
    });
    // The unreleased ticket for /a holds a slot on the /A concurrency rule (same subject, any case).
    assert.deepEqual(status[2], {
      scope: 'user_path',
      subject: '/A',
      user_path: '/A',
      source: 'manual',
      period_label: 'concurrent',
      period_seconds: 0,
      max_requests: 3,
      requests_used: 1,
      requests_remaining: 2,
      tokens_used: 0,
      in_flight: 1,
      created_at: '2024-01-02T03:04:05Z',
      updated_at: '2024-01-02T03:04:05Z',
    });
    assert.deepEqual(status[0], {
      scope: 'model',
      subject: 'p/m',
      user_path: '',
      source: 'manual',
      period_label: '300s',
      period_seconds: 300,
      max_requests: 4,
      requests_used: 0,
      requests_remaining: 4,
      tokens_used: 0,
      in_flight: 0,
      window_start: '2023-11-15T00:00:00Z',
      window_end: '2023-11-15T00:05:00Z',
      created_at: '2024-01-02T03:04:05Z',
      updated_at: '2024-01-02T03:04:05Z',
    });
    assert.equal(limiter.getRule({ scope: 'user_path', subject: 'a/', periodSeconds: 60 })?.subject, '/a');
    assert.equal(limiter.getRule({ scope: 'user_path', subject: '/a', periodSeconds: 3600 }), undefined);
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
    const usage = immediate(limiter.usageFor('/Team/me'));
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

  it('gives each governing rule its usage ratios, unclamped, and the seconds until its window resets', () => {
    // T0 + 15 is 2023-11-14T22:14:15Z: 45 s left in the minute, 2745 in the hour, 6345 in the day.
    const { clock, limiter } = setup(
      [
        rule('user_path', '/', 86400, { maxRequests: 100 }),
        rule('user_path', '/team', 0, { maxRequests: 5 }),
        rule('user_path', '/team', 60, { maxRequests: 2 }),
        rule('user_path', '/team', 3600, { maxTokens: 40 }),
      ],
      { startSeconds: T0 + 15 },
    );
    admitted(limiter.admit({ userPath: '/team/me' }, { holdSlot: false }));
    const held = admitted(limiter.admit({ userPath: '/team/me' }));
    limiter.chargeTokens({ userPath: '/team/me' }, 50);

    const usage = immediate(limiter.usageFor('/team/me'));
    const project = (u: (typeof usage)[number]) => [u.subject, u.period_label, u.requests_usage_ratio, u.tokens_usage_ratio, u.resets_in_seconds, u.exhausted];
    assert.deepEqual(usage.map(project), [
      ['/', 'day', 0.02, undefined, 6345, false],
      ['/team', 'concurrent', 0.2, undefined, undefined, false],
      ['/team', 'minute', 1, undefined, 45, true],
      ['/team', 'hour', undefined, 1.25, 2745, true],
    ]);
    // Absent means absent, not undefined: a ratio without its cap, a reset on a concurrent rule.
    assert.deepEqual(Object.keys(usage[1]!).filter((k) => k.endsWith('_ratio') || k === 'resets_in_seconds'), ['requests_usage_ratio']);
    assert.deepEqual(Object.keys(usage[3]!).filter((k) => k.endsWith('_ratio') || k === 'resets_in_seconds'), ['tokens_usage_ratio', 'resets_in_seconds']);

    // 30 s into the next minute the previous window still weighs half: floor(2 × 30/60) = 1.
    held.release();
    clock.setSeconds(T0 + 90);
    const later = immediate(limiter.usageFor('/team/me'));
    assert.deepEqual(later.map(project), [
      ['/', 'day', 0.02, undefined, 6270, false],
      ['/team', 'concurrent', 0, undefined, undefined, false],
      ['/team', 'minute', 0.5, undefined, 30, false],
      ['/team', 'hour', undefined, 1.25, 2670, true],
    ]);
  });
});
