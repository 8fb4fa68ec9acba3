/**
 * No log line ever carries a secret: the floodgate command, with the access log on, serves
 * traffic meant to put its secrets in its log (an upstream echoing the provider key in its
 * error, a prompt holding the master key and a managed key's secret echoed back in an error, a
 * refused key), and its whole output is then searched for the master key, the managed key's
 * secret and the provider's key.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { logLines, listeningUrl, runCli, withTimeout, type Run } from '../support/cli.ts';
import { openaiProvider, waitFor } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { request } from '../support/gateway.ts';

const MASTER = `sk-master-${randomUUID()}`;
const PROVIDER_KEY = `sk-provider-${randomUUID()}`;
/** Bedrock's secret, never used here (the provider is not called): kept out all the same. */
const AWS_SECRET = `aws/${randomBytes(24).toString('base64')}`;

describe('floodgate CLI: secrets never reach the log', { timeout: 60_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-log-secrets-'));
  let up: FakeUpstream;
  let run: Run | undefined;

  before(async () => {
    up = await startFakeUpstream({ name: 'up', models: ['gpt-x'], apiKey: PROVIDER_KEY });
    writeFileSync(join(dir, 'floodgate.yaml'), [
      'providers:',
      openaiProvider('up', up.url, ['gpt-x']).replace('api_key: k-up', `api_key: "${PROVIDER_KEY}"`).trimEnd(),
      `  aws: { type: bedrock, region: us-east-1, access_key_id: AKIAEXAMPLE, secret_access_key: "${AWS_SECRET}", models: [m] }`,
      '',
    ].join('\n'));
  });
  after(async () => {
    if (run !== undefined && run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    await up?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves traffic that would log them, and its whole output holds none of them', async () => {
    run = runCli(['--config', join(dir, 'floodgate.yaml'), '--port', '0'], dir, { MASTER_KEY: MASTER, ACCESS_LOG: 'true' });
    const url = await listeningUrl(run);
    const master = { authorization: `Bearer ${MASTER}` };
    const created = await request(url, 'POST', '/admin/api-keys', { body: { name: 'k', user_path: '/team' }, headers: master });
    assert.equal(created.status, 201, created.text);
    const managed = created.json().key as string;
    const asManaged = { authorization: `Bearer ${managed}`, 'x-request-id': 'with-managed-key' };
    const chat = (content: string) => ({ model: 'up/gpt-x', messages: [{ role: 'user', content }] });

    assert.equal((await request(url, 'POST', '/v1/chat/completions', { body: chat('hello'), headers: asManaged })).status, 200);
    // The upstream tells which key it was given, in its error.
    up.failNext(1, { status: 401, body: { error: { message: `Incorrect API key provided: ${PROVIDER_KEY}`, type: 'invalid_request_error' } } });
    const echoed = await request(url, 'POST', '/v1/chat/completions', { body: chat('hello'), headers: { ...master, 'x-request-id': 'provider-key-echoed' } });
    assert.equal(echoed.status, 401);
    // A passthrough's upstream error too.
    up.failNext(1, { status: 400, body: { error: { message: `bad key ${PROVIDER_KEY} for model`, type: 'invalid_request_error' } } });
    assert.equal((await request(url, 'POST', '/p/up/chat/completions', { body: chat('x'), headers: { ...master, 'x-request-id': 'passthrough-echoed' } })).status, 400);
    // A prompt holding the keys, echoed back in an upstream's error.
    up.failNext(1, { status: 500, body: { error: { message: `cannot parse prompt "${MASTER} ${managed}"`, type: 'server_error' } } });
    assert.equal((await request(url, 'POST', '/v1/chat/completions', { body: chat(`${MASTER} ${managed}`), headers: { ...asManaged, 'x-request-id': 'keys-echoed' } })).status, 500);
    // Keys the gateway refuses: a revoked managed key, a master key with a typo.
    assert.equal((await request(url, 'DELETE', `/admin/api-keys/${created.json().id as string}`, { headers: master })).status, 200);
    assert.equal((await request(url, 'POST', '/v1/chat/completions', { body: chat('x'), headers: { authorization: `Bearer ${managed}`, 'x-request-id': 'revoked' } })).status, 401);
    assert.equal((await request(url, 'GET', '/metrics', { headers: { 'x-api-key': `${MASTER}x`, 'x-request-id': 'typo' } })).status, 401);

    await waitFor(() => ['with-managed-key', 'provider-key-echoed', 'passthrough-echoed', 'keys-echoed', 'revoked', 'typo'].every((id) => logLines(run!.stdout()).some((l) => l.request_id === id)), 5000, 'every request\'s line');
    run.child.kill('SIGTERM');
    assert.equal((await withTimeout(run.exit, 15_000, 'the gateway to exit')).code, 0, run.stderr());

    const output = run.stdout() + run.stderr();
    for (const [name, secret] of [['the master key', MASTER], ['the managed key\'s secret', managed], ['the provider\'s key', PROVIDER_KEY], ['the AWS secret', AWS_SECRET]] as const) {
      assert.ok(!output.includes(secret), `${name} is in the log`);
      // Nor in a JSON string's escaped form.
      assert.ok(!output.includes(JSON.stringify(secret).slice(1, -1)), `${name} is in the log, escaped`);
    }
    // The lines are there, their secrets cleared.
    const lines = logLines(run.stdout());
    const line = (id: string) => lines.find((l) => l.request_id === id && (l.msg === 'request' || l.msg === 'request failed'))!;
    assert.equal(line('provider-key-echoed').error, 'Incorrect API key provided: [redacted]');
    assert.equal(line('passthrough-echoed').error, 'bad key [redacted] for model');
    assert.equal(line('keys-echoed').error, 'cannot parse prompt "[redacted] [redacted]"');
    assert.equal(line('with-managed-key').status, 200);
    assert.equal(line('revoked').status, 401);
  });
});
