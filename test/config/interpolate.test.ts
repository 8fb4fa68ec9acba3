import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { interpolate } from '../../src/config/interpolate.ts';
import { assertErrors, load } from './helpers.ts';

/** Interpolates one string value at key `v`, as the loader does for every scalar. */
function one(input: string, env: Record<string, string> = {}): { value: unknown; errors: string[]; unset: { names: readonly string[]; whole: boolean } | undefined } {
  const r = interpolate({ v: input }, env);
  const unset = r.unset.get('v');
  return { value: (r.value as { v: unknown }).v, errors: r.errors, unset: unset && { names: unset.names, whole: unset.whole } };
}

describe('interpolate', () => {
  it('substitutes set variables, defaults and escapes', () => {
    const env = { A: 'x', EMPTY: '' };
    assert.equal(one('${A}', env).value, 'x');
    assert.equal(one('pre-${A}-post', env).value, 'pre-x-post');
    assert.equal(one('${B:-dflt}', env).value, 'dflt');
    assert.equal(one('${A:-dflt}', env).value, 'x');
    // As in the shell, `:-` also applies when the variable is set but empty.
    assert.equal(one('${EMPTY:-dflt}', env).value, 'dflt');
    assert.equal(one('${B:-}', env).value, '');
    assert.equal(one('$${A}', env).value, '${A}');
    assert.equal(one('cost $5', env).value, 'cost $5');
  });

  it('an unset variable without default becomes an empty string and is reported, whole or embedded', () => {
    assert.deepEqual(one('${NOPE}'), { value: '', errors: [], unset: { names: ['NOPE'], whole: true } });
    const embedded = one('https://${NOPE}/v1${ALSO}');
    assert.equal(embedded.value, 'https:///v1');
    assert.deepEqual(embedded.unset, { names: ['NOPE', 'ALSO'], whole: false });
  });

  it('reports malformed references', () => {
    assert.deepEqual(one('${A').errors, ['v: unterminated "${" in "${A"']);
    assert.deepEqual(one('${1A}').errors, ['v: invalid reference "${1A}" (expected ${VAR} or ${VAR:-default})']);
    assert.deepEqual(one('${A-b}').errors, ['v: invalid reference "${A-b}" (expected ${VAR} or ${VAR:-default})']);
  });

  it('walks only string values, never keys, and cannot inject structure', () => {
    const r = interpolate({ '${K}': '${V}', list: ['${V}', 3, true, null] }, { K: 'k', V: 'a: [1]' });
    assert.deepEqual(r.value, { '${K}': 'a: [1]', list: ['a: [1]', 3, true, null] });
  });
});

describe('interpolation in config files', () => {
  it('fills values from env; values cannot inject YAML', () => {
    const { config } = load('server: { host: "${H}", master_key: "${MK}" }', { H: '0.0.0.0', MK: 'k: v\nx: [1]' });
    assert.equal(config.server.host, '0.0.0.0');
    assert.equal(config.server.master_key, 'k: v\nx: [1]');
  });

  it('coerces numbers and booleans written through interpolation', () => {
    const yaml = `
server:
  port: \${PORT_X:-8081}
  body_limit: \${BL:-1kb}
usage:
  enabled: \${UE:-true}
cache:
  response:
    enabled: \${CE}
    ttl_seconds: \${TTL:-60}
rate_limits:
  user_paths:
    - path: /a
      limits:
        - period: minute
          max_requests: \${RPM:-7}
`;
    const a = load(yaml, { CE: 'yes' });
    assert.equal(a.config.server.port, 8081);
    assert.equal(a.config.server.body_limit, 1024);
    assert.equal(a.config.usage.enabled, true);
    assert.equal(a.config.cache.response.enabled, true);
    assert.equal(a.config.cache.response.ttl_seconds, 60);
    assert.equal(a.rateLimitSeeds[0]?.maxRequests, 7);
    const b = load(yaml, { PORT_X: '9001', UE: 'off', RPM: '12' });
    assert.equal(b.config.server.port, 9001);
    assert.equal(b.config.usage.enabled, false);
    // CE unset: empty → absent → default.
    assert.equal(b.config.cache.response.enabled, false);
    assert.equal(b.rateLimitSeeds[0]?.maxRequests, 12);
  });

  it('an unset ${MASTER_KEY} means no master key (empty optional scalars are absent), with a warning naming each unset variable', () => {
    const { config, warnings } = load('server:\n  master_key: ${MASTER_KEY}\nproviders:\n  p: { type: mock, api_key: "${P_KEY}" }\n');
    assert.equal(config.server.master_key, undefined);
    assert.equal(config.providers['p']?.api_key, undefined);
    assert.deepEqual(warnings, [
      'server.master_key: ${MASTER_KEY} is not set; the key counts as absent',
      'providers.p.api_key: ${P_KEY} is not set; the key counts as absent',
    ]);
    assert.equal(load('server: { master_key: "${MASTER_KEY}" }', { MASTER_KEY: 's3cret' }).config.server.master_key, 's3cret');
  });

  it('an unset variable in a required field is an error naming the variable and key path', () => {
    assertErrors('providers: { openai: { type: openai, base_url: "${OPENAI_BASE_URL}" } }', [
      'providers.openai.base_url: required (${OPENAI_BASE_URL} is not set)',
    ]);
  });

  it('an unset variable inside a longer string warns', () => {
    const { config, warnings } = load('storage: { sqlite: { path: "${DATA_DIR}/fg.db" } }');
    assert.equal(config.storage.sqlite.path, '/fg.db');
    assert.deepEqual(warnings, ['storage.sqlite.path: ${DATA_DIR} is not set; substituted an empty string']);
  });

  it('bad numeric values through interpolation name the key path', () => {
    assertErrors('server: { port: "${P:-eighty}" }', ['server.port: must be an integer 0..65535']);
  });

  it('malformed references are errors with the key path', () => {
    assertErrors('server: { host: "${HOST" }', ['server.host: unterminated "${" in "${HOST"']);
  });
});
