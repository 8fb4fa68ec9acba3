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
    assert.deepEqual(doc.servers, [{ url: gw.url, description: 'Where this gateway listens.' }]);
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
        const isPublic = path === '/health' || path === '/ready' || path === '/openapi.json' || path === '/dashboard' || path.startsWith('/dashboard/');
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
    assert.deepEqual(usage.filter((p) => p.in === 'query').map((p) => [p.name, p.required]), [['from', false], ['to', false]]);
    assert.deepEqual(doc.paths['/admin/api-keys/{id}'].delete.parameters.map((p: Json) => [p.name, p.in]), [['id', 'path']]);
  });

  it('documents the success answer and the error record where each applies', () => {
    const error = doc.components.schemas.Error;
    assert.deepEqual(Object.keys(error.properties.error.properties), ['type', 'message', 'param', 'code']);
    const list = doc.paths['/admin/rate-limits'].get.responses;
    assert.deepEqual(list['200'].content['application/json'].schema, { $ref: '#/components/schemas/RateLimitList' });
    assert.deepEqual(Object.keys(list).sort(), ['200', '400', '401', '503']);
    assert.deepEqual(doc.paths['/admin/rate-limits'].get.parameters.map((p: Json) => [p.name, p.in, p.required]), [['expand', 'query', false], ['children_limit', 'query', false]]);
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

  it('declares the user-path, max-wait and priority headers on every model operation, and on no other', () => {
    const requestHeaders = [['x-floodgate-user-path', false, 'string'], ['x-floodgate-max-wait', false, 'string'], ['x-floodgate-priority', false, 'string']];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const [method, op] of Object.entries(item as Record<string, Json>)) {
        const headers = ((op.parameters ?? []) as Json[]).filter((p) => p.in === 'header');
        const isModel = op.tags.some((tag: string) => ['models', 'batches', 'usage', 'passthrough'].includes(tag));
        assert.deepEqual(headers.map((h) => [h.name, h.required, h.schema.type]), isModel ? requestHeaders : [], `${method} ${path}`);
      }
    }
    const [, wait, priority] = doc.paths['/v1/chat/completions'].post.parameters.filter((p: Json) => p.in === 'header') as Json[];
    const pattern = new RegExp(wait!.schema.pattern);
    for (const good of ['0', '20', '0.5', '.25', '1.125']) assert.ok(pattern.test(good), good);
    for (const bad of ['-1', '1.2345', 'soon', '1e3', '']) assert.ok(!pattern.test(bad), bad);
    assert.deepEqual(priority!.schema.enum, ['high', 'normal', 'low']);
    assert.equal(priority!.schema.default, 'normal');
  });

  it('declares x-floodgate-queue-wait-ms on the success and the 429 of every operation that admits a request, and nowhere else', () => {
    const ref = { $ref: '#/components/headers/x-floodgate-queue-wait-ms' };
    assert.deepEqual(doc.components.headers['x-floodgate-queue-wait-ms'].schema, { type: 'integer', minimum: 0 });
    const declaring: string[] = [];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const [method, op] of Object.entries(item as Record<string, Json>)) {
        for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
          if (response.headers?.['x-floodgate-queue-wait-ms'] === undefined) continue;
          assert.deepEqual(response.headers['x-floodgate-queue-wait-ms'], ref);
          declaring.push(`${method} ${path} ${status}`);
        }
      }
    }
    const admitting = ['post /v1/chat/completions', 'post /v1/responses', 'post /v1/embeddings', 'post /v1/audio/speech', 'post /v1/audio/transcriptions', 'post /v1/messages', 'post /v1/files', 'post /v1/batches'];
    const passthrough = Object.keys(doc.paths['/p/{provider}/{path}']).map((method) => `${method} /p/{provider}/{path}`);
    const expected = [...admitting, ...passthrough].flatMap((op) => [`${op} 200`, `${op} 429`]);
    assert.deepEqual(declaring.sort(), [...expected, 'get /v1/realtime 429'].sort());
  });

  it('shows an example of every admin request body, each one valid for the schema that validates the body', () => {
    let count = 0;
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const [method, op] of Object.entries(item as Record<string, Json>)) {
        if (!op.tags.includes('admin') || op.requestBody === undefined) continue;
        const entry = OPENAPI_OPERATIONS[`${method.toUpperCase()} ${path}`]!;
        const examples = op.requestBody.content['application/json'].examples as Record<string, { summary: string; value: unknown }>;
        assert.ok(Object.keys(examples ?? {}).length > 0, `${method} ${path} has examples`);
        for (const [name, { summary, value }] of Object.entries(examples)) {
          assert.ok(summary.length > 0);
          const parsed = entry.body!.schema.safeParse(value);
          assert.ok(parsed.success, `${method} ${path} example ${name}: ${JSON.stringify(parsed.error?.issues)}`);
          count += 1;
        }
      }
    }
    assert.ok(count >= 7, `${count} examples`);
  });

  it('types the model requests and answers, the caps as integers', () => {
    const { schemas } = doc.components;
    assert.deepEqual(schemas.ChatCompletionRequest.properties.messages.items.required, ['role']);
    assert.deepEqual(schemas.AnthropicMessagesRequest.properties.messages.items.properties.role.enum, ['user', 'assistant']);
    assert.ok(schemas.EmbeddingsRequest.properties.input.anyOf.length >= 3);
    assert.ok(schemas.ResponsesRequest.properties.input.anyOf.length >= 2);
    const answers: Array<[string, string]> = [
      ['/v1/chat/completions', 'ChatCompletion'],
      ['/v1/responses', 'Response'],
      ['/v1/embeddings', 'EmbeddingList'],
      ['/v1/audio/transcriptions', 'Transcription'],
      ['/v1/messages', 'AnthropicMessage'],
    ];
    for (const [path, name] of answers) {
      assert.deepEqual(doc.paths[path].post.responses['200'].content['application/json'].schema, { $ref: `#/components/schemas/${name}` }, path);
      assert.ok(schemas[name].required.length >= 1, name);
    }
    assert.deepEqual(schemas.ChatCompletion.required, ['id', 'object', 'created', 'model', 'choices']);
    assert.equal(doc.paths['/v1/audio/speech'].post.responses['200'].content['audio/*'].schema.contentMediaType, 'audio/*');
    // Every JSON answer and body has a schema that says something.
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const [method, op] of Object.entries(item as Record<string, Json>)) {
        for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
          const schema = response.content?.['application/json']?.schema;
          if (schema !== undefined) assert.notDeepEqual(schema, {}, `${method} ${path} ${status}`);
        }
      }
    }
    for (const name of ['PutRateLimitRequest']) {
      for (const cap of ['max_requests', 'max_tokens']) {
        assert.deepEqual(schemas[name].properties[cap].anyOf[0], { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'A cap; null or absent: none.' }, cap);
      }
    }
    assert.equal(schemas.ResetOneRateLimitRequest.properties.period_seconds.type, 'integer');
    assert.ok(schemas.ResetOneRateLimitRequest.properties.limit_key, 'reset-one takes limit_key');
    assert.equal(schemas.RuleStatus.properties.max_requests.type, 'integer');
  });

  it('answers without a key while the API it describes needs one', async () => {
    assert.equal((await gw.request('GET', '/admin/rate-limits')).status, 401);
    assert.equal((await gw.request('GET', '/openapi.json', { headers: { authorization: 'Bearer wrong' } })).status, 200);
  });
});

describe('GET /openapi.json on every address and with another user-path header', () => {
  it('leaves the host of its server to the reader, with the port it listens on, and names the configured header', async () => {
    const gw = await startTestGateway({ env: { MASTER_KEY, HOST: '0.0.0.0', USER_PATH_HEADER: 'X-Team-Path' } });
    try {
      const doc = (await gw.request('GET', '/openapi.json')).json();
      assert.deepEqual(doc.servers, [{
        url: `http://{host}:${gw.gateway.port}`,
        description: 'This gateway, which listens on every address of its machine.',
        variables: { host: { default: '127.0.0.1', description: 'An address clients reach it at.' } },
      }]);
      const header = (doc.paths['/v1/chat/completions'].post.parameters as Json[]).find((p) => p.in === 'header');
      assert.equal(header?.name, 'x-team-path');
    } finally {
      await gw.close();
    }
  });
});
