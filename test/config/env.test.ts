import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRateLimitEnv } from '../../src/config/env.ts';
import { assertErrors, errorsOf, load } from './helpers.ts';

describe('environment overrides', () => {
  it('env wins over the file for every documented variable', () => {
    const { config } = load(
      `
server: { host: 127.0.0.1, port: 1, master_key: file-key, user_path_header: X-A }
storage: { type: sqlite, sqlite: { path: a.db } }
usage: { enabled: true }
rate_limits: { enabled: true }
`,
      {
        HOST: '0.0.0.0',
        PORT: '9090',
        MASTER_KEY: 'env-key',
        USER_PATH_HEADER: 'X-Team',
        STORAGE_TYPE: 'Postgres',
        SQLITE_PATH: '/tmp/x.db',
        POSTGRES_URL: 'postgres://u:p@db/fg',
        USAGE_ENABLED: 'OFF',
        RATE_LIMITS_ENABLED: '0',
        SHUTDOWN_GRACE_SECONDS: '3',
      },
    );
    assert.deepEqual(config.server, {
      host: '0.0.0.0',
      port: 9090,
      master_key: 'env-key',
      user_path_header: 'X-Team',
      body_limit: 10 * 1024 * 1024,
      shutdown_grace_seconds: 3,
      headers_timeout_seconds: 30,
      request_timeout_seconds: 300,
      keep_alive_timeout_seconds: 72,
      max_connections: 10000,
    });
    assert.deepEqual(config.storage, { type: 'postgres', sqlite: { path: '/tmp/x.db' }, postgres: { url: 'postgres://u:p@db/fg' } });
    assert.equal(config.usage.enabled, false);
    assert.equal(config.rate_limits.enabled, false);
  });

  it('SHUTDOWN_GRACE_SECONDS out of range names the key', () => {
    assertErrors('', ['SHUTDOWN_GRACE_SECONDS: server.shutdown_grace_seconds: must be an integer 0..3600'], { SHUTDOWN_GRACE_SECONDS: '-1' });
    assertErrors('', ['SHUTDOWN_GRACE_SECONDS: server.shutdown_grace_seconds: must be an integer 0..3600'], { SHUTDOWN_GRACE_SECONDS: 'soon' });
  });

  it('overrides apply with no file sections present, and empty values are ignored', () => {
    const { config } = load('', { PORT: '0', HOST: '', USAGE_ENABLED: '' });
    assert.equal(config.server.port, 0);
    assert.equal(config.server.host, '127.0.0.1');
    assert.equal(config.usage.enabled, true);
  });

  it('accepts every boolean spelling, case-insensitively', () => {
    for (const [raw, expected] of [
      ['true', true], ['TRUE', true], ['1', true], ['yes', true], ['On', true],
      ['false', false], ['False', false], ['0', false], ['no', false], ['OFF', false],
    ] as const) {
      assert.equal(load('', { USAGE_ENABLED: raw }).config.usage.enabled, expected, raw);
    }
  });

  it('ACCESS_LOG turns the access log on or off over logging.access (off by default)', () => {
    assert.equal(load('').config.logging.access, false);
    assert.equal(load('logging: { access: true }').config.logging.access, true);
    assert.equal(load('', { ACCESS_LOG: 'true' }).config.logging.access, true);
    assert.equal(load('logging: { access: true }', { ACCESS_LOG: 'no' }).config.logging.access, false);
    assertErrors('', ['ACCESS_LOG: must be a boolean (true/false, 1/0, yes/no, on/off), got "verbose"'], { ACCESS_LOG: 'verbose' });
  });

  it('bad values are errors naming the variable', () => {
    assertErrors('', ['USAGE_ENABLED: must be a boolean (true/false, 1/0, yes/no, on/off), got "maybe"'], { USAGE_ENABLED: 'maybe' });
    assertErrors('', ['RATE_LIMITS_ENABLED: must be a boolean (true/false, 1/0, yes/no, on/off), got "2"'], { RATE_LIMITS_ENABLED: '2' });
    assertErrors('', ['PORT: must be an integer 0..65535, got "65536"'], { PORT: '65536' });
    assertErrors('', ['PORT: must be an integer 0..65535, got "80.5"'], { PORT: '80.5' });
    assertErrors('', ['PORT: must be an integer 0..65535, got "-1"'], { PORT: '-1' });
    assertErrors('', ['STORAGE_TYPE: must be one of sqlite, postgres, got "mysql"'], { STORAGE_TYPE: 'mysql' });
    assertErrors('', ['POSTGRES_URL: must be a postgres:// or postgresql:// URL'], { POSTGRES_URL: 'mysql://x' });
    assertErrors('', ['USER_PATH_HEADER: must be a valid HTTP header name, got "X Team"'], { USER_PATH_HEADER: 'X Team' });
  });

  it('STORAGE_TYPE=postgres without a url is reported on the key', () => {
    assertErrors('', ['storage.postgres.url: required when storage.type is postgres (set it here or with POSTGRES_URL)'], {
      STORAGE_TYPE: 'postgres',
    });
  });
});

/** The limits and errors of one `SET_RATE_LIMIT_TEAM` value. */
function parseLimitValue(value: string): { errors: string[]; limits: unknown[] } {
  const r = parseRateLimitEnv({ SET_RATE_LIMIT_TEAM: value });
  return { errors: r.errors, limits: r.userPaths[0]?.limits ?? [] };
}

describe('rate-limit env seeds: names', () => {
  it('maps SET_RATE_LIMIT_ suffixes to user paths', () => {
    const path = (suffix: string): string | undefined => {
      const r = parseRateLimitEnv({ [`SET_RATE_LIMIT_${suffix}`]: 'rpm=1' });
      assert.deepEqual(r.errors, []);
      return r.userPaths[0]?.subject;
    };
    assert.equal(path('TEAM__ALICE'), '/team/alice');
    assert.equal(path('ML_TEAM'), '/ml_team');
    assert.equal(path('ML_TEAM__A_B'), '/ml_team/a_b');
    assert.equal(path(''), '/');
    assert.equal(path('TEAM____A'), '/team/a');
  });

  it('maps SET_PROVIDER_RATE_LIMIT_ suffixes to provider names', () => {
    const provider = (suffix: string): string | undefined =>
      parseRateLimitEnv({ [`SET_PROVIDER_RATE_LIMIT_${suffix}`]: 'rpm=1' }).providers[0]?.subject;
    assert.equal(provider('OPENAI_EU'), 'openai-eu');
    assert.equal(provider('OPENAI'), 'openai');
  });
});

describe('rate-limit env seeds: values', () => {
  it('compact items for one period merge into one rule; whitespace tolerated', () => {
    const r = parseLimitValue(' rpm=100 , tpm = 50000,rpd=1000, concurrent=10,TPH=7 ');
    assert.deepEqual(r, {
      errors: [],
      limits: [
        { period: 'minute', max_requests: 100, max_tokens: 50000 },
        { period: 'day', max_requests: 1000 },
        { period: 'concurrent', max_requests: 10 },
        { period: 'hour', max_tokens: 7 },
      ],
    });
  });

  it('JSON arrays are validated like YAML limits', () => {
    assert.deepEqual(parseLimitValue('[{"period_seconds":300,"max_requests":10},{"period":"hour","max_tokens":5}]'), {
      errors: [],
      limits: [
        { period_seconds: 300, max_requests: 10 },
        { period: 'hour', max_tokens: 5 },
      ],
    });
    assert.deepEqual(parseLimitValue('[]'), { errors: [], limits: [] });
  });

  it('each malformed compact form names the variable', () => {
    const err = (v: string): string[] => parseLimitValue(v).errors;
    assert.deepEqual(err('rpx=1'), ['SET_RATE_LIMIT_TEAM: unknown limit name "rpx" (expected rpm, tpm, rph, tph, rpd, tpd, concurrent)']);
    assert.deepEqual(err('rpm=1,rpm=2'), ['SET_RATE_LIMIT_TEAM: duplicate limit name "rpm"']);
    assert.deepEqual(err('rpm=0'), ['SET_RATE_LIMIT_TEAM: rpm must be an integer >= 1, got "0"']);
    assert.deepEqual(err('rpm=1.5'), ['SET_RATE_LIMIT_TEAM: rpm must be an integer >= 1, got "1.5"']);
    assert.deepEqual(err('rpm=-3'), ['SET_RATE_LIMIT_TEAM: rpm must be an integer >= 1, got "-3"']);
    assert.deepEqual(err('rpm=abc'), ['SET_RATE_LIMIT_TEAM: rpm must be an integer >= 1, got "abc"']);
    assert.deepEqual(err('rpm=,tpm=2'), ['SET_RATE_LIMIT_TEAM: rpm must be an integer >= 1, got ""']);
    assert.deepEqual(err('rpm'), ['SET_RATE_LIMIT_TEAM: malformed item "rpm" (expected name=value, e.g. rpm=100)']);
    assert.deepEqual(err('rpm=1,,tpm=2'), [
      'SET_RATE_LIMIT_TEAM: empty item (expected name=value pairs separated by commas, e.g. rpm=100,tpm=50000)',
    ]);
    assert.deepEqual(err('  '), ['SET_RATE_LIMIT_TEAM: empty value (expected e.g. rpm=100,tpm=50000 or a JSON array of limits)']);
  });

  it('each malformed JSON form names the variable', () => {
    const err = (v: string): string[] => parseLimitValue(v).errors;
    assert.match(err('[{"period":')[0] ?? '', /^SET_RATE_LIMIT_TEAM: invalid JSON: /);
    assert.deepEqual(err('{"period":"minute","max_requests":1}'), [
      'SET_RATE_LIMIT_TEAM: expected a JSON array of limits, e.g. [{"period_seconds":300,"max_requests":10}]',
    ]);
    assert.deepEqual(err('[{"period":"minute","max_requests":1,"burst":3}]'), ['SET_RATE_LIMIT_TEAM[0].burst: unknown key']);
    assert.deepEqual(err('[{"period":"minute","period_seconds":60,"max_requests":1}]'), [
      'SET_RATE_LIMIT_TEAM[0]: set either period or period_seconds, not both',
    ]);
    assert.deepEqual(err('[{"period":"concurrent","max_requests":1,"max_tokens":1}]'), [
      'SET_RATE_LIMIT_TEAM[0].max_tokens: not allowed on a concurrent limit',
    ]);
    assert.deepEqual(err('[{"period_seconds":30}]'), ['SET_RATE_LIMIT_TEAM[0]: a windowed limit needs max_requests and/or max_tokens']);
    assert.deepEqual(err('[{"period":"week","max_requests":1}]'), [
      'SET_RATE_LIMIT_TEAM[0].period: must be one of minute, hour, day, concurrent (use period_seconds for a custom window)',
    ]);
    assert.deepEqual(err('[{"period":"minute","max_requests":0}]'), ['SET_RATE_LIMIT_TEAM[0].max_requests: must be an integer 1..9007199254740991']);
  });

  it('bad subjects name the variable', () => {
    const r = parseRateLimitEnv({ 'SET_RATE_LIMIT_A__..': 'rpm=1', SET_PROVIDER_RATE_LIMIT_: 'rpm=1' });
    assert.deepEqual(r.errors, [
      "SET_PROVIDER_RATE_LIMIT_: provider name must not be empty",
      "SET_RATE_LIMIT_A__..: user path \"a/..\" must not contain '.' or '..' segments",
    ]);
  });

  it('ignores unrelated variables', () => {
    const r = parseRateLimitEnv({ PATH: '/bin', SET_BUDGET_TEAM: 'x', SET_RATE_LIMIT_TEAM: 'rpm=1' });
    assert.deepEqual(r.userPaths, [{ variable: 'SET_RATE_LIMIT_TEAM', subject: '/team', limits: [{ period: 'minute', max_requests: 1 }] }]);
    assert.deepEqual(r.providers, []);
  });
});

describe('rate-limit env seeds: loading', () => {
  it('produces seeds with env origins', () => {
    const { rateLimitSeeds } = load('providers: { openai-eu: { type: mock } }', {
      SET_RATE_LIMIT_: 'rpm=10',
      SET_RATE_LIMIT_TEAM__ALICE: 'rpm=100,tpm=50000,concurrent=2',
      SET_RATE_LIMIT_ML_TEAM: '[{"period_seconds":300,"max_tokens":9}]',
      SET_PROVIDER_RATE_LIMIT_OPENAI_EU: 'rph=5',
    });
    assert.deepEqual(rateLimitSeeds, [
      { scope: 'user_path', subject: '/', periodSeconds: 60, maxRequests: 10, origin: 'env SET_RATE_LIMIT_' },
      { scope: 'user_path', subject: '/ml_team', periodSeconds: 300, maxTokens: 9, origin: 'env SET_RATE_LIMIT_ML_TEAM' },
      { scope: 'user_path', subject: '/team/alice', periodSeconds: 60, maxRequests: 100, maxTokens: 50000, origin: 'env SET_RATE_LIMIT_TEAM__ALICE' },
      { scope: 'user_path', subject: '/team/alice', periodSeconds: 0, maxRequests: 2, origin: 'env SET_RATE_LIMIT_TEAM__ALICE' },
      { scope: 'provider', subject: 'openai-eu', periodSeconds: 3600, maxRequests: 5, origin: 'env SET_PROVIDER_RATE_LIMIT_OPENAI_EU' },
    ]);
  });

  it('an env entry replaces the YAML entry for the same path or provider', () => {
    const { config, rateLimitSeeds } = load(
      `
providers: { OpenAI-EU: { type: mock } }
rate_limits:
  user_paths:
    - { path: "Team//Alice/", limits: [ { period: hour, max_requests: 1 }, { period: day, max_requests: 2 } ] }
    - { path: /other, limits: [ { period: hour, max_requests: 3 } ] }
  providers:
    - { name: OpenAI-EU, limits: [ { period: concurrent, max_requests: 4 } ] }
`,
      { SET_RATE_LIMIT_TEAM__ALICE: 'rpm=100', SET_PROVIDER_RATE_LIMIT_OPENAI_EU: 'concurrent=9' },
    );
    assert.deepEqual(rateLimitSeeds, [
      { scope: 'user_path', subject: '/other', periodSeconds: 3600, maxRequests: 3, origin: 'floodgate.yaml rate_limits.user_paths[1].limits[0]' },
      { scope: 'user_path', subject: '/team/alice', periodSeconds: 60, maxRequests: 100, origin: 'env SET_RATE_LIMIT_TEAM__ALICE' },
      { scope: 'provider', subject: 'openai-eu', periodSeconds: 0, maxRequests: 9, origin: 'env SET_PROVIDER_RATE_LIMIT_OPENAI_EU' },
    ]);
    // The resolved config shows the effective rules.
    assert.deepEqual(config.rate_limits.user_paths.map((u) => u.path), ['/other', '/team/alice']);
    assert.deepEqual(config.rate_limits.providers, [{ name: 'openai-eu', limits: [{ period: 'concurrent', max_requests: 9 }] }]);
  });

  it('malformed env values abort loading with the variable named, together with other errors', () => {
    const errors = errorsOf('server: { port: 99999 }', {
      SET_RATE_LIMIT_TEAM: 'rpx=1',
      SET_PROVIDER_RATE_LIMIT_X: '[{"period":"minute"}]',
      PORT: 'x',
    });
    assert.deepEqual(errors, [
      'server.port: must be an integer 0..65535',
      'PORT: must be an integer 0..65535, got "x"',
      'SET_PROVIDER_RATE_LIMIT_X[0]: a windowed limit needs max_requests and/or max_tokens',
      'SET_RATE_LIMIT_TEAM: unknown limit name "rpx" (expected rpm, tpm, rph, tph, rpd, tpd, concurrent)',
    ]);
  });

  it('two env variables declaring the same rule key is an error naming both', () => {
    assertErrors('', ['duplicate minute rate limit for user_path /team: declared in env SET_RATE_LIMIT_TEAM and in env SET_RATE_LIMIT_team'], {
      SET_RATE_LIMIT_TEAM: 'rpm=1',
      SET_RATE_LIMIT_team: 'rpm=2',
    });
    assertErrors('', ['duplicate minute rate limit for user_path /a: declared twice in env SET_RATE_LIMIT_A'], {
      SET_RATE_LIMIT_A: '[{"period":"minute","max_requests":1},{"period_seconds":60,"max_tokens":2}]',
    });
  });
});
