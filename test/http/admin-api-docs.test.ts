/**
 * docs/admin-api.md shows an example of every admin request body: each one is sent, in the
 * document's order, to a real gateway as the reader would send it, and must be answered 2xx.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { OPENAPI_OPERATIONS } from '../../src/http/openapi/operations.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const MASTER_KEY = 'sk-master-docs';
const DOC = readFileSync(new URL('../../docs/admin-api.md', import.meta.url), 'utf8');

/** Every `curl -X METHOD http://127.0.0.1:8080/PATH ... -d '<json>'` of the document, in order. */
function documentedRequests(): Array<{ method: string; path: string; body: unknown }> {
  const out: Array<{ method: string; path: string; body: unknown }> = [];
  for (const match of DOC.matchAll(/curl -X (\w+) http:\/\/127\.0\.0\.1:8080(\S+)[^\n]*(?:\\\n[^\n]*)*?-d '([^']*)'/g)) {
    out.push({ method: match[1]!, path: match[2]!, body: JSON.parse(match[3]!) });
  }
  return out;
}

describe('docs/admin-api.md', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ env: { MASTER_KEY } });
  });
  after(() => gw.close());

  it('has an example of every admin request body', () => {
    const documented = new Set(documentedRequests().map(({ method, path }) => `${method} ${path}`));
    const withBodies = Object.entries(OPENAPI_OPERATIONS).filter(([key, doc]) => doc.body !== undefined && key.split(' ')[1]!.startsWith('/admin/')).map(([key]) => key);
    assert.ok(withBodies.length >= 7, withBodies.join(', '));
    for (const key of withBodies) assert.ok(documented.has(key), `no example of ${key} in docs/admin-api.md`);
  });

  it('every example works as written, against a gateway', async () => {
    for (const { method, path, body } of documentedRequests()) {
      const res = await gw.request(method, path, { body, headers: { authorization: `Bearer ${MASTER_KEY}` } });
      assert.ok(res.status >= 200 && res.status < 300, `${method} ${path} ${JSON.stringify(body)}: ${res.status} ${res.text}`);
    }
  });
});
