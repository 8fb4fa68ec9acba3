/**
 * Configuration messages say where in the file: `<file>:<line>:<column>: <key path>: <message>`,
 * the file named as the operator gave it, an unknown key with the known key it is closest to.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { closest, editDistance } from '../../src/config/suggest.ts';
import { loadAsGiven } from './helpers.ts';

describe('configuration messages: file, line and column', () => {
  it('place a bad value at the value, an unknown key at the key, a missing key at the mapping that lacks it', () => {
    const { error } = loadAsGiven(`server:
  port: eighty
  hots: 127.0.0.1
storage:
  type: postgres
providers:
  claude: { type: anthropic, api_key: k, base_ur: "https://x.test" }
`);
    assert.deepEqual(error?.errors, [
      'floodgate.yaml:2:9: server.port: must be an integer 0..65535',
      'floodgate.yaml:3:3: server.hots: unknown key (did you mean "host"?)',
      'floodgate.yaml:5:3: storage.postgres.url: required when storage.type is postgres (set it here or with POSTGRES_URL)',
      'floodgate.yaml:7:42: providers.claude.base_ur: unknown key (did you mean "base_url"?)',
    ]);
  });

  it('an unknown key far from every known one gets no suggestion', () => {
    assert.deepEqual(loadAsGiven('usage:\n  frobnicate: true\n').error?.errors, ['floodgate.yaml:2:3: usage.frobnicate: unknown key']);
  });

  it('a value set by an environment variable is placed at the variable, not at the file\'s line', () => {
    const { error } = loadAsGiven('server:\n  shutdown_grace_seconds: 5\n  body_limit: lots\n', { SHUTDOWN_GRACE_SECONDS: 'soon' });
    assert.deepEqual(error?.errors, [
      'floodgate.yaml:3:15: server.body_limit: must be a size in bytes: <n>, <n>kb, <n>mb or <n>gb (e.g. 10mb)',
      'SHUTDOWN_GRACE_SECONDS: server.shutdown_grace_seconds: must be an integer 0..3600',
    ]);
  });

  it('cross references and unset variables are placed too', () => {
    const { error } = loadAsGiven(`providers:
  up: { type: openai, base_url: "https://\${UP_HOST}/v1" }
aliases:
  fast: { targets: [up/a, down/b] }
`);
    assert.deepEqual(error?.errors, ['floodgate.yaml:4:27: aliases.fast.targets[1]: unknown provider "down" in "down/b" (configured: up)']);
    assert.deepEqual(error?.warnings, ['floodgate.yaml:2:33: providers.up.base_url: ${UP_HOST} is not set; substituted an empty string']);
  });

  it('every unset variable is warned about by name, unless an environment variable replaces the value', () => {
    const { loaded } = loadAsGiven('server:\n  master_key: "${FG_MASTER}"\nstorage:\n  sqlite: { path: "${DATA_DIR}/fg.db" }\n', { MASTER_KEY: 'from-env' });
    assert.equal(loaded?.config.server.master_key, 'from-env');
    assert.deepEqual(loaded?.warnings, ['floodgate.yaml:4:19: storage.sqlite.path: ${DATA_DIR} is not set; substituted an empty string']);
  });
});

describe('the closest key', () => {
  it('counts a swap of neighbours as one edit', () => {
    assert.equal(editDistance('prot', 'port'), 1);
    assert.equal(editDistance('base_ur', 'base_url'), 1);
    assert.equal(editDistance('kitten', 'sitting'), 3);
    assert.equal(editDistance('', 'abc'), 3);
  });

  it('suggests only a key within a third of the length (one edit at least, three at most)', () => {
    const keys = ['host', 'port', 'master_key', 'user_path_header'];
    assert.equal(closest('hots', keys), 'host');
    assert.equal(closest('MASTER_KEY', keys), 'master_key');
    assert.equal(closest('mastr_ky', keys), 'master_key');
    assert.equal(closest('xyz', keys), undefined);
    assert.equal(closest('user_path_headers_x', keys), 'user_path_header');
  });
});
