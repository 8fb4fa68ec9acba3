import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normalizeUserPath } from '../../src/user-path/user-path.ts';
import {
  buildRule,
  parsePeriod,
  periodLabel,
  resolvePeriod,
  validateLimits,
  validateModelSubject,
  validateProviderSubject,
} from '../../src/ratelimit/normalize.ts';
import type { Result } from '../../src/ratelimit/types.ts';

function value<T>(result: Result<T>): T {
  assert.ok(result.ok, result.ok ? '' : result.error);
  return result.value;
}

function error<T>(result: Result<T>): string {
  assert.ok(!result.ok, 'expected an error');
  return result.error;
}

describe('user path normalisation', () => {
  it('canonicalises', () => {
    assert.equal(value(normalizeUserPath('team//a/')), '/team/a');
    assert.equal(value(normalizeUserPath('  /team/a  ')), '/team/a');
    assert.equal(value(normalizeUserPath('')), '/');
    assert.equal(value(normalizeUserPath('///')), '/');
    assert.equal(value(normalizeUserPath('/Team/A')), '/Team/A'); // spelling kept; matching lowercases
  });

  it('rejects dot segments, colons and control characters, naming the field', () => {
    assert.equal(error(normalizeUserPath('/a/../b')), "user_path must not contain '.' or '..' segments");
    assert.equal(error(normalizeUserPath('/a/./b')), "user_path must not contain '.' or '..' segments");
    assert.equal(error(normalizeUserPath('/a:b')), "user_path must not contain ':'");
    assert.match(error(normalizeUserPath('/a\nb', 'X-Floodgate-User-Path')), /^X-Floodgate-User-Path must not contain control/);
    assert.equal(error(normalizeUserPath(42)), 'user_path must be a string');
  });

  it('puts non-ASCII paths in Unicode NFC, so both spellings of an accent are one path', () => {
    assert.equal(value(normalizeUserPath('/cafe\u0301/b')), '/caf\u00e9/b');
    assert.equal(value(normalizeUserPath(' /東京// ')), '/東京');
  });

  it('allows dots inside a segment', () => {
    assert.equal(value(normalizeUserPath('/a.b/..c')), '/a.b/..c');
  });
});

describe('subjects', () => {
  it('validates provider names', () => {
    assert.equal(value(validateProviderSubject(' openai ')), 'openai');
    assert.match(error(validateProviderSubject('open/ai')), /^subject must be a provider name/);
    assert.match(error(validateProviderSubject('open ai')), /^subject must be a provider name/);
    assert.equal(error(validateProviderSubject('')), 'subject must not be empty');
  });

  it('validates model subjects', () => {
    assert.equal(value(validateModelSubject('openai/gpt-4o')), 'openai/gpt-4o');
    assert.equal(value(validateModelSubject('together/meta/llama-3')), 'together/meta/llama-3');
    assert.equal(error(validateModelSubject('/gpt-4o')), "subject must not begin or end with '/'");
    assert.equal(error(validateModelSubject('gpt-4o/')), "subject must not begin or end with '/'");
    assert.equal(error(validateModelSubject('  ')), 'subject must not be empty');
  });
});

describe('periods', () => {
  it('parses names and seconds', () => {
    assert.equal(value(parsePeriod('minute')), 60);
    assert.equal(value(parsePeriod('hour')), 3600);
    assert.equal(value(parsePeriod('day')), 86400);
    assert.equal(value(parsePeriod('concurrent')), 0);
    assert.equal(value(parsePeriod('300')), 300);
    assert.equal(value(parsePeriod(45)), 45);
    assert.match(error(parsePeriod('week')), /^period must be one of/);
    assert.match(error(parsePeriod(0)), /^period must be an integer from 1 to 31622400/);
    assert.match(error(parsePeriod(1.5)), /^period must be an integer from 1 to 31622400/);
  });

  it('bounds custom windows at 366 days', () => {
    assert.equal(value(parsePeriod(31_622_400)), 31_622_400);
    assert.equal(error(parsePeriod(31_622_401)), 'period must be an integer from 1 to 31622400 (366 days)');
    assert.equal(error(parsePeriod('99999999999999999999')), 'period must be an integer from 1 to 31622400 (366 days)');
    assert.equal(error(resolvePeriod(undefined, 1e300)), 'period_seconds must be an integer from 1 to 31622400 (366 days)');
  });

  it('labels periods', () => {
    assert.equal(periodLabel(60), 'minute');
    assert.equal(periodLabel(3600), 'hour');
    assert.equal(periodLabel(86400), 'day');
    assert.equal(periodLabel(0), 'concurrent');
    assert.equal(periodLabel(300), '300s');
  });

  it('resolves period / period_seconds pairs', () => {
    assert.equal(value(resolvePeriod(undefined, 60)), 60);
    assert.equal(value(resolvePeriod('minute', 60)), 60);
    assert.equal(error(resolvePeriod('minute', 61)), 'period and period_seconds disagree');
    assert.equal(error(resolvePeriod(undefined, undefined, 'limit_key.')), 'limit_key.period or limit_key.period_seconds is required');
    assert.equal(error(resolvePeriod(undefined, 0)), 'period_seconds must be an integer from 1 to 31622400 (366 days)');
  });
});

describe('limits', () => {
  it('requires integer caps >= 1', () => {
    assert.equal(error(validateLimits(60, 0, undefined)), 'max_requests must be an integer from 1 to 9007199254740991');
    assert.equal(error(validateLimits(60, 2.5, undefined)), 'max_requests must be an integer from 1 to 9007199254740991');
    assert.equal(value(validateLimits(60, Number.MAX_SAFE_INTEGER, undefined)).maxRequests, Number.MAX_SAFE_INTEGER);
    assert.equal(error(validateLimits(60, 2 ** 53, undefined)), 'max_requests must be an integer from 1 to 9007199254740991');
    assert.equal(error(validateLimits(60, undefined, 1e300)), 'max_tokens must be an integer from 1 to 9007199254740991');
    assert.equal(error(validateLimits(60, undefined, '5')), 'max_tokens must be an integer from 1 to 9007199254740991');
  });

  it('shapes concurrent and windowed rules', () => {
    assert.equal(error(validateLimits(0, undefined, undefined)), 'max_requests is required for a concurrent rule');
    assert.equal(error(validateLimits(0, 5, 100)), 'max_tokens is not allowed for a concurrent rule');
    assert.equal(error(validateLimits(60, undefined, undefined)), 'max_requests or max_tokens is required');
    assert.deepEqual(value(validateLimits(60, undefined, 100)), { maxRequests: undefined, maxTokens: 100 });
  });

  it('builds a normalised rule', () => {
    const at = new Date(0);
    const rule = value(buildRule({ scope: 'user_path', subject: 'team//a/', periodSeconds: 60, maxRequests: 5, source: 'config', createdAt: at }));
    assert.equal(rule.subject, '/team/a');
    assert.equal(rule.updatedAt, at);
    assert.equal(error(buildRule({ scope: 'org', subject: 'x', periodSeconds: 60, maxRequests: 1, source: 'manual', createdAt: at })), 'scope must be one of user_path, provider, model');
    assert.match(error(buildRule({ scope: 'provider', subject: 'a/b', periodSeconds: 60, maxRequests: 1, source: 'manual', createdAt: at })), /^subject must be a provider name/);
  });
});
