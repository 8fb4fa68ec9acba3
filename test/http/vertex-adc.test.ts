/**
 * Vertex AI without a key file: application-default credentials, here the metadata server of a
 * Google Cloud VM (faked; its address comes from GCE_METADATA_HOST, as the auth library reads
 * it). Its own file: it changes this process's environment.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startFakeGoogle, type FakeGoogle } from '../support/fake-google.ts';
import { startFakeGoogleToken, type FakeGoogleToken } from '../support/fake-google-token.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

describe('type vertex: application-default credentials', () => {
  let metadata: FakeGoogleToken;
  let google: FakeGoogle;
  let gw: TestGateway;

  before(async () => {
    metadata = await startFakeGoogleToken();
    delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
    process.env.CLOUDSDK_CONFIG = mkdtempSync(join(tmpdir(), 'floodgate-gcloud-')); // no gcloud user credentials
    process.env.GCE_METADATA_HOST = new URL(metadata.url).host;
    process.env.METADATA_SERVER_DETECTION = 'ping-only';
    google = await startFakeGoogle({ api: 'vertex', acceptsToken: (t) => metadata.accepts(t), project: 'adc-project', location: 'global' });
    gw = await startTestGateway({
      yaml: `providers:\n  vx: { type: vertex, project: adc-project, location: global, base_url: ${google.url}, models: [gemini-adc] }\n`,
    });
  });
  after(async () => {
    await gw?.close();
    await google?.close();
    await metadata?.close();
  });

  it('takes its token from the metadata server, once', async () => {
    const openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    for (const text of ['adc one', 'adc two']) {
      const res = await openai.chat.completions.create({ model: 'vx/gemini-adc', messages: [{ role: 'user', content: text }] });
      assert.equal(res.choices[0]?.message.content, text);
    }
    assert.equal(metadata.metadataTokenRequests, 1);
    assert.equal(google.calls[0]?.path, '/v1/projects/adc-project/locations/global/publishers/google/models/gemini-adc:generateContent');
    assert.match(String(google.calls[0]?.headers.authorization), /^Bearer ya29\.fake-/);
  });
});
