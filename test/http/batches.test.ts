import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI, { APIError, toFile } from 'openai';
import WebSocket from 'ws';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const client = (gw: TestGateway, userPath = '/'): OpenAI =>
  new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-floodgate-user-path': userPath } });

const jsonl = (model: string, n: number): string =>
  Array.from({ length: n }, (_, i) => JSON.stringify({ custom_id: `req-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model, messages: [{ role: 'user', content: `hello ${i}` }] } })).join('\n') + '\n';

async function submit(sdk: OpenAI, model: string, n = 2): Promise<OpenAI.Batches.Batch> {
  const file = await sdk.files.create({ file: await toFile(Buffer.from(jsonl(model, n)), 'input.jsonl'), purpose: 'batch' });
  return sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { job: 't' } });
}

async function until(sdk: OpenAI, id: string, status: string): Promise<OpenAI.Batches.Batch> {
  for (let i = 0; i < 200; i++) {
    const b = await sdk.batches.retrieve(id);
    if (b.status === status) return b;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`batch ${id} never reached ${status}`);
}

describe('batches on the mock provider', () => {
  let gw: TestGateway;
  before(async () => { gw = await startTestGateway(); });
  after(async () => gw.close());

  it('runs a batch to completion and serves its output file', async () => {
    const sdk = client(gw);
    const created = await submit(sdk, 'mock-1', 3);
    assert.match(created.id, /^batch_/);
    assert.equal(created.endpoint, '/v1/chat/completions');
    assert.deepEqual(created.metadata, { job: 't' });
    const done = await until(sdk, created.id, 'completed');
    assert.deepEqual(done.request_counts, { total: 3, completed: 3, failed: 0 });
    assert.ok(done.output_file_id);
    const text = await (await sdk.files.content(done.output_file_id)).text();
    const lines = text.trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => l.custom_id), ['req-0', 'req-1', 'req-2']);
    assert.equal(lines[1].response.status_code, 200);
    assert.equal(lines[1].response.body.choices[0].message.content, 'hello 1');
    const meta = await sdk.files.retrieve(done.output_file_id);
    assert.equal(meta.purpose, 'batch_output');
    const list = await sdk.batches.list({ limit: 10 });
    assert.ok(list.data.some((b) => b.id === created.id));
  });

  it('validates purpose, JSONL lines and the model', async () => {
    const form = new FormData();
    form.append('purpose', 'fine-tune');
    form.append('file', new Blob(['{}']), 'x.jsonl');
    const res = await fetch(`${gw.url}/v1/files`, { method: 'POST', body: form });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error: { param: string } }).error.param, 'purpose');

    const sdk = client(gw);
    const bad = await sdk.files.create({ file: await toFile(Buffer.from(jsonl('mock-1', 1) + '{"custom_id":"x","method":"GET"}\n'), 'bad.jsonl'), purpose: 'batch' });
    await assert.rejects(sdk.batches.create({ input_file_id: bad.id, endpoint: '/v1/chat/completions', completion_window: '24h' }), (err: APIError) => {
      assert.equal(err.status, 400);
      assert.match(err.message, /line 2/);
      return true;
    });
    const deepLine = JSON.stringify({ custom_id: 'deep', method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [], extra: '__DEEP__' } })
      .replace('"__DEEP__"', `${'['.repeat(5000)}${']'.repeat(5000)}`);
    const deep = await sdk.files.create({ file: await toFile(Buffer.from(jsonl('mock-1', 1) + deepLine + '\n'), 'deep.jsonl'), purpose: 'batch' });
    await assert.rejects(sdk.batches.create({ input_file_id: deep.id, endpoint: '/v1/chat/completions', completion_window: '24h' }), (err: APIError) => {
      assert.equal(err.status, 400);
      assert.match(err.message, /line 2: is nested deeper than 64 levels/);
      return true;
    });
    const unknown = await sdk.files.create({ file: await toFile(Buffer.from(jsonl('nope', 1)), 'u.jsonl'), purpose: 'batch' });
    await assert.rejects(sdk.batches.create({ input_file_id: unknown.id, endpoint: '/v1/chat/completions', completion_window: '24h' }), { status: 404 });
  });

  it('cancels a batch', async () => {
    const sdk = client(gw);
    const created = await submit(sdk, 'mock-1', 50);
    const cancelled = await sdk.batches.cancel(created.id);
    assert.ok(['cancelling', 'cancelled', 'completed'].includes(cancelled.status));
  });

  it('keeps each subtree to its own files and batches', async () => {
    const a = client(gw, '/team/a');
    const b = client(gw, '/team/b');
    const team = client(gw, '/team');
    const batchA = await submit(a, 'mock-1', 1);
    const batchB = await submit(b, 'mock-1', 1);
    await assert.rejects(a.batches.retrieve(batchB.id), (err: APIError) => err.status === 404 && (err.error as { type: string }).type === 'not_found_error');
    await assert.rejects(a.batches.cancel(batchB.id), { status: 404 });
    await assert.rejects(a.files.retrieve(batchB.input_file_id), { status: 404 });
    await assert.rejects(a.files.content(batchB.input_file_id), { status: 404 });
    const listA = (await a.batches.list()).data.map((x) => x.id);
    assert.ok(listA.includes(batchA.id) && !listA.includes(batchB.id));
    const listTeam = (await team.batches.list()).data.map((x) => x.id);
    assert.ok(listTeam.includes(batchA.id) && listTeam.includes(batchB.id));
    assert.equal((await team.batches.retrieve(batchB.id)).id, batchB.id);
    assert.equal((await team.files.retrieve(batchA.input_file_id)).id, batchA.input_file_id);
  });

  it('pages the list with after and limit', async () => {
    const sdk = client(gw, '/paging');
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await submit(sdk, 'mock-1', 1)).id);
    const first = await sdk.batches.list({ limit: 2 });
    assert.deepEqual(first.data.map((b) => b.id), [ids[2], ids[1]]);
    assert.equal(first.has_more, true);
    const second = await sdk.batches.list({ limit: 2, after: ids[1] });
    assert.deepEqual(second.data.map((b) => b.id), [ids[0]]);
    assert.equal(second.has_more, false);
  });

  it('refuses a malformed list query or upload form with a 400 naming the field', async () => {
    for (const [query, param, message] of [
      ['limit=0', 'limit', 'limit: must be an integer from 1 to 100'],
      ['limit=101', 'limit', 'limit: must be an integer from 1 to 100'],
      ['limit=2.5', 'limit', 'limit: must be an integer from 1 to 100'],
      ['order=desc', 'order', 'order: unknown field (expected one of after, limit)'],
    ] as const) {
      const res = await gw.request('GET', `/v1/batches?${query}`);
      assert.equal(res.status, 400, query);
      assert.deepEqual([res.json().error.param, res.json().error.message], [param, message], query);
    }
    const upload = async (fields: Record<string, string>, file = true): Promise<{ status: number; error: { param: string; message: string } }> => {
      const form = new FormData();
      for (const [name, value] of Object.entries(fields)) form.append(name, value);
      if (file) form.append('file', new Blob([jsonl('mock-1', 1)]), 'in.jsonl');
      const res = await fetch(`${gw.url}/v1/files`, { method: 'POST', body: form });
      return { status: res.status, ...((await res.json()) as { error: { param: string; message: string } }) };
    };
    const noFile = await upload({ purpose: 'batch' }, false);
    assert.deepEqual([noFile.status, noFile.error.param, noFile.error.message], [400, 'file', 'file: required form field (a file)']);
    const halfExpiry = await upload({ purpose: 'batch', 'expires_after[anchor]': 'created_at' });
    assert.deepEqual([halfExpiry.status, halfExpiry.error.param], [400, 'expires_after']);
    assert.match(halfExpiry.error.message, /expires_after\[anchor\] and expires_after\[seconds\] come together/);
    const badSeconds = await upload({ purpose: 'batch', 'expires_after[anchor]': 'created_at', 'expires_after[seconds]': 'soon' });
    assert.deepEqual([badSeconds.status, badSeconds.error.message], [400, 'expires_after[seconds]: must be a whole number of seconds']);
  });
});

describe('batch submission rate limits', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({
      yaml: [
        'rate_limits:',
        '  user_paths: [ { path: /limited, limits: [ { period_seconds: 3600, max_requests: 3 } ] } ]',
        '  providers: [ { name: mock, limits: [ { period: concurrent, max_requests: 1 }, { period: minute, max_requests: 1 } ] } ]',
        '  models: [ { model: mock/mock-1, limits: [ { period: hour, max_requests: 1 } ] } ]',
      ].join('\n'),
    });
  });
  after(async () => gw.close());

  it('counts a submission and an upload as one request each against user-path rules; beyond the cap both are 429', async () => {
    const sdk = client(gw, '/limited');
    await submit(sdk, 'mock-1', 1); // an upload and a submission: 2 of 3
    const file = await sdk.files.create({ file: await toFile(Buffer.from(jsonl('mock-1', 1)), 'input.jsonl'), purpose: 'batch' }); // 3 of 3
    const refused = (err: APIError): boolean => {
      assert.equal(err.status, 429);
      assert.equal(err.headers?.get('retry-after') !== null, true);
      assert.match(err.message, /\/limited/);
      return true;
    };
    await assert.rejects(sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }), refused);
    await assert.rejects(sdk.files.create({ file: await toFile(Buffer.from(jsonl('mock-1', 1)), 'input.jsonl'), purpose: 'batch' }), refused);
  });

  it('is not blocked by exhausted provider or model rules', async () => {
    const sdk = client(gw, '/free');
    // One normal request exhausts both the provider's minute cap and the model's hour cap.
    await sdk.chat.completions.create({ model: 'mock-1', messages: [{ role: 'user', content: 'x' }] });
    await assert.rejects(sdk.chat.completions.create({ model: 'mock-1', messages: [{ role: 'user', content: 'x' }] }), (err: APIError) => {
      assert.equal(err.status, 429);
      assert.match(err.message, /provider mock|model mock\/mock-1/);
      return true;
    });
    const status = await fetch(`${gw.url}/admin/rate-limits`).then((r) => r.json()) as { rate_limits: Array<{ scope: string; requests_remaining?: number }> };
    assert.equal(status.rate_limits.find((r) => r.scope === 'model')?.requests_remaining, 0, 'the model rule is exhausted too');
    const b1 = await submit(sdk, 'mock-1', 1);
    const b2 = await submit(sdk, 'mock-1', 1);
    assert.notEqual(b1.id, b2.id);
  });
});

describe('batches on a provider type without batches', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({
      yaml: 'providers:\n  claude: { type: anthropic, base_url: "http://127.0.0.1:1", models: [claude-x] }\n' +
        'rate_limits:\n  user_paths: [ { path: /, limits: [ { period: minute, max_requests: 2 } ] } ]\n',
    });
  });
  after(async () => gw.close());

  it('refuses the submission with 400 unsupported_endpoint, before it is counted', async () => {
    const sdk = client(gw);
    const upload = async (): Promise<OpenAI.Files.FileObject> => sdk.files.create({ file: await toFile(Buffer.from(jsonl('claude/claude-x', 1)), 'input.jsonl'), purpose: 'batch' });
    const file = await upload(); // 1 of 2
    // Twice: a counted refusal would leave no room for the second upload below.
    for (let i = 0; i < 2; i++) {
      await assert.rejects(sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }), (err: APIError) => {
        assert.equal(err.status, 400);
        assert.deepEqual(err.error, {
          type: 'invalid_request_error',
          message: 'batches are not supported by provider claude (type anthropic)',
          param: 'input_file_id',
          code: 'unsupported_endpoint',
        });
        return true;
      });
    }
    await upload(); // 2 of 2
    await assert.rejects(upload(), (err: APIError) => err.status === 429);
  });
});

describe('batches forwarded to an openai provider', () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  before(async () => {
    up = await startFakeUpstream({ apiKey: 'up-key', models: ['gpt-x'], name: 'up' });
    gw = await startTestGateway({ yaml: `providers:\n  up:\n    type: openai\n    base_url: ${up.url}/v1\n    api_key: up-key\n    models: [gpt-x]\n` });
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  it('uploads the file, creates the batch upstream and maps ids back', async () => {
    const sdk = client(gw);
    const created = await submit(sdk, 'up/gpt-x', 2);
    assert.match(created.id, /^batch_/);
    assert.ok(!created.id.includes('up_'));
    assert.equal(up.batchApi.batches.size, 1);
    const [upstreamBatch] = [...up.batchApi.batches.values()];
    const uploaded = up.batchApi.files.get(String(upstreamBatch!.input_file_id));
    // The provider sees its own model id.
    assert.match(uploaded!.content.toString(), /"model":"gpt-x"/);
    assert.ok(!uploaded!.content.toString().includes('up/gpt-x'));
    const done = await sdk.batches.retrieve(created.id);
    assert.equal(done.status, 'completed');
    assert.equal(done.input_file_id, created.input_file_id);
    assert.ok(done.output_file_id && !done.output_file_id.startsWith('file-up-'));
    const text = await (await sdk.files.content(done.output_file_id)).text();
    assert.deepEqual(text.trim().split('\n').map((l) => JSON.parse(l).custom_id), ['req-0', 'req-1']);
    assert.equal((await sdk.batches.cancel(created.id)).status, 'completed');
  });

  it('deletes a forwarded batch\'s output file at the provider too', async () => {
    const sdk = client(gw);
    const created = await submit(sdk, 'up/gpt-x', 1);
    const done = await sdk.batches.retrieve(created.id);
    assert.ok(done.output_file_id);
    const upstreamOutput = String([...up.batchApi.batches.values()].at(-1)!.output_file_id);
    assert.ok(up.batchApi.files.has(upstreamOutput));
    assert.deepEqual(await sdk.files.delete(done.output_file_id), { id: done.output_file_id, object: 'file', deleted: true });
    assert.equal(up.batchApi.files.has(upstreamOutput), false);
    await assert.rejects(sdk.files.content(done.output_file_id), { status: 404 });
  });
});

describe('batch submission and concurrency slots', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ yaml: 'rate_limits:\n  user_paths: [ { path: /busy, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n' });
  });
  after(async () => gw.close());

  it('holds no concurrency slot: a submission passes while a realtime session holds the only one', async () => {
    const sdk = client(gw, '/busy');
    const session = new WebSocket(`${gw.url.replace('http', 'ws')}/v1/realtime?model=mock-1`, { headers: { 'x-floodgate-user-path': '/busy' } });
    await new Promise((resolve, reject) => { session.once('open', resolve); session.once('error', reject); });
    try {
      await assert.rejects(sdk.chat.completions.create({ model: 'mock-1', messages: [{ role: 'user', content: 'x' }] }), { status: 429 }, 'the slot is really taken');
      const batch = await submit(sdk, 'mock-1', 1);
      assert.equal(batch.object, 'batch');
    } finally {
      session.close();
    }
  });
});
