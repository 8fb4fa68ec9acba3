import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { checkConfigFile } from '../../src/config/check.ts';
import { makeServiceAccount } from '../support/fake-google-token.ts';
import { assertErrors, load, tempDir, writeConfig } from './helpers.ts';

describe('config: type gemini and type vertex', () => {
  it('gemini: base_url defaults to Google\'s, a copied /v1beta is dropped, drop_unsupported defaults to false', () => {
    const { config } = load(`
providers:
  g: { type: gemini, api_key: k }
  g2: { type: gemini, base_url: "https://proxy.example.com/v1beta/", drop_unsupported: yes }
`);
    assert.deepEqual(config.providers.g, {
      type: 'gemini', api_key: 'k', base_url: 'https://generativelanguage.googleapis.com', drop_unsupported: false, connect_timeout_ms: 10000, timeout_ms: 600000, max_response_bytes: 67108864, max_event_bytes: 16777216, learned: { enabled: true, reserve: 0, cooldown_seconds: 5 },
    });
    assert.equal((config.providers.g2 as { base_url: string }).base_url, 'https://proxy.example.com');
    assert.equal((config.providers.g2 as { drop_unsupported: boolean }).drop_unsupported, true);
  });

  it('vertex: project, location and a readable service-account key', () => {
    const account = makeServiceAccount('https://oauth2.googleapis.com/token');
    const { config } = load(`
providers:
  v: { type: vertex, project: my-project, location: us-central1, credentials_file: ${account.file} }
  adc: { type: vertex, project: other-project, location: global }
`);
    assert.deepEqual(config.providers.v, {
      type: 'vertex', project: 'my-project', location: 'us-central1', credentials_file: account.file, drop_unsupported: false, connect_timeout_ms: 10000, timeout_ms: 600000, max_response_bytes: 67108864, max_event_bytes: 16777216, learned: { enabled: true, reserve: 0, cooldown_seconds: 5 },
    });
    assert.equal(config.providers.adc?.type, 'vertex');
  });

  it('errors name the key and say what is wrong', () => {
    const dir = tempDir();
    const userCreds = join(dir, 'adc.json');
    writeFileSync(userCreds, JSON.stringify({ type: 'authorized_user', client_id: 'x', client_secret: 'y', refresh_token: 'z' }));
    const notJson = join(dir, 'key.txt');
    writeFileSync(notJson, 'not json');
    const missing = join(dir, 'missing.json');
    assertErrors(`
providers:
  a: { type: vertex, location: us-central1 }
  b: { type: vertex, project: p, location: "us central" }
  c: { type: vertex, project: p, location: eu, credentials_file: ${missing} }
  d: { type: vertex, project: p, location: eu, credentials_file: ${userCreds} }
  e: { type: vertex, project: p, location: eu, credentials_file: ${notJson} }
  f: { type: gemini, drop_unsupported: maybe, base_url: "ftp://x" }
  g: { type: gemini, region: eu }
`, [
      'providers.a.project: required',
      'providers.b.location: must be a Google Cloud location such as us-central1 or global',
      `providers.c.credentials_file: cannot read "${missing}": ENOENT: no such file or directory, open '${missing}'`,
      `providers.d.credentials_file: "${userCreds}" is not a service-account key file (its type is "authorized_user"; other credentials are found as application-default credentials when credentials_file is left out)`,
      `providers.e.credentials_file: "${notJson}" is not JSON (expected a service-account key file)`,
      'providers.f.drop_unsupported: must be a boolean (true/false/yes/no/on/off/1/0)',
      'providers.f.base_url: must be an http(s) URL (got "ftp://x")',
      'providers.g.region: unknown key',
    ]);
  });

  it('check-config reports them too', () => {
    const { file, dir } = writeConfig('providers:\n  v: { type: vertex, project: p }\n');
    const result = checkConfigFile(file, {}, dir);
    assert.equal(result.ok, false);
    assert.ok(result.lines.some((line) => line.endsWith(': providers.v.location: required')), result.lines.join('\n'));
  });
});
