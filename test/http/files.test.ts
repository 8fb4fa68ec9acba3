/**
 * End-to-end: the bounds on stored files, through the official SDK. Each user path may keep
 * `files.max_files_per_user_path` live files of `files.max_bytes_per_user_path` bytes in all (403
 * `file_quota_exceeded` beyond); files expire after `files.ttl_seconds` (or sooner, with
 * `expires_after`) and then answer 404 everywhere, a batch on them included; and
 * `DELETE /v1/files/{id}` removes a file of the caller's subtree.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import OpenAI, { APIError, toFile } from 'openai';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const T0 = Date.parse('2026-03-01T12:00:00Z');
const TTL = 3600;

const line = (i: number): string => JSON.stringify({ custom_id: `r${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] } }) + '\n';

describe('file quotas, expiry and deletion', () => {
  let gw: TestGateway;
  let now = T0;
  before(async () => {
    gw = await startTestGateway({
      yaml: `files: { ttl_seconds: ${TTL}, max_bytes_per_user_path: 1kb, max_files_per_user_path: 3 }\n`,
      now: () => now,
    });
  });
  after(async () => gw.close());
  beforeEach(() => {
    // Every test starts well after the last one's files expired.
    now += 10 * TTL * 1000;
  });

  const sdk = (userPath: string): OpenAI =>
    new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-floodgate-user-path': userPath } });
  const upload = async (userPath: string, content: string, expiresAfter?: number): Promise<OpenAI.Files.FileObject> =>
    sdk(userPath).files.create({
      file: await toFile(Buffer.from(content), 'input.jsonl'),
      purpose: 'batch',
      ...(expiresAfter === undefined ? {} : { expires_after: { anchor: 'created_at', seconds: expiresAfter } }),
    } as OpenAI.Files.FileCreateParams);
  const refusal = (status: number, code: string | null, message: RegExp) => (err: APIError): boolean => {
    assert.equal(err.status, status, err.message);
    assert.equal(err.code, code);
    assert.match(err.message, message);
    return true;
  };

  it('answers when a file expires: files.ttl_seconds after its upload, or sooner with expires_after', async () => {
    const created = Math.floor(now / 1000);
    const file = await upload('/exp', line(0));
    assert.equal(file.created_at, created);
    assert.equal(file.expires_at, created + TTL);
    const short = await upload('/exp', line(1), 60);
    assert.equal(short.expires_at, created + 60);
    assert.equal((await sdk('/exp').files.retrieve(short.id)).expires_at, created + 60);
    await assert.rejects(upload('/exp', line(2), TTL + 1), refusal(400, null, new RegExp(`expires_after\\[seconds\\]: must be an integer from 1 to ${TTL} \\(files.ttl_seconds\\)`)));
  });

  it('answers 404 for an expired file everywhere, a batch on it included', async () => {
    const file = await upload('/exp', line(0), 60);
    now += 61_000;
    const expired = refusal(404, 'file_not_found', new RegExp(`file "${file.id}" has expired`));
    await assert.rejects(sdk('/exp').files.retrieve(file.id), expired);
    // Removed at the first read: now it is simply not found.
    await assert.rejects(sdk('/exp').files.content(file.id), refusal(404, 'file_not_found', /not found/));
    await assert.rejects(
      sdk('/exp').batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
      (err: APIError) => {
        refusal(404, 'file_not_found', new RegExp(`input_file_id: file "${file.id}" not found`))(err);
        assert.equal(err.param, 'input_file_id');
        return true;
      },
    );
  });

  it('refuses an upload beyond the bytes or files a user path may keep, with a 403 naming the limit', async () => {
    await upload('/quota', 'x'.repeat(600));
    await assert.rejects(
      upload('/quota', 'x'.repeat(500)),
      refusal(403, 'file_quota_exceeded', /user path \/quota .* 600 bytes .* upload of 500 bytes would pass files\.max_bytes_per_user_path \(1024\)/),
    );
    await upload('/QUOTA', 'x'.repeat(424)); // the same path in another case: exactly full
    await assert.rejects(upload('/quota', 'x'), refusal(403, 'file_quota_exceeded', /max_bytes_per_user_path/));
    // Other paths, a child included, have quotas of their own.
    await upload('/quota/child', 'x'.repeat(1000));
    await upload('/other', 'x'.repeat(1000));

    await upload('/count', 'a');
    await upload('/count', 'b');
    await upload('/count', 'c');
    await assert.rejects(upload('/count', 'd'), refusal(403, 'file_quota_exceeded', /holds 3 files, the most a user path may keep \(files\.max_files_per_user_path 3\)/));
  });

  it('frees the quota as files expire', async () => {
    await upload('/free', 'x'.repeat(1000), 60);
    await assert.rejects(upload('/free', 'x'.repeat(100)), refusal(403, 'file_quota_exceeded', /max_bytes_per_user_path/));
    now += 60_000;
    await upload('/free', 'x'.repeat(100));
  });

  it('counts batch output toward the quota, and writes it regardless', async () => {
    const client = sdk('/out');
    const input = await upload('/out', line(0) + line(1));
    await upload('/out', line(2));
    const batch = await client.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    let done = batch;
    for (let i = 0; i < 200 && done.status !== 'completed'; i++) {
      await new Promise((r) => setTimeout(r, 10));
      done = await client.batches.retrieve(batch.id);
    }
    assert.equal(done.status, 'completed');
    assert.ok(done.output_file_id);
    const output = await client.files.retrieve(done.output_file_id);
    assert.equal(output.expires_at, output.created_at + TTL);
    await assert.rejects(upload('/out', 'x'), refusal(403, 'file_quota_exceeded', /holds 3 files/));
  });

  it('deletes a file of the caller\'s subtree (OpenAI\'s answer), which then answers 404 and no longer counts', async () => {
    const mine = await upload('/del/a', 'x'.repeat(1000));
    await assert.rejects(upload('/del/a', 'x'.repeat(100)), refusal(403, 'file_quota_exceeded', /max_bytes_per_user_path/));
    // A sibling cannot see it, so cannot delete it.
    await assert.rejects(sdk('/del/b').files.delete(mine.id), refusal(404, 'file_not_found', /not found/));
    assert.deepEqual(await sdk('/del/a').files.delete(mine.id), { id: mine.id, object: 'file', deleted: true });
    await assert.rejects(sdk('/del/a').files.retrieve(mine.id), refusal(404, 'file_not_found', /not found/));
    await assert.rejects(sdk('/del/a').files.delete(mine.id), refusal(404, 'file_not_found', /not found/));
    await upload('/del/a', 'x'.repeat(100));
    // A parent path may delete what its children stored, as it may read it.
    const childs = await upload('/del/a', 'y');
    assert.equal((await sdk('/del').files.delete(childs.id)).deleted, true);
  });

  it('fails a batch on a deleted input file clearly', async () => {
    const file = await upload('/gone', line(0));
    await sdk('/gone').files.delete(file.id);
    await assert.rejects(
      sdk('/gone').batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
      refusal(404, 'file_not_found', new RegExp(`input_file_id: file "${file.id}" not found`)),
    );
  });
});
