/** Per-child limits and saved counters in the configuration (CONTRACT §9). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertErrors, load } from './helpers.ts';

describe('config: per-child limits', () => {
  it('seeds per_child user-path limits from YAML and from the JSON form of SET_RATE_LIMIT_*', () => {
    const { rateLimitSeeds } = load(
      `
rate_limits:
  user_paths:
    - { path: /team, limits: [ { period: minute, max_requests: 10, per_child: true }, { period: hour, max_requests: 100, per_child: false } ] }
`,
      { SET_RATE_LIMIT_ORG: '[{"period":"day","max_requests":50,"per_child":true},{"period":"concurrent","max_requests":2}]' },
    );
    assert.deepEqual(rateLimitSeeds, [
      { scope: 'user_path', subject: '/team', periodSeconds: 60, maxRequests: 10, perChild: true, origin: 'floodgate.yaml rate_limits.user_paths[0].limits[0]' },
      { scope: 'user_path', subject: '/team', periodSeconds: 3600, maxRequests: 100, origin: 'floodgate.yaml rate_limits.user_paths[0].limits[1]' },
      { scope: 'user_path', subject: '/org', periodSeconds: 86400, maxRequests: 50, perChild: true, origin: 'env SET_RATE_LIMIT_ORG' },
      { scope: 'user_path', subject: '/org', periodSeconds: 0, maxRequests: 2, origin: 'env SET_RATE_LIMIT_ORG' },
    ]);
  });

  it('refuses per_child on provider and model limits, and a per_child that is not a boolean', () => {
    assertErrors(
      `
providers: { openai: { type: mock } }
rate_limits:
  user_paths:
    - { path: /team, limits: [ { period: minute, max_requests: 1, per_child: maybe } ] }
  providers:
    - { name: openai, limits: [ { period: minute, max_requests: 1, per_child: true } ] }
  models:
    - { model: openai/gpt-4o, limits: [ { period: minute, max_requests: 1 }, { period: hour, max_requests: 1, per_child: yes } ] }
`,
      [
        'rate_limits.user_paths[0].limits[0].per_child: must be a boolean (true/false/yes/no/on/off/1/0)',
        'rate_limits.providers[0].limits[0].per_child: only user-path limits can be per_child (providers and models have no children)',
        'rate_limits.models[0].limits[1].per_child: only user-path limits can be per_child (providers and models have no children)',
      ],
    );
  });

  it('names SET_PROVIDER_RATE_LIMIT_* when its JSON asks for per_child', () => {
    assertErrors('providers: { openai: { type: mock } }', ['SET_PROVIDER_RATE_LIMIT_OPENAI[0].per_child: only user-path limits can be per_child (providers and models have no children)'], {
      SET_PROVIDER_RATE_LIMIT_OPENAI: '[{"period":"minute","max_requests":1,"per_child":true}]',
    });
  });

  it('reads max_children and persist_counters, with their bounds', () => {
    const { config } = load('rate_limits: { max_children: 500, persist_counters: "yes" }');
    assert.equal(config.rate_limits.max_children, 500);
    assert.equal(config.rate_limits.persist_counters, true);
    assertErrors('rate_limits: { max_children: 0, persist_counters: sometimes }', [
      'rate_limits.max_children: must be an integer 1..100000000',
      'rate_limits.persist_counters: must be a boolean (true/false/yes/no/on/off/1/0)',
    ]);
  });
});
