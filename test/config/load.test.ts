import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/errors.ts';
import { loadConfig, TOKEN_RULES_WITHOUT_USAGE_WARNING } from '../../src/config/load.ts';
import { assertErrors, errorsOf, load, loadAsGiven, tempDir } from './helpers.ts';

function loadErrors(options: Parameters<typeof loadConfig>[0]): string[] {
  try {
    loadConfig(options);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.errors;
  }
  assert.fail('expected ConfigError');
}

describe('file resolution', () => {
  const setup = (): { dir: string; explicit: string; fromEnv: string } => {
    const dir = tempDir();
    writeFileSync(join(dir, 'floodgate.yaml'), 'server: { port: 1 }\n');
    mkdirSync(join(dir, 'conf'));
    const explicit = join(dir, 'conf', 'explicit.yaml');
    writeFileSync(explicit, 'server: { port: 2 }\n');
    const fromEnv = join(dir, 'conf', 'env.yaml');
    writeFileSync(fromEnv, 'server: { port: 3 }\n');
    return { dir, explicit, fromEnv };
  };

  it('explicit file first', () => {
    const { dir, explicit, fromEnv } = setup();
    const r = loadConfig({ file: 'conf/explicit.yaml', env: { FLOODGATE_CONFIG: fromEnv }, cwd: dir });
    assert.equal(r.config.server.port, 2);
    assert.equal(r.source, explicit);
  });

  it('then FLOODGATE_CONFIG', () => {
    const { dir, fromEnv } = setup();
    const r = loadConfig({ env: { FLOODGATE_CONFIG: fromEnv }, cwd: dir });
    assert.equal(r.config.server.port, 3);
    assert.equal(r.source, fromEnv);
  });

  it('then ./floodgate.yaml in cwd', () => {
    const { dir } = setup();
    const r = loadConfig({ env: {}, cwd: dir });
    assert.equal(r.config.server.port, 1);
    assert.equal(r.source, join(dir, 'floodgate.yaml'));
  });

  it('else built-in defaults', () => {
    const r = loadConfig({ env: {}, cwd: tempDir() });
    assert.equal(r.source, 'built-in defaults');
    assert.equal(r.config.server.port, 8080);
  });

  it('a missing explicit or FLOODGATE_CONFIG file is an error naming the path', () => {
    const dir = tempDir();
    assert.deepEqual(loadErrors({ file: 'nope.yaml', env: {}, cwd: dir }), [`config file not found: ${join(dir, 'nope.yaml')}`]);
    assert.deepEqual(loadErrors({ env: { FLOODGATE_CONFIG: join(dir, 'x.yaml') }, cwd: dir }), [
      `FLOODGATE_CONFIG: config file not found: ${join(dir, 'x.yaml')}`,
    ]);
  });

  it('--port wins over PORT and the file', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'floodgate.yaml'), 'server: { port: 1 }\n');
    assert.equal(loadConfig({ env: { PORT: '2' }, cwd: dir, portOverride: 3 }).config.server.port, 3);
    assert.deepEqual(loadErrors({ env: {}, cwd: dir, portOverride: 70000 }), ['--port: must be an integer 0..65535, got 70000']);
  });
});

describe('YAML syntax errors', () => {
  it('report file, line and column', () => {
    assert.deepEqual(loadAsGiven('server:\n  port: 1\nproviders: [a, b\nusage: {}\n').error?.errors, [
      'floodgate.yaml:4:1: YAML syntax error: Flow sequence in block collection must be sufficiently indented and end with a ]',
    ]);
    assert.deepEqual(loadAsGiven('server: {}\nserver: {}\n').error?.errors, ['floodgate.yaml:2:1: YAML syntax error: Map keys must be unique']);
  });

  it('are reported together with env errors', () => {
    const errors = loadAsGiven('a: [\n', { PORT: 'x' }).error?.errors ?? [];
    assert.equal(errors.length, 2);
    assert.match(errors[0] ?? '', /^floodgate\.yaml:2:1: YAML syntax error: /);
    assert.equal(errors[1], 'PORT: must be an integer 0..65535, got "x"');
  });
});

describe('rate-limit seeds from YAML', () => {
  it('one seed per limit with its origin', () => {
    const { rateLimitSeeds } = load(`
providers: { openai: { type: mock } }
rate_limits:
  user_paths: [ { path: /team, limits: [ { period: minute, max_requests: 100 }, { period_seconds: 300, max_tokens: 5 } ] } ]
  providers: [ { name: openai, limits: [ { period: concurrent, max_requests: 20 } ] } ]
  models: [ { model: openai/gpt-4o, limits: [ { period: day, max_requests: 1, max_tokens: 2 } ] } ]
`);
    assert.deepEqual(rateLimitSeeds, [
      { scope: 'user_path', subject: '/team', periodSeconds: 60, maxRequests: 100, origin: 'floodgate.yaml rate_limits.user_paths[0].limits[0]' },
      { scope: 'user_path', subject: '/team', periodSeconds: 300, maxTokens: 5, origin: 'floodgate.yaml rate_limits.user_paths[0].limits[1]' },
      { scope: 'provider', subject: 'openai', periodSeconds: 0, maxRequests: 20, origin: 'floodgate.yaml rate_limits.providers[0].limits[0]' },
      { scope: 'model', subject: 'openai/gpt-4o', periodSeconds: 86400, maxRequests: 1, maxTokens: 2, origin: 'floodgate.yaml rate_limits.models[0].limits[0]' },
    ]);
  });

  it('the same rule key twice is an error naming both places (subjects compared case-insensitively)', () => {
    assertErrors(
      `
rate_limits:
  user_paths:
    - { path: /Team, limits: [ { period: minute, max_requests: 1 } ] }
    - { path: /team/, limits: [ { period_seconds: 60, max_tokens: 1 }, { period: hour, max_requests: 1 } ] }
  models:
    - { model: m, limits: [ { period: concurrent, max_requests: 1 }, { period: concurrent, max_requests: 2 } ] }
`,
      [
        'duplicate minute rate limit for user_path /team: declared in floodgate.yaml rate_limits.user_paths[0].limits[0] and in floodgate.yaml rate_limits.user_paths[1].limits[0]',
        'duplicate concurrent rate limit for model m: declared in floodgate.yaml rate_limits.models[0].limits[0] and in floodgate.yaml rate_limits.models[0].limits[1]',
      ],
    );
  });

  it('warns when token rules exist while usage is off', () => {
    const yaml = 'rate_limits: { user_paths: [ { path: /, limits: [ { period: minute, max_tokens: 10 } ] } ] }';
    assert.deepEqual(load(yaml, { USAGE_ENABLED: 'false' }).warnings, [TOKEN_RULES_WITHOUT_USAGE_WARNING]);
    assert.deepEqual(load(yaml).warnings, []);
    assert.deepEqual(load('', { USAGE_ENABLED: 'false', SET_RATE_LIMIT_: 'tpd=5' }).warnings, [TOKEN_RULES_WITHOUT_USAGE_WARNING]);
    assert.deepEqual(load('', { USAGE_ENABLED: 'false', SET_RATE_LIMIT_: 'rpd=5' }).warnings, []);
  });

  it('warns about rules for providers that are not configured', () => {
    const { warnings } = load(`
providers: { openai: { type: mock } }
rate_limits:
  providers: [ { name: opneai, limits: [ { period: minute, max_requests: 1 } ] } ]
  models: [ { model: other/x, limits: [ { period: minute, max_requests: 1 } ] } ]
`);
    assert.deepEqual(warnings, [
      'floodgate.yaml rate_limits.providers[0]: rate limit for provider "opneai", which is not configured (configured: openai)',
      'floodgate.yaml rate_limits.models[0]: rate limit for model "other/x", whose provider is not configured (configured: openai)',
    ]);
  });
});

describe('cross references', () => {
  const providers = `
providers:
  openai: { type: openai, base_url: "https://api.openai.com/v1", models: [gpt-4o-mini] }
  backup: { type: mock }
`;

  it('valid references pass; unlisted models only warn', () => {
    const { warnings } = load(`${providers}
aliases:
  fast: { strategy: weighted, targets: [openai/gpt-4o-mini, { model: backup/anything, weight: 3 }, bare-model] }
  slow: { targets: [openai/gpt-4] }
failover:
  openai/gpt-4o-mini: [backup/gpt-4o-mini, fast]
`);
    assert.deepEqual(warnings, ['aliases.slow.targets[0]: provider "openai" does not list model "gpt-4" in its models']);
  });

  it('unknown providers in alias targets and failover are errors', () => {
    assertErrors(
      `${providers}
aliases:
  fast: { targets: [azure/gpt-4o] }
failover:
  openai/gpt-4o-mini: [azure/gpt-4o, openai/gpt-4o-mini]
  nope/x: [backup/x]
`,
      [
        'aliases.fast.targets[0]: unknown provider "azure" in "azure/gpt-4o" (configured: openai, backup)',
        'failover.openai/gpt-4o-mini[0]: unknown provider "azure" in "azure/gpt-4o" (configured: openai, backup)',
        'failover.openai/gpt-4o-mini[1]: "openai/gpt-4o-mini" cannot be a failover candidate for itself',
        'failover.nope/x: unknown provider "nope" in "nope/x" (configured: openai, backup)',
      ],
    );
  });

  it('with no providers configured, the built-in mock instance can be referenced', () => {
    load('aliases: { m: { targets: [mock/echo] } }');
    assertErrors('aliases: { m: { targets: [openai/x] } }', ['aliases.m.targets[0]: unknown provider "openai" in "openai/x" (configured: mock)']);
  });
});
