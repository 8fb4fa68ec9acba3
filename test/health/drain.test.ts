/**
 * The drain on SIGTERM (CONTRACT §14): from the signal `/ready` answers 503 draining while the
 * request in flight runs on, the listener keeps answering `/health` and `/ready`, a new model
 * request gets a 503 telling its client to retry elsewhere, and once the request in flight has
 * ended the gateway closes its port and exits 0.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { listeningUrl, runCli, withTimeout, type Run } from '../support/cli.ts';
import { assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { request } from '../support/gateway.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { accepts, eventually } from '../support/processes.ts';

describe('draining on SIGTERM', () => {
  let dir: string;
  let fake: FakeUpstream;
  let run: Run | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-drain-'));
    fake = await startFakeUpstream({ apiKey: 'k-up', name: 'up' });
  });
  after(async () => {
    if (run !== undefined && run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    await fake?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers the probes until the request in flight ends, refuses new model requests, then exits 0', async () => {
    const config = join(dir, 'drain.yaml');
    writeFileSync(config, `storage: { type: sqlite, sqlite: { path: ${join(dir, 'drain.db')} } }\nproviders:\n${openaiProvider('up', fake.url, ['gpt-x'])}`);
    run = runCli(['--config', config, '--port', '0'], dir, { SHUTDOWN_GRACE_SECONDS: '30' });
    const url = await listeningUrl(run);
    const port = Number(new URL(url).port);
    assert.deepEqual((await request(url, 'GET', '/ready')).json(), { status: 'ready' });

    const release = fake.holdStreamNext();
    const stream = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'up/gpt-x', stream: true, messages: [{ role: 'user', content: 'still running' }] }),
    });
    assert.equal(stream.status, 200);
    const reader = stream.body!.getReader();
    await reader.read();

    run.child.kill('SIGTERM');
    let ready = await request(url, 'GET', '/ready');
    assert.ok(await eventually(async () => (ready = await request(url, 'GET', '/ready')).status === 503, 5000), ready.text);
    assert.deepEqual(ready.json(), { status: 'draining' });
    const health = await request(url, 'GET', '/health');
    assert.equal(health.status, 200);
    assert.deepEqual(health.json(), { status: 'ok' });

    const refused = await request(url, 'POST', '/v1/chat/completions', { body: { model: 'up/gpt-x', messages: [{ role: 'user', content: 'too late' }] } });
    const error = assertOpenAiError(refused, 503, 'provider_error');
    assert.equal(error.code, 'gateway_draining');
    assert.match(error.message, /shutting down/);
    assert.equal(refused.headers.get('connection'), 'close');
    assert.equal(fake.callCount('/v1/chat/completions'), 1, 'the refused request never reached the provider');

    // Still draining a while later: the listener waits for the stream, not for a timer.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(run.child.exitCode, null);
    assert.deepEqual((await request(url, 'GET', '/ready')).json(), { status: 'draining' });

    release();
    let rest = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
    assert.match(rest, /data: \[DONE\]/, 'the stream in flight ended normally');

    const { code } = await withTimeout(run.exit, 10_000, 'the gateway to exit');
    assert.equal(code, 0, run.stderr());
    assert.equal(await accepts(port), false, 'the port is closed');
  });
});
