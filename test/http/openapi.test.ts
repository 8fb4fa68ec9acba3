/**
 * End-to-end: `GET /openapi.json` is a valid OpenAPI 3.1 document (checked by a validator
 * library) describing every route the router holds, with the request schemas that validate the
 * requests, the admin tag, the bearer (JWT) scheme and the error record.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { z } from 'zod';
import { OPENAPI_METHODS, openApiPath } from '../../src/http/openapi/document.ts';
import { OPENAPI_OPERATIONS } from '../../src/http/openapi/operations.ts';
import { putRateLimitBody } from '../../src/http/schemas/admin-rate-limits.ts';
import { chatCompletionBody } from '../../src/http/schemas/model-requests.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

type Json = Record<string, any>;

const MASTER_KEY = 'sk-master-openapi';

/**
 * Every (pattern, method) the router holds, read from fastify's printed radix tree: each line is
 * a segment below its parent, with the methods of the route ending there in parentheses.
 */
function registeredRoutes(tree: string): Array<{ url: string; methods: string[] }> {
  const routes: Array<{ url: string; methods: string[] }> = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^((?:│ {3}| {4})*)(?:├── |└── )(.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    stack.length = depth;
    stack.push(match[2]!);
    if (match[3] !== undefined) routes.push({ url: stack.join(''), methods: match[3].split(', ') });
  }
  return routes;
}

/** The operations the document should have: OpenAPI's methods, HEAD only where no GET answers it. */
function expectedOperations(routes: Array<{ url: string; methods: string[] }>): Array<{ url: string; method: string }> {
  return routes.flatMap(({ url, methods }) => {
    const lower = methods.map((m) => m.toLowerCase());
    return lower
      .filter((m) => (OPENAPI_METHODS as readonly string[]).includes(m) && !(m === 'head' && lower.includes('get')))
      .map((method) => ({ url, method }));
  });
}

describe('GET /openapi.json', () => {
  let gw: TestGateway;
  let doc: Json;

  before(async () => {
    gw = await startTestGateway({ env: { MASTER_KEY } });
    const res = await gw.request('GET', '/openapi.json');
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    doc = res.json();
  });
  after(() => gw.close());

  it('is a valid OpenAPI 3.1 document, version 1.0', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
    assert.equal(validator.version, '3.1');
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(doc.info.title, 'Floodgate');
    assert.equal(doc.info.version, '1.0');
    assert.equal(doc.servers[0].url, '{base_url}');
  });

  it('has every route the server registers, and nothing else', () => {
    const routes = registeredRoutes(gw.gateway.server.printRoutes());
    assert.ok(routes.some((r) => r.url === '/p/:provider/*'), 'the tree parser reads wildcard routes');
    const expected = expectedOperations(routes).map(({ url, method }) => `${method} ${openApiPath(url)}`).sort();
    const documented = Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) => Object.keys(item).map((method) => `${method} ${path}`)).sort();
    assert.deepEqual(documented, expected);
    assert.ok(expected.length >= 30, `${expected.length} operations`);
  });

  it('documents each route from its own entry (a new route needs one in src/http/openapi/operations.ts)', () => {
    for (const { url, method } of expectedOperations(registeredRoutes(gw.gateway.server.printRoutes()))) {
      const key = `${method.toUpperCase()} ${url}`;
      assert.ok(OPENAPI_OPERATIONS[key] ?? OPENAPI_OPERATIONS[`ALL ${url}`], `no documentation entry for ${key}`);
    }
    const ids = Object.values(doc.paths as Record<string, Json>).flatMap((item) => Object.values(item).map((op) => op.operationId));
    assert.equal(new Set(ids).size, ids.length, 'operation ids are unique');
  });

  it('tags admin operations admin; bearer with bearerFormat JWT on every route but the public ones', () => {
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
      description: doc.components.securitySchemes.bearerAuth.description,
    });
    assert.deepEqual(doc.security, [{ bearerAuth: [] }, { apiKeyAuth: [] }]);
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const [method, op] of Object.entries(item as Record<string, Json>)) {
        const where = `${method} ${path}`;
        if (path.startsWith('/admin/') || path === '/metrics') assert.deepEqual(op.tags, ['admin'], where);
        else assert.ok(!op.tags.includes('admin'), where);
        const isPublic = path === '/health' || path === '/openapi.json' || path === '/dashboard' || path.startsWith('/dashboard/');
        assert.deepEqual(op.security, isPublic ? [] : undefined, where);
        if (isPublic) assert.equal(op.responses['401'], undefined, where);
        else {
          const shape = path === '/v1/messages' ? 'AnthropicError' : 'Error';
          assert.deepEqual(op.responses['401'].content['application/json'].schema, { $ref: `#/components/schemas/${shape}` }, where);
        }
      }
    }
    assert.deepEqual(doc.paths['/v1/chat/completions'].post.tags, ['models']);
  });

  it('request bodies are the zod schemas that validate them, on their input side', () => {
    const { $schema: _schema, ...put } = z.toJSONSchema(putRateLimitBody, { io: 'input' }) as Json;
    assert.deepEqual(doc.components.schemas.PutRateLimitRequest, put);
    assert.deepEqual(doc.paths['/admin/rate-limits'].put.requestBody.content['application/json'].schema, { $ref: '#/components/schemas/PutRateLimitRequest' });
    const { $schema: _chatSchema, ...chat } = z.toJSONSchema(chatCompletionBody, { io: 'input' }) as Json;
    assert.deepEqual(doc.components.schemas.ChatCompletionRequest, chat);
    assert.deepEqual(chat.required, ['model', 'messages']);
    const usage = doc.paths['/v1/usage'].get.parameters as Json[];
    assert.deepEqual(usage.map((p) => [p.name, p.in, p.required]), [['from', 'query', false], ['to', 'query', false]]);
    assert.deepEqual(doc.paths['/admin/api-keys/{id}'].delete.parameters.map((p: Json) => [p.name, p.in]), [['id', 'path']]);
  });

  it('documents the success answer and the error record where each applies', () => {
    const error = doc.components.schemas.Error;
    assert.deepEqual(Object.keys(error.properties.error.properties), ['type', 'message', 'param', 'code']);
    const list = doc.paths['/admin/rate-limits'].get.responses;
    assert.deepEqual(list['200'].content['application/json'].schema, { $ref: '#/components/schemas/RateLimitList' });
    assert.deepEqual(Object.keys(list).sort(), ['200', '400', '401', '503']);
    assert.deepEqual(doc.paths['/admin/rate-limits'].get.parameters.map((p: Json) => [p.name, p.in, p.required]), [['expand', 'query', false]]);
    assert.deepEqual(Object.keys(doc.paths['/admin/rate-limits'].put.responses).sort(), ['200', '400', '401', '409', '413', '503']);
    assert.equal(doc.paths['/admin/api-keys'].post.responses['201'].content['application/json'].schema.$ref, '#/components/schemas/ApiKeyCreated');
    const chat = doc.paths['/v1/chat/completions'].post.responses;
    for (const status of ['200', '400', '401', '404', '429', '502']) assert.ok(chat[status], `chat ${status}`);
    assert.ok(chat['200'].content['text/event-stream'], 'chat streams');
    assert.deepEqual(chat['429'].headers['Retry-After'], { $ref: '#/components/headers/Retry-After' });
    assert.deepEqual(doc.paths['/v1/messages'].post.responses['400'].content['application/json'].schema, { $ref: '#/components/schemas/AnthropicError' });
    const status = doc.components.schemas.RuleStatus;
    for (const field of ['scope', 'subject', 'period_seconds', 'requests_used', 'tokens_used', 'in_flight']) assert.ok(status.required.includes(field), field);
  });

  it('answers without a key while the API it describes needs one', async () => {
    assert.equal((await gw.request('GET', '/admin/rate-limits')).status, 401);
    assert.equal((await gw.request('GET', '/openapi.json', { headers: { authorization: 'Bearer wrong' } })).status, 200);
  });
});
