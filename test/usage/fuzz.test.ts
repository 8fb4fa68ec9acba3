/**
 * A seeded fuzz of the fields a usage record stores (model names with NUL, lone surrogates,
 * emoji and long text; token counts that are fractional, negative, huge, beyond a double, or not
 * numbers at all) through every path that writes a record: buffered, streamed and cut-short
 * chat, cache hits, passthrough (JSON, text/plain, none), batch lines and realtime responses,
 * against a real `floodgate` process on PostgreSQL and on SQLite. Every request's record is
 * written, none is set aside, and records made after the fuzz are written too.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { listeningUrl, runCli, withTimeout, type Run } from '../support/cli.ts';
import { openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startFixedUsageUpstream, type FixedUsageUpstream } from '../support/fixed-usage-upstream.ts';
import { request } from '../support/gateway.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { Scrape } from '../support/prometheus.ts';
import { eventually } from '../support/rate-limits.ts';
import { prng } from '../support/random.ts';

const MASTER = 'usage-fuzz-master';
const SEED = 0x0005_a9e5;
const ROUNDS = 80;
const as = (userPath: string): Record<string, string> => ({ authorization: `Bearer ${MASTER}`, 'x-floodgate-user-path': userPath });

/** Token counts as JSON text: what an upstream may report. */
const COUNTS = ['0', '3', '10.5', '0.1', '-7', '1e300', '1e400', '-1e400', '9007199254740993', '1.7976931348623157e308', '"12"', 'null', 'true', '{}', '[]'];
/** Model names as JSON string literals (escapes included, so NUL and lone surrogates arrive as such). */
const NAMES = ['"a\\u0000b"', '"\\ud800"', '"x\\udfffy"', '"\\u0000"', '"😀"', '"é\\u0000é"', `"${'m'.repeat(3000)}"`, '"gpt-x"', '""', '"\\ud83d\\ude00\\ud83d"'];
/** Message texts, as JSON string literals. */
const TEXTS = ['"hi"', '"a\\u0000b"', '"\\udc00 lone"', '"<|endoftext|>"', '"😀 word word"', `"${'word '.repeat(200)}"`];

type Pick = <T>(values: readonly T[]) => T;

function usageJson(pick: Pick): string {
  return `{"prompt_tokens":${pick(COUNTS)},"completion_tokens":${pick(COUNTS)},"total_tokens":${pick(COUNTS)},"prompt_tokens_details":{"cached_tokens":${pick(COUNTS)}}}`;
}

for (const kind of ['postgres', 'sqlite'] as const) {
  describe(`usage fuzz on ${kind}: every record is written`, { timeout: 120_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), `floodgate-usage-fuzz-${kind}-`));
    let db: TestDatabase | undefined;
    let fixed: FixedUsageUpstream;
    let rt: FakeUpstream;
    let run: Run | undefined;
    let url: string;

    before(async () => {
      if (kind === 'postgres') db = await createTestDatabase();
      fixed = await startFixedUsageUpstream();
      rt = await startFakeUpstream({ name: 'rt', models: ['gpt-rt'], chunkDelayMs: 5 });
      const storage = kind === 'postgres' ? `{ type: postgres, postgres: { url: "${db!.url}" } }` : `{ type: sqlite, sqlite: { path: ${join(dir, 'floodgate.db')} } }`;
      const config = join(dir, 'floodgate.yaml');
      writeFileSync(
        config,
        `storage: ${storage}\ncache: { response: { enabled: true } }\nproviders:\n${openaiProvider('up', fixed.url, ['gpt-x'])}${openaiProvider('rt', rt.url, ['gpt-rt'])}  mock: { type: mock }\n` +
          'pricing:\n  up/gpt-x: { input_per_mtok: 100000, output_per_mtok: 100000 }\n  rt/gpt-rt: { input_per_mtok: 1, output_per_mtok: 1 }\n',
      );
      run = runCli(['--config', config, '--port', '0'], dir, { MASTER_KEY: MASTER });
      url = await listeningUrl(run);
    });
    after(async () => {
      if (run !== undefined && run.child.exitCode === null) {
        run.child.kill('SIGTERM');
        await withTimeout(run.exit, 15_000, 'the gateway to exit');
      }
      await fixed?.close();
      await rt?.close();
      await db?.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    /** One request through one path; resolves with the number of usage records it makes. */
    type Path = (pick: Pick, userPath: string) => Promise<number>;
    const post = (path: string, body: string, userPath: string, contentType = 'application/json') =>
      request(url, 'POST', path, { body, headers: { ...as(userPath), 'content-type': contentType } });
    const ok = (res: { status: number; text: string }, what: string): number => {
      assert.equal(res.status, 200, `${what}: ${res.text.slice(0, 300)}`);
      return 1;
    };
    const chatBody = (pick: Pick, extra = ''): string => `{"model":"up/gpt-x","messages":[{"role":"user","content":${pick(TEXTS)}}]${extra}}`;

    let cacheKeys = 0;
    const paths: Record<string, Path> = {
      chat: async (pick, userPath) => {
        fixed.setUsage(usageJson(pick));
        return ok(await post('/v1/chat/completions', chatBody(pick), userPath, 'application/json'), 'chat');
      },
      stream: async (pick, userPath) => {
        fixed.setUsage(usageJson(pick));
        const res = await post('/v1/chat/completions', chatBody(pick, ',"stream":true'), userPath);
        assert.match(res.text, /\[DONE\]/);
        return ok(res, 'stream');
      },
      cacheHit: async (pick, userPath) => {
        fixed.setUsage(usageJson(pick));
        const body = chatBody(pick, `,"user":"cache-${++cacheKeys}"`);
        ok(await post('/v1/chat/completions', body, userPath), 'cache miss');
        const hit = await post('/v1/chat/completions', body, userPath);
        assert.equal(hit.headers.get('x-floodgate-cache'), 'hit');
        return 1 + ok(hit, 'cache hit');
      },
      passthrough: async (pick, userPath) => {
        fixed.setUsage(usageJson(pick));
        return ok(await post('/p/up/chat/completions', `{"model":${pick(NAMES)},"messages":[{"role":"user","content":${pick(TEXTS)}}]}`, userPath, pick(['application/json', 'text/plain'])), 'passthrough');
      },
      passthroughAnswerModel: async (pick, userPath) => {
        fixed.setUsage(usageJson(pick));
        fixed.answerModel = JSON.parse(pick(NAMES)) as string;
        return ok(await request(url, 'GET', '/p/up/anything', { headers: as(userPath) }), 'passthrough without a body');
      },
      passthroughStream: async (pick, userPath) => {
        fixed.setUsage(usageJson(pick));
        return ok(await post('/p/up/chat/completions', `{"model":${pick(NAMES)},"stream":true,"messages":[]}`, userPath), 'passthrough stream');
      },
      cutStream: async (pick, userPath) => {
        const controller = new AbortController();
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { ...as(userPath), 'content-type': 'application/json' },
          body: `{"model":"rt/gpt-rt","stream":true,"messages":[{"role":"user","content":${pick(TEXTS.slice(-1))}}]}`,
          signal: controller.signal,
        });
        assert.equal(res.status, 200);
        const reader = res.body!.getReader();
        await reader.read();
        controller.abort();
        await reader.cancel().catch(() => {});
        return 1;
      },
      batch: async (pick, userPath) => {
        const lines = [0, 1].map((i) => `{"custom_id":"c${i}","method":"POST","url":"/v1/chat/completions","body":{"model":"mock-1","messages":[{"role":"user","content":${pick(TEXTS)}}]}}`);
        const form = new FormData();
        form.append('purpose', 'batch');
        form.append('file', new Blob([lines.join('\n')]), 'in.jsonl');
        const file = (await (await fetch(`${url}/v1/files`, { method: 'POST', body: form, headers: as(userPath) })).json()) as { id: string };
        const created = await request(url, 'POST', '/v1/batches', { body: { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, headers: as(userPath) });
        ok(created, 'batch');
        await eventually(async () => (await request(url, 'GET', `/v1/batches/${created.json().id}`, { headers: as(userPath) })).json().status === 'completed', 10_000, 'the batch');
        return lines.length;
      },
      realtime: async (pick, userPath) => {
        rt.realtime.usage = JSON.parse(`{"input_tokens":${pick(COUNTS)},"output_tokens":${pick(COUNTS)},"total_tokens":${pick(COUNTS)}}`.replace(/1e400/g, '1e308')) as FakeUpstream['realtime']['usage'];
        const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/realtime?model=rt/gpt-rt`, ['realtime'], { headers: as(userPath) });
        const done = new Promise<void>((resolve, reject) => {
          ws.on('message', (d) => {
            if ((JSON.parse(d.toString()) as { type: string }).type === 'response.done') resolve();
          });
          ws.once('error', reject);
        });
        await new Promise<void>((resolve, reject) => {
          ws.once('open', () => resolve());
          ws.once('error', reject);
        });
        ws.send(JSON.stringify({ type: 'response.create' }));
        await done;
        ws.close();
        // A response.done without any count reports no usage, and makes no record.
        const u = rt.realtime.usage as Record<string, unknown>;
        return ['input_tokens', 'output_tokens', 'total_tokens'].some((k) => typeof u[k] === 'number') ? 1 : 0;
      },
    };

    const recorded = async (userPath: string): Promise<number> => (await request(url, 'GET', '/v1/usage', { headers: as(userPath) })).json().totals.requests;

    it(`${ROUNDS} seeded rounds over every path, then one clean request per path`, async () => {
      const random = prng(SEED);
      const pick: Pick = (values) => values[Math.floor(random() * values.length)]!;
      const names = Object.keys(paths);
      let expected = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const name = names[round % names.length]!;
        expected += await paths[name]!(pick, '/fuzz');
      }
      await eventually(async () => (await recorded('/fuzz')) === expected, 10_000, `${expected} fuzzed records (seed ${SEED})`);

      // Records made after the fuzz are written too.
      // Plain values: 3 tokens, the model gpt-x, the first of any other list.
      const plain = (values: readonly unknown[]): number => (values === COUNTS ? COUNTS.indexOf('3') : Math.max(0, values.indexOf('"gpt-x"')));
      const clean: Pick = (values) => values[plain(values)]!;
      let later = 0;
      for (const name of names) later += await paths[name]!(clean, '/after');
      await eventually(async () => (await recorded('/after')) === later, 10_000, `${later} records after the fuzz`);
      const metrics = new Scrape((await request(url, 'GET', '/metrics', { headers: as('/') })).text);
      assert.equal(metrics.value('floodgate_usage_records_failed_total', {}), 0);
    });
  });
}
