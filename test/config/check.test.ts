import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkConfigFile } from '../../src/config/check.ts';
import { writeConfig } from './helpers.ts';

describe('checkConfigFile', () => {
  it('prints every error, each at its place in the file, then the warnings, and fails', () => {
    const { dir, file } = writeConfig('server: { port: x, nope: 1 }\nproviders:\n  up: { type: openai, base_url: "https://up.test/v1", api_key: "${UP_KEY}" }\n');
    const r = checkConfigFile(file, { USAGE_ENABLED: 'perhaps' }, dir);
    assert.equal(r.ok, false);
    assert.deepEqual(r.lines, [
      `${file}: 3 errors, 1 warning`,
      `${file}:1:17: server.port: must be an integer 0..65535`,
      `${file}:1:20: server.nope: unknown key`,
      'USAGE_ENABLED: must be a boolean (true/false, 1/0, yes/no, on/off), got "perhaps"',
      `warning: ${file}:3:64: providers.up.api_key: \${UP_KEY} is not set; the key counts as absent`,
    ]);
  });

  it('names reservations when they are on, from the file or the environment, and refuses a bad default', () => {
    const { dir, file } = writeConfig('rate_limits:\n  reservations: { enabled: true, default_completion_tokens: 512 }\n');
    const r = checkConfigFile(file, { BUDGETS_RESERVATIONS: 'true' }, dir);
    assert.equal(r.ok, true, r.lines.join('\n'));
    assert.ok(r.lines.some((line) => line.endsWith('; token reservations on (512 completion tokens by default)')), r.lines.join('\n'));
    assert.ok(r.lines.some((line) => line.startsWith('  budgets: ') && line.endsWith('; dollar reservations on')), r.lines.join('\n'));
    const bad = checkConfigFile(writeConfig('rate_limits:\n  reservations: { default_completion_tokens: 0 }\n').file, { RATE_LIMITS_RESERVATIONS: 'sometimes' }, dir);
    assert.equal(bad.ok, false);
    assert.ok(bad.lines.some((line) => /rate_limits\.reservations\.default_completion_tokens: /.test(line)), bad.lines.join('\n'));
    assert.ok(bad.lines.some((line) => line.startsWith('RATE_LIMITS_RESERVATIONS: must be a boolean')), bad.lines.join('\n'));
  });

  it('a missing file fails', () => {
    const r = checkConfigFile('/nonexistent/floodgate.yaml', {});
    assert.equal(r.ok, false);
    assert.deepEqual(r.lines, ['/nonexistent/floodgate.yaml: 1 error', 'config file not found: /nonexistent/floodgate.yaml']);
  });

  it('refuses a public host without a master key, as start-up does, at the master_key line when the file has one', () => {
    const { dir, file } = writeConfig('server:\n  host: 0.0.0.0\n  master_key: ${MASTER_KEY}\n');
    const r = checkConfigFile(file, {}, dir);
    assert.equal(r.ok, false);
    assert.deepEqual(r.lines, [
      `${file}: 1 error`,
      `${file}:3:15: server.master_key: refusing to listen on non-loopback HOST 0.0.0.0 without MASTER_KEY: set MASTER_KEY, or HOST=127.0.0.1 (\${MASTER_KEY} is not set)`,
    ]);
    // HOST from the environment, no master key anywhere: no line to point at.
    const env = checkConfigFile(writeConfig('providers: {}\n').file, { HOST: '10.1.2.3' }, dir);
    assert.deepEqual(env.lines.slice(1), ['server.master_key: refusing to listen on non-loopback HOST 10.1.2.3 without MASTER_KEY: set MASTER_KEY, or HOST=127.0.0.1']);
    // With the key set, the same file passes.
    assert.equal(checkConfigFile(file, { MASTER_KEY: 'sk-set' }, dir).ok, true);
    // On a loopback host an unset ${MASTER_KEY} is a warning: the gateway runs open.
    const loopback = checkConfigFile(writeConfig('server:\n  host: 127.0.0.1\n  master_key: ${MASTER_KEY}\n').file, {}, dir);
    assert.equal(loopback.ok, true);
    assert.match(loopback.lines.at(-1)!, /^ {2}warning: .*:3:15: server\.master_key: \$\{MASTER_KEY\} is not set; the key counts as absent$/);
  });

  it('summarises a valid file', () => {
    const { dir, file } = writeConfig(`
providers:
  openai: { type: openai, base_url: "https://api.openai.com/v1", models: [gpt-4o-mini, gpt-4o] }
  claude: { type: anthropic }
aliases:
  fast: { targets: [openai/gpt-4o-mini, claude/claude-haiku] }
rate_limits:
  user_paths: [ { path: /team, limits: [ { period: minute, max_requests: 100, max_tokens: 5000 } ] } ]
  providers: [ { name: openai, limits: [ { period: concurrent, max_requests: 20 } ] } ]
budgets:
  user_paths: [ { path: /team, limits: [ { period: month, max_usd: 200 }, { period_seconds: 3600, max_usd: 0.5 } ] } ]
pricing:
  openai/gpt-4o: { input_per_mtok: 2, output_per_mtok: 8 }
`);
    const r = checkConfigFile(file, {}, dir);
    assert.equal(r.ok, true);
    assert.deepEqual(r.lines, [
      `${file}: OK`,
      '  providers: openai (openai, 2 models), claude (anthropic)',
      '  aliases: fast (round_robin, 2 targets)',
      '  rate limits: enabled; 1 user-path, 1 provider, 0 model rule(s)',
      '    user_path /team minute: 100 requests, 5000 tokens  [floodgate.yaml rate_limits.user_paths[0].limits[0]]',
      '    provider openai concurrent: 20 requests  [floodgate.yaml rate_limits.providers[0].limits[0]]',
      '  budgets: enabled; 2 budget(s)',
      '    /team month: $200.00  [floodgate.yaml budgets.user_paths[0].limits[0]]',
      '    /team 3600s: $0.50  [floodgate.yaml budgets.user_paths[0].limits[1]]',
      '  pricing: 1 model price override(s)',
      '  storage: sqlite; usage tracking on',
    ]);
  });

  it('refuses absurd prices: a cost must stay a finite number of dollars', () => {
    const { dir, file } = writeConfig(`
providers:
  openai: { type: openai, base_url: "https://api.openai.com/v1", models: [gpt-4o] }
pricing:
  openai/gpt-4o: { input_per_mtok: 1e308, output_per_mtok: 10000001, cached_input_per_mtok: 10000000 }
`);
    const r = checkConfigFile(file, {}, dir);
    assert.equal(r.ok, false);
    assert.deepEqual(r.lines, [
      `${file}: 2 errors`,
      `${file}:5:36: pricing.openai/gpt-4o.input_per_mtok: must be a number of US dollars per million tokens, from 0 to 10000000`,
      `${file}:5:60: pricing.openai/gpt-4o.output_per_mtok: must be a number of US dollars per million tokens, from 0 to 10000000`,
    ]);
  });
});
