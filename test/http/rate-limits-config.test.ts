/**
 * End-to-end: rate-limit rules seeded from YAML and environment, and persistence of manual
 * rules across restarts (same data directory).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/errors.ts';
import { startFakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { MASTER, USER_PATH_HEADER, admin, assertRateLimited, chat, findRule, listRules, type StatusRecord } from '../support/rate-limits.ts';

const providers = (url: string): string =>
  'providers:\n' +
  `  up: { type: openai, base_url: ${url}/v1, api_key: k, models: [gpt-x] }\n` +
  `  my-up: { type: openai, base_url: ${url}/v1, api_key: k, models: [gpt-x] }\n`;

const chatAs = (gw: TestGateway, userPath: string, model = 'up/gpt-x') =>
  gw.request('POST', '/v1/chat/completions', { body: chat(model), headers: { authorization: `Bearer ${MASTER}`, [USER_PATH_HEADER]: userPath } });

const keyOf = (r: StatusRecord): string =>
  `${r.scope} ${r.subject} ${r.period_label} req=${r.max_requests ?? '-'} tok=${r.max_tokens ?? '-'} ${r.source}`;

describe('rate limits: configuration seeding and persistence', { concurrency: true, timeout: 40_000 }, () => {
  it('YAML and env rules appear with source config; env replaces the YAML entry; manual rules survive a restart with fresh counters; stale config rules go', async () => {
    const up = await startFakeUpstream({ name: 'up' });
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-rl-config-'));
    const yaml1 =
      providers(up.url) +
      'rate_limits:\n' +
      '  user_paths:\n' +
      '    - { path: /team/alice, limits: [ { period: minute, max_requests: 5 }, { period: hour, max_requests: 9 } ] }\n' +
      '    - { path: /yonly, limits: [ { period: hour, max_requests: 3, max_tokens: 900 } ] }\n' +
      '  models: [ { model: up/gpt-x, limits: [ { period_seconds: 300, max_tokens: 50000 } ] } ]\n';
    const env1 = {
      MASTER_KEY: MASTER,
      SET_RATE_LIMIT_TEAM__ALICE: 'rpm=2,tpm=5000,concurrent=3',
      SET_RATE_LIMIT_: 'rph=100',
      SET_RATE_LIMIT_MY_TEAM: '[{"period_seconds": 300, "max_requests": 4}, {"period": "day", "max_tokens": 1000000}]',
      SET_PROVIDER_RATE_LIMIT_UP: 'rpm=70',
      SET_PROVIDER_RATE_LIMIT_MY_UP: 'concurrent=4',
    };
    let gw = await startTestGateway({ yaml: yaml1, env: env1, dir });
    try {
      const rules = await listRules(gw);
      assert.deepEqual(rules.map(keyOf), [
        'model up/gpt-x 300s req=- tok=50000 config',
        'provider my-up concurrent req=4 tok=- config',
        'provider up minute req=70 tok=- config',
        'user_path / hour req=100 tok=- config',
        'user_path /my_team 300s req=4 tok=- config',
        'user_path /my_team day req=- tok=1000000 config',
        'user_path /team/alice concurrent req=3 tok=- config',
        'user_path /team/alice minute req=2 tok=5000 config',
        'user_path /yonly hour req=3 tok=900 config',
      ]);
      // env rules are enforced
      assert.equal((await chatAs(gw, '/team/alice')).status, 200);
      assert.equal((await chatAs(gw, '/team/alice/x')).status, 200);
      assertRateLimited(await chatAs(gw, '/team/alice'), 'rate limit exceeded for /team/alice: minute request limit of 2 reached');
      // an env rule is managed by config, naming its variable
      const locked = await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/team/alice', limit_key: { period: 'minute' }, max_requests: 50 });
      assert.equal(locked.status, 409);
      assert.equal(locked.json().error.code, 'rule_managed_by_config');
      assert.match(locked.json().error.message, /SET_RATE_LIMIT_TEAM__ALICE/);

      const put = await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/manual', limit_key: { period: 'minute' }, max_requests: 2 });
      assert.equal(put.status, 200, put.text);
      const putProvider = await admin(gw, 'PUT', '/admin/rate-limits', { scope: 'provider', subject: 'up', limit_key: { period_seconds: 90 }, max_requests: 20 });
      assert.equal(putProvider.status, 200, putProvider.text);
      assert.equal((await chatAs(gw, '/manual')).status, 200);
      assert.equal((await chatAs(gw, '/manual')).status, 200);
      assertRateLimited(await chatAs(gw, '/manual'), 'rate limit exceeded for /manual: minute request limit of 2 reached');
      const before = findRule(await listRules(gw), 'user_path', '/manual', 60)!;
      assert.equal(before.requests_used, 2);
      await gw.close();

      // Restart on the same data directory with /yonly, the model rule and SET_PROVIDER_RATE_LIMIT_UP gone.
      const yaml2 = providers(up.url) + 'rate_limits:\n  user_paths:\n    - { path: /team/alice, limits: [ { period: minute, max_requests: 5 } ] }\n';
      const { SET_PROVIDER_RATE_LIMIT_UP: _gone, ...env2 } = env1;
      gw = await startTestGateway({ yaml: yaml2, env: env2, dir });
      const after = await listRules(gw);
      assert.deepEqual(after.map(keyOf), [
        'provider my-up concurrent req=4 tok=- config',
        'provider up 90s req=20 tok=- manual',
        'user_path / hour req=100 tok=- config',
        'user_path /manual minute req=2 tok=- manual',
        'user_path /my_team 300s req=4 tok=- config',
        'user_path /my_team day req=- tok=1000000 config',
        'user_path /team/alice concurrent req=3 tok=- config',
        'user_path /team/alice minute req=2 tok=5000 config',
      ]);
      const manual = findRule(after, 'user_path', '/manual', 60)!;
      assert.equal(manual.requests_used, 0, 'counters live in memory: reset by the restart');
      assert.equal(manual.created_at, before.created_at, 'the stored rule is the same rule');
      assert.equal(findRule(after, 'user_path', '/team/alice', 60)?.requests_used, 0);
      assert.equal((await chatAs(gw, '/manual')).status, 200);
      assert.equal((await chatAs(gw, '/yonly')).status, 200);
      // the removed config rules can no longer be found; the manual ones can still be deleted
      const gone = await admin(gw, 'DELETE', '/admin/rate-limits', { user_path: '/yonly', limit_key: { period: 'hour' } });
      assert.equal(gone.status, 404);
      const del = await admin(gw, 'DELETE', '/admin/rate-limits', { user_path: '/manual', limit_key: { period: 'minute' } });
      assert.equal(del.status, 200, del.text);
      await gw.close();

      // and a deleted manual rule stays deleted
      gw = await startTestGateway({ yaml: yaml2, env: env2, dir });
      assert.equal(findRule(await listRules(gw), 'user_path', '/manual', 60), undefined);
    } finally {
      await gw.close();
      await up.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('YAML rules alone are seeded and enforced, with the named-period label', async () => {
    const up = await startFakeUpstream({ name: 'up' });
    const gw = await startTestGateway({
      yaml: providers(up.url) + 'rate_limits:\n  enabled: true\n  user_paths: [ { path: /Yaml/Team, limits: [ { period: day, max_requests: 1 } ] } ]\n',
      env: { MASTER_KEY: MASTER },
    });
    try {
      const rule = findRule(await listRules(gw), 'user_path', '/yaml/team', 86400)!;
      assert.equal(rule.source, 'config');
      assert.equal(rule.period_label, 'day');
      assert.equal((await chatAs(gw, '/yaml/team/a')).status, 200);
      const refused = await chatAs(gw, '/YAML/TEAM/b');
      assert.equal(refused.status, 429);
      assert.match(refused.json().error.message, /^rate limit exceeded for \/Yaml\/Team: day request limit of 1 reached$/i);
    } finally {
      await gw.close();
      await up.close();
    }
  });

  for (const [variable, value] of [
    ['SET_RATE_LIMIT_X', 'rpm=abc'],
    ['SET_RATE_LIMIT_TEAM__BOB', 'rpm=10,bogus=3'],
    ['SET_RATE_LIMIT_', '[{"period_seconds": 60, "max_requests": 1}'],
    ['SET_PROVIDER_RATE_LIMIT_UP', 'concurrent=0'],
  ]) {
    it(`a malformed ${variable}=${value} aborts start-up with an error naming the variable`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'floodgate-rl-bad-'));
      try {
        await assert.rejects(
          startTestGateway({ yaml: '', env: { [variable!]: value! }, dir }),
          (err: unknown) => {
            assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
            assert.ok(err.errors.some((e) => e.includes(variable!)), `errors should name ${variable}: ${err.errors.join('; ')}`);
            return true;
          },
        );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
