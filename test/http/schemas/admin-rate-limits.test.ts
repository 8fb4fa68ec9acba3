import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { z } from 'zod';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { deleteRateLimitBody, listRateLimitsQuery, putRateLimitBody, resetOneRateLimitBody, resetRateLimitsBody } from '../../../src/http/schemas/admin-rate-limits.ts';
import { parseBody } from '../../../src/http/validation.ts';

/** The 400's `param` and message for `body`. */
function refusal(schema: z.ZodType, body: unknown): [string | null, string] {
  try {
    parseBody(schema, body);
  } catch (err) {
    assert.ok(err instanceof GatewayError && err.status === 400, String(err));
    return [err.param, err.message];
  }
  assert.fail(`accepted ${JSON.stringify(body)}`);
}

const ok = { user_path: '/v', limit_key: { period: 'minute' }, max_requests: 1 };

describe('rate-limit admin bodies', () => {
  it('PUT comes out as the engine\'s rule write: subject normalised, period in seconds, caps', () => {
    assert.deepEqual(parseBody(putRateLimitBody, { user_path: '  team//a/ ', limit_key: { period: 'hour' }, max_requests: 5, max_tokens: 700 }), {
      scope: 'user_path', subject: '/team/a', periodSeconds: 3600, maxRequests: 5, maxTokens: 700,
    });
    assert.deepEqual(parseBody(putRateLimitBody, { scope: 'model', subject: ' up/gpt-x ', limit_key: { period: '300' }, max_tokens: 9, max_requests: null }), {
      scope: 'model', subject: 'up/gpt-x', periodSeconds: 300, maxRequests: undefined, maxTokens: 9,
    });
    assert.deepEqual(parseBody(putRateLimitBody, { scope: 'user_path', user_path: '/u', limit_key: { period_seconds: 31_622_400 }, max_requests: Number.MAX_SAFE_INTEGER }), {
      scope: 'user_path', subject: '/u', periodSeconds: 31_622_400, maxRequests: Number.MAX_SAFE_INTEGER, maxTokens: undefined,
    });
    assert.deepEqual(parseBody(putRateLimitBody, { user_path: '', limit_key: { period: 'concurrent' }, max_requests: 2 }), {
      scope: 'user_path', subject: '/', periodSeconds: 0, maxRequests: 2, maxTokens: undefined,
    });
  });

  it('PUT takes per_child on user-path rules (false or null: a plain rule)', () => {
    assert.deepEqual(parseBody(putRateLimitBody, { ...ok, per_child: true }), { scope: 'user_path', subject: '/v', periodSeconds: 60, maxRequests: 1, maxTokens: undefined, perChild: true });
    for (const perChild of [false, null]) {
      assert.deepEqual(parseBody(putRateLimitBody, { ...ok, per_child: perChild }), { scope: 'user_path', subject: '/v', periodSeconds: 60, maxRequests: 1, maxTokens: undefined });
    }
    assert.deepEqual(parseBody(listRateLimitsQuery, { expand: 'children' }), { expand: 'children' });
    assert.deepEqual(parseBody(listRateLimitsQuery, {}), {});
  });

  it('DELETE and reset-one come out as the rule key', () => {
    assert.deepEqual(parseBody(deleteRateLimitBody, { scope: 'provider', subject: 'up', limit_key: { period_seconds: 120 } }), { scope: 'provider', subject: 'up', periodSeconds: 120 });
    assert.deepEqual(parseBody(resetOneRateLimitBody, { user_path: 'cfg', period: 'minute' }), { scope: 'user_path', subject: '/cfg', periodSeconds: 60 });
    assert.deepEqual(parseBody(resetOneRateLimitBody, { scope: 'model', subject: 'm', period_seconds: 45 }), { scope: 'model', subject: 'm', periodSeconds: 45 });
    // reset-one also takes the key as PUT and DELETE spell it.
    assert.deepEqual(parseBody(resetOneRateLimitBody, { user_path: 'cfg', limit_key: { period: 'minute' } }), { scope: 'user_path', subject: '/cfg', periodSeconds: 60 });
    assert.deepEqual(parseBody(resetOneRateLimitBody, { scope: 'model', subject: 'm', limit_key: { period_seconds: 45 } }), { scope: 'model', subject: 'm', periodSeconds: 45 });
    assert.deepEqual(parseBody(resetRateLimitsBody, { confirmation: 'reset' }), { confirmation: 'reset' });
  });

  // Every way a body can be wrong: the `param` and message the client gets.
  const rejected: Array<[string, z.ZodType, unknown, string | null, string]> = [
    ['not an object', putRateLimitBody, [ok], null, 'request body must be a JSON object'],
    ['limit_key missing', putRateLimitBody, { user_path: '/v', max_requests: 1 }, 'limit_key', 'limit_key: is required'],
    ['limit_key a string', putRateLimitBody, { ...ok, limit_key: 'minute' }, 'limit_key', 'limit_key: must be an object with period or period_seconds'],
    ['limit_key null', putRateLimitBody, { ...ok, limit_key: null }, 'limit_key', 'limit_key: must be an object with period or period_seconds'],
    ['both periods', putRateLimitBody, { ...ok, limit_key: { period: 'minute', period_seconds: 60 } }, 'limit_key.period', 'limit_key.period: give either period or period_seconds, not both'],
    ['no period', putRateLimitBody, { ...ok, limit_key: {} }, 'limit_key.period', 'limit_key.period: required (minute, hour, day, concurrent) or limit_key.period_seconds'],
    ['unknown period', putRateLimitBody, { ...ok, limit_key: { period: 'fortnight' } }, 'limit_key.period', 'limit_key.period must be one of minute, hour, day, concurrent, or a number of seconds from 1 to 31622400'],
    ['period a boolean', putRateLimitBody, { ...ok, limit_key: { period: true } }, 'limit_key.period', 'limit_key.period: must be a period name (minute, hour, day, concurrent) or a number of seconds'],
    ['period_seconds a string', putRateLimitBody, { ...ok, limit_key: { period_seconds: '60' } }, 'limit_key.period_seconds', 'limit_key.period_seconds: must be a number'],
    ['period_seconds beyond 366 days', putRateLimitBody, { ...ok, limit_key: { period_seconds: 31_622_401 } }, 'limit_key.period_seconds', 'limit_key.period_seconds must be an integer from 1 to 31622400 (366 days)'],
    ['period_seconds 0', putRateLimitBody, { ...ok, limit_key: { period_seconds: 0 } }, 'limit_key.period_seconds', 'limit_key.period_seconds must be an integer from 1 to 31622400 (366 days)'],
    ['unknown limit_key field', putRateLimitBody, { ...ok, limit_key: { period: 'minute', window: 1 } }, 'limit_key.window', 'limit_key.window: unknown field (expected one of period, period_seconds)'],
    ['cap beyond 2^53 - 1', putRateLimitBody, { ...ok, max_requests: 2 ** 53 }, 'max_requests', 'max_requests must be an integer from 1 to 9007199254740991'],
    ['cap 1.5', putRateLimitBody, { ...ok, max_tokens: 1.5 }, 'max_tokens', 'max_tokens must be an integer from 1 to 9007199254740991'],
    ['cap a string', putRateLimitBody, { ...ok, max_requests: '10' }, 'max_requests', 'max_requests: must be a number'],
    ['windowed without caps', putRateLimitBody, { ...ok, max_requests: null }, 'max_requests', 'max_requests or max_tokens is required'],
    ['concurrent with max_tokens', putRateLimitBody, { ...ok, limit_key: { period: 'concurrent' }, max_tokens: 10 }, 'max_tokens', 'max_tokens is not allowed for a concurrent rule'],
    ['concurrent without max_requests', putRateLimitBody, { user_path: '/v', limit_key: { period: 'concurrent' } }, 'max_requests', 'max_requests is required for a concurrent rule'],
    ['user_path with scope provider', putRateLimitBody, { ...ok, scope: 'provider' }, 'user_path', 'user_path: not allowed with scope "provider"; use subject'],
    ['user_path with subject', putRateLimitBody, { ...ok, subject: 'x' }, 'subject', 'subject: not allowed together with user_path'],
    ['neither scope nor user_path', putRateLimitBody, { limit_key: { period: 'minute' }, max_requests: 1 }, 'scope', 'scope: required (or user_path for a user-path rule)'],
    ['scope without subject', putRateLimitBody, { scope: 'model', limit_key: { period: 'minute' }, max_requests: 1 }, 'subject', 'subject: required when scope is given'],
    ['unknown scope', putRateLimitBody, { scope: 'team', subject: 'x', limit_key: { period: 'minute' }, max_requests: 1 }, 'scope', 'scope: must be one of user_path, provider, model'],
    ['user_path not a string', putRateLimitBody, { ...ok, user_path: 7 }, 'user_path', 'user_path: must be a string'],
    ['user_path with ..', putRateLimitBody, { ...ok, user_path: '/a/../b' }, 'user_path', "user_path must not contain '.' or '..' segments"],
    ['provider subject with /', putRateLimitBody, { scope: 'provider', subject: 'a/b', limit_key: { period: 'minute' }, max_requests: 1 }, 'subject', "subject must be a provider name without '/' or whitespace"],
    ['model subject ending with /', putRateLimitBody, { scope: 'model', subject: 'up/', limit_key: { period: 'minute' }, max_requests: 1 }, 'subject', "subject must not begin or end with '/'"],
    ['unknown field', putRateLimitBody, { ...ok, burst: 3 }, 'burst', 'burst: unknown field (expected one of user_path, scope, subject, limit_key, max_requests, max_tokens, per_child)'],
    ['per_child a string', putRateLimitBody, { ...ok, per_child: 'yes' }, 'per_child', 'per_child: must be true or false'],
    ['per_child on a provider rule', putRateLimitBody, { scope: 'provider', subject: 'up', limit_key: { period: 'minute' }, max_requests: 1, per_child: true }, 'per_child', 'per_child is only for user-path rules (a provider rule has no children)'],
    ['expand anything else', listRateLimitsQuery, { expand: 'rules' }, 'expand', 'expand: must be children'],
    ['unknown list parameter', listRateLimitsQuery, { page: '2' }, 'page', 'page: unknown field (expected one of expand, children_limit)'],
    ['a cap on DELETE', deleteRateLimitBody, ok, 'max_requests', 'max_requests: unknown field (expected one of user_path, scope, subject, limit_key)'],
    ['reset-one without a period', resetOneRateLimitBody, { user_path: '/v' }, 'period', 'period: required (minute, hour, day, concurrent) or period_seconds'],
    ['reset-one with both periods', resetOneRateLimitBody, { user_path: '/v', period: 'hour', period_seconds: 3600 }, 'period', 'period: give either period or period_seconds, not both'],
    ['reset-one period_seconds 1e12', resetOneRateLimitBody, { user_path: '/v', period_seconds: 1e12 }, 'period_seconds', 'period_seconds must be an integer from 1 to 31622400 (366 days)'],
    ['reset-one with limit_key and a period', resetOneRateLimitBody, { user_path: '/v', limit_key: { period: 'minute' }, period: 'minute' }, 'limit_key', 'limit_key: give either limit_key or period (period_seconds), not both'],
    ['reset-one with a bad limit_key', resetOneRateLimitBody, { user_path: '/v', limit_key: { period: 'fortnight' } }, 'limit_key.period', 'limit_key.period must be one of minute, hour, day, concurrent, or a number of seconds from 1 to 31622400'],
    ['reset without confirmation', resetRateLimitsBody, {}, 'confirmation', 'confirmation: must be the word "reset" to reset every rate-limit counter'],
    ['reset confirmed otherwise', resetRateLimitsBody, { confirmation: 'yes' }, 'confirmation', 'confirmation: must be the word "reset" to reset every rate-limit counter'],
  ];
  for (const [what, schema, body, param, message] of rejected) {
    it(`${what} → 400 ${param}: "${message}"`, () => {
      assert.deepEqual(refusal(schema, body), [param, message]);
    });
  }
});
