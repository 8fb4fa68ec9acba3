import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertErrors, load } from './helpers.ts';

describe('config: the Redis counter backend (rate_limits.backend, rate_limits.redis)', () => {
  it('reads every key from the file', () => {
    const { config } = load(`
rate_limits:
  backend: redis
  redis: { url: "rediss://user:pw@cache.internal:6380/2", prefix: "gw-eu:", lease_seconds: 5, timeout_ms: 100, on_error: deny }
`);
    assert.equal(config.rate_limits.backend, 'redis');
    assert.deepEqual(config.rate_limits.redis, {
      url: 'rediss://user:pw@cache.internal:6380/2',
      prefix: 'gw-eu:',
      lease_seconds: 5,
      timeout_ms: 100,
      on_error: 'deny',
    });
  });

  it('environment variables win over the file', () => {
    const { config } = load('rate_limits: { backend: memory, redis: { on_error: deny, timeout_ms: 900 } }', {
      RATE_LIMITS_BACKEND: 'Redis',
      REDIS_URL: 'redis://10.0.0.5:6379',
      RATE_LIMITS_REDIS_PREFIX: 'blue:',
      RATE_LIMITS_REDIS_TIMEOUT_MS: '50',
      RATE_LIMITS_REDIS_ON_ERROR: 'ALLOW',
    });
    assert.equal(config.rate_limits.backend, 'redis');
    assert.deepEqual(config.rate_limits.redis, { url: 'redis://10.0.0.5:6379', prefix: 'blue:', lease_seconds: 30, timeout_ms: 50, on_error: 'allow' });
  });

  it('file errors name the key', () => {
    assertErrors('rate_limits: { backend: memcached }', ['rate_limits.backend: must be one of memory, redis']);
    assertErrors('rate_limits: { redis: { url: "http://cache:6379" } }', ['rate_limits.redis.url: must be a redis:// or rediss:// URL (got "http://cache:6379")']);
    assertErrors('rate_limits: { redis: { prefix: "{tenant}" } }', ['rate_limits.redis.prefix: must not contain braces or whitespace']);
    assertErrors('rate_limits: { redis: { lease_seconds: 0 } }', ['rate_limits.redis.lease_seconds: must be an integer 1..3600']);
    assertErrors('rate_limits: { redis: { timeout_ms: 0 } }', ['rate_limits.redis.timeout_ms: must be an integer 1..60000']);
    assertErrors('rate_limits: { redis: { on_error: ignore } }', ['rate_limits.redis.on_error: must be one of local, allow, deny']);
    assertErrors('rate_limits: { redis: { port: 6379 } }', ['rate_limits.redis.port: unknown key']);
  });

  it('environment errors name the variable', () => {
    assertErrors('', ['RATE_LIMITS_BACKEND: must be one of memory, redis, got "disk"'], { RATE_LIMITS_BACKEND: 'disk' });
    assertErrors('', ['REDIS_URL: must be a redis:// or rediss:// URL'], { REDIS_URL: 'localhost:6379' });
    assertErrors('', ['RATE_LIMITS_REDIS_TIMEOUT_MS: must be an integer 1..60000 (milliseconds), got "fast"'], { RATE_LIMITS_REDIS_TIMEOUT_MS: 'fast' });
    assertErrors('', ['RATE_LIMITS_REDIS_ON_ERROR: must be one of local, allow, deny, got "retry"'], { RATE_LIMITS_REDIS_ON_ERROR: 'retry' });
  });
});
