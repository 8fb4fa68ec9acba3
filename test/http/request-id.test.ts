/**
 * Every answer carries `x-request-id` (the caller's when it is a plain token, else a generated
 * one), streams and errors included; onResponse hooks registered on the server see streamed
 * answers; a failed request's log lines carry its id.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { AdmissionCore } from '../../src/admission/core.ts';
import { BatchService } from '../../src/batch/service.ts';
import pino from 'pino';
import { KeyRing } from '../../src/auth/keys.ts';
import type { HttpServices } from '../../src/http/context.ts';
import { GatewayHealth } from '../../src/health/readiness.ts';
import { InFlightRequests } from '../../src/http/in-flight.ts';
import { GatewayMetrics } from '../../src/metrics/index.ts';
import { buildServer } from '../../src/http/server.ts';
import { mockProviderType } from '../../src/providers/mock.ts';
import type { Provider } from '../../src/providers/types.ts';
import { Resolver } from '../../src/routing/resolver.ts';
import { waitFor } from '../support/e2e.ts';
import { MemoryStorage } from '../../src/storage/memory.ts';
import { UsageRecorder } from '../../src/usage/recorder.ts';
import { RefusalLog } from '../../src/usage/refusals.ts';
import { request } from '../support/gateway.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const MASTER = 'sk-master-request-id';
const USER_PATH = 'x-floodgate-user-path';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const chat = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ model: 'mock/mock-1', messages: [{ role: 'user', content: 'hi' }], ...extra });

describe('x-request-id on every answer', () => {
  let gw: TestGateway;
  const auth = { authorization: `Bearer ${MASTER}` };

  before(async () => {
    gw = await startTestGateway({
      env: { MASTER_KEY: MASTER },
      yaml: 'rate_limits:\n  user_paths: [ { path: /limited, limits: [ { period: minute, max_requests: 1 } ] } ]\n',
    });
  });
  after(async () => {
    await gw?.close();
  });

  it('a buffered answer echoes a sane incoming id, and gets a generated one without', async () => {
    const echoed = await gw.request('POST', '/v1/chat/completions', { body: chat(), headers: { ...auth, 'x-request-id': 'client-7.a_b:c' } });
    assert.equal(echoed.status, 200, echoed.text);
    assert.equal(echoed.headers.get('x-request-id'), 'client-7.a_b:c');
    const generated = await gw.request('POST', '/v1/chat/completions', { body: chat(), headers: auth });
    assert.equal(generated.status, 200);
    assert.match(generated.headers.get('x-request-id') ?? '', UUID);
  });

  it('a streamed answer carries it too', async () => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat({ stream: true }), headers: { ...auth, 'x-request-id': 'stream-1' } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    assert.match(res.text, /data: \[DONE\]/);
    assert.equal(res.headers.get('x-request-id'), 'stream-1');
  });

  it('error answers carry it: 401, 404 (route and model), 400, 429', async () => {
    const answers = {
      401: await gw.request('POST', '/v1/chat/completions', { body: chat(), headers: { 'x-request-id': 'e-401' } }),
      404: await gw.request('GET', '/no/such/route', { headers: { ...auth, 'x-request-id': 'e-404' } }),
      '404 model': await gw.request('POST', '/v1/chat/completions', { body: chat({ model: 'mock/nope' }), headers: { ...auth, 'x-request-id': 'e-404-model' } }),
      400: await gw.request('POST', '/v1/chat/completions', { body: { messages: [] }, headers: { ...auth, 'x-request-id': 'e-400' } }),
    };
    for (const [what, res] of Object.entries(answers)) {
      assert.equal(res.status, Number.parseInt(what, 10), `${what}: ${res.text}`);
      assert.equal(res.headers.get('x-request-id'), `e-${what.replace(' ', '-')}`, what);
    }
    const limited = { ...auth, [USER_PATH]: '/limited' };
    assert.equal((await gw.request('POST', '/v1/chat/completions', { body: chat(), headers: limited })).status, 200);
    const refused = await gw.request('POST', '/v1/chat/completions', { body: chat(), headers: { ...limited, 'x-request-id': 'e-429' } });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('x-request-id'), 'e-429');
  });

  it('an incoming id that is not a plain token is replaced', async () => {
    for (const given of ['a'.repeat(300), '<script>alert(1)</script>', 'two words', 'semi;colon']) {
      const res = await gw.request('POST', '/v1/chat/completions', { body: chat(), headers: { ...auth, 'x-request-id': given } });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('x-request-id') ?? '', UUID, given);
    }
    const unauthorized = await gw.request('POST', '/v1/chat/completions', { body: chat(), headers: { 'x-request-id': '<bad>' } });
    assert.equal(unauthorized.status, 401);
    assert.match(unauthorized.headers.get('x-request-id') ?? '', UUID);
  });
});

/** A provider with a bug: its calls throw a plain error, which the gateway answers with a 500. */
const brokenProvider: Provider = {
  name: 'broken',
  type: 'broken',
  listModels: async () => ['m'],
  call: async () => {
    throw new Error('provider bug');
  },
  passthrough: async () => {
    throw new Error('provider bug');
  },
  close: async () => {},
};

/** The HTTP server as app.ts builds it, over the mock provider, a broken one and in-memory storage. */
async function startServer(lines: Array<Record<string, unknown>>): Promise<{ app: FastifyInstance; url: string; usage: UsageRecorder }> {
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const storage = new MemoryStorage();
  const mock = mockProviderType.create('mock', {});
  const usage = new UsageRecorder(storage.usage);
  const metrics = new GatewayMetrics({ models: [] });
  const resolver = new Resolver([mock, brokenProvider], new Map([['mock', await mock.listModels()], ['broken', ['m']]]));
  const admission = new AdmissionCore({ limiter: undefined, budgets: undefined, usage, metrics, now: Date.now });
  const services: HttpServices = {
    options: {
      masterKey: undefined, userPathHeader: USER_PATH, bodyLimitBytes: 1024 * 1024, cacheShared: false, logger, accessLog: false,
      patience: { defaultWaitMs: 0, maxWaitMs: 0 },
      connections: { headersTimeoutMs: 30_000, requestTimeoutMs: 300_000, keepAliveTimeoutMs: 72_000, maxConnections: 10_000 },
    },
    resolver,
    keys: await KeyRing.load(storage),
    storage,
    usage,
    refusals: new RefusalLog(storage.refusals, { now: Date.now }),
    admission,
    batches: new BatchService({ storage, resolver, admission, logger, files: { ttlSeconds: 86_400, maxBytesPerUserPath: 1024 ** 3, maxFilesPerUserPath: 1000 }, now: Date.now }),
    limiter: undefined,
    rules: undefined,
    cache: undefined,
    inFlight: new InFlightRequests(),
    now: Date.now,
    budgets: undefined,
    budgetManager: undefined,
    metrics,
    health: new GatewayHealth({ counters: () => undefined, refusedWithoutCounters: false, pingStorage: () => storage.ping() }),
  };
  const app = buildServer(services);
  return {
    app,
    usage,
    get url(): string {
      return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    },
  };
}

describe('hooks and log lines see every answer', () => {
  const lines: Array<Record<string, unknown>> = [];
  const answers: Array<{ id: string; status: number; finished: boolean }> = [];
  let server: Awaited<ReturnType<typeof startServer>>;

  before(async () => {
    server = await startServer(lines);
    server.app.addHook('onResponse', async (request, reply) => {
      answers.push({ id: request.id, status: reply.statusCode, finished: reply.raw.writableFinished });
    });
    await server.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    await server?.app.close();
    await server?.usage.close();
  });

  it('an onResponse hook registered on the server sees a streamed answer once it was sent whole', async () => {
    answers.length = 0;
    const res = await request(server.url, 'POST', '/v1/chat/completions', { body: chat({ stream: true }) });
    assert.equal(res.status, 200);
    assert.match(res.text, /data: \[DONE\]/);
    const id = res.headers.get('x-request-id') ?? '';
    assert.match(id, UUID);
    await waitFor(() => answers.length === 1);
    assert.deepEqual(answers, [{ id, status: 200, finished: true }]);
  });

  it('a failed request is logged once with its request id, status, method, route, model and error', async () => {
    lines.length = 0;
    const res = await request(server.url, 'POST', '/v1/chat/completions', { body: chat({ model: 'mock/nope' }), headers: { 'x-request-id': 'log-404' } });
    assert.equal(res.status, 404);
    const failed = lines.filter((l) => l.msg === 'request failed');
    assert.equal(failed.length, 1, JSON.stringify(lines));
    assert.deepEqual(
      { reqId: failed[0]!.reqId, request_id: failed[0]!.request_id, status: failed[0]!.status, method: failed[0]!.method, endpoint: failed[0]!.endpoint, model: failed[0]!.model, error: failed[0]!.error },
      { reqId: 'log-404', request_id: 'log-404', status: 404, method: 'POST', endpoint: '/v1/chat/completions', model: 'mock/nope', error: 'model "mock/nope" not found' },
    );
  });

  it('a thrown error is logged by the error handler with the request id, then as a failed request', async () => {
    lines.length = 0;
    const res = await request(server.url, 'POST', '/v1/chat/completions', { body: chat({ model: 'broken/m' }), headers: { 'x-request-id': 'log-500' } });
    assert.equal(res.status, 500);
    assert.equal(res.headers.get('x-request-id'), 'log-500');
    const unhandled = lines.find((l) => l.msg === 'unhandled error');
    assert.equal(unhandled?.reqId, 'log-500', JSON.stringify(lines));
    assert.match(String((unhandled?.err as { message?: string } | undefined)?.message), /provider bug/);
    const failed = lines.find((l) => l.msg === 'request failed');
    assert.equal(failed?.reqId, 'log-500');
    assert.equal(failed?.status, 500);
  });

  it('successful requests are not logged', async () => {
    lines.length = 0;
    const res = await request(server.url, 'POST', '/v1/chat/completions', { body: chat() });
    assert.equal(res.status, 200);
    assert.deepEqual(lines.filter((l) => l.reqId !== undefined), []);
  });
});
