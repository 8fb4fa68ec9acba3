import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkConfigFile } from '../../src/config/check.ts';
import { assertErrors, load, writeConfig } from './helpers.ts';

describe('config: azure and bedrock providers', () => {
  it('fills in the defaults', () => {
    const { config } = load(`
providers:
  az: { type: azure, base_url: "https://res.openai.azure.com/", api_key: k, deployments: { gpt-4o: prod } }
  az2: { type: azure, base_url: "https://res.openai.azure.com", models: [gpt-4o-mini], entra: { tenant_id: t, client_id: c, client_secret: s } }
  br: { type: bedrock, region: eu-central-1, models: [amazon.nova-lite-v1:0], drop_unsupported: yes }
`);
    assert.deepEqual(config.providers.az, {
      type: 'azure', base_url: 'https://res.openai.azure.com', api_key: 'k', api_version: '2024-10-21', realtime_api_version: '2024-10-01-preview',
      deployments: { 'gpt-4o': 'prod' }, drop_unsupported: false, connect_timeout_ms: 10000, timeout_ms: 600000, max_response_bytes: 67108864, max_event_bytes: 16777216, learned: { enabled: true, reserve: 0, cooldown_seconds: 5 },
    });
    assert.deepEqual((config.providers.az2 as { entra?: unknown }).entra, { tenant_id: 't', client_id: 'c', client_secret: 's' });
    assert.deepEqual(config.providers.br, {
      type: 'bedrock', region: 'eu-central-1', models: ['amazon.nova-lite-v1:0'], drop_unsupported: true, connect_timeout_ms: 10000, timeout_ms: 600000, max_response_bytes: 67108864, max_event_bytes: 16777216, learned: { enabled: true, reserve: 0, cooldown_seconds: 5 },
    });
  });

  it('errors name the key, at start and in check-config alike', () => {
    const yaml = `
providers:
  nokey: { type: azure, base_url: "https://res.openai.azure.com", models: [m] }
  both: { type: azure, base_url: "https://res.openai.azure.com", api_key: k, models: [m], entra: { tenant_id: t, client_id: c, client_secret: s } }
  nomodels: { type: azure, base_url: "https://res.openai.azure.com", api_key: k }
  plainhttp: { type: azure, base_url: "https://res.openai.azure.com", models: [m], entra: { tenant_id: t, client_id: c, client_secret: s, authority_host: "http://login.local" } }
  partial: { type: azure, base_url: "https://res.openai.azure.com", models: [m], entra: { tenant_id: t } }
  nourl: { type: azure, api_key: k, models: [m] }
  noregion: { type: bedrock, models: [m] }
  halfkeys: { type: bedrock, region: us-east-1, access_key_id: AKID, models: [m] }
  token: { type: bedrock, region: us-east-1, session_token: tok, models: [m] }
  brkey: { type: bedrock, region: us-east-1, api_key: k, models: [m] }
  brmodels: { type: bedrock, region: us-east-1 }
  brurl: { type: bedrock, region: us-east-1, endpoint: "bedrock.local", models: [m], drop_unsupported: maybe }
`;
    const expected = [
      'providers.nokey.api_key: required (or entra: {tenant_id, client_id, client_secret})',
      'providers.both.entra: give api_key or entra, not both',
      'providers.nomodels.models: required (or deployments): Azure OpenAI has no model discovery for deployments',
      'providers.plainhttp.entra.authority_host: must be an https URL',
      'providers.partial.entra.client_id: required',
      'providers.partial.entra.client_secret: required',
      'providers.nourl.base_url: required',
      'providers.noregion.region: required',
      'providers.halfkeys.secret_access_key: required with access_key_id',
      'providers.token.session_token: only with access_key_id and secret_access_key',
      'providers.brkey.api_key: not used by bedrock: give access_key_id and secret_access_key, or leave both out for the AWS credential chain',
      'providers.brmodels.models: required: the Bedrock model ids this instance serves (the runtime API lists none)',
      'providers.brurl.endpoint: must be an http(s) URL (got "bedrock.local")',
      'providers.brurl.drop_unsupported: must be a boolean (true/false/yes/no/on/off/1/0)',
    ];
    assertErrors(yaml, expected);
    const { file } = writeConfig(yaml);
    const checked = checkConfigFile(file, {});
    assert.equal(checked.ok, false);
    for (const e of expected) assert.ok(checked.lines.some((line) => line.endsWith(`: ${e}`)), `check-config names ${e}, at its line: ${checked.lines.join(' | ')}`);
  });
});
