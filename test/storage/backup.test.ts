/**
 * docs/backup.md's commands, run as written: a backup of a running gateway's storage (SQLite, and
 * PostgreSQL with the machine's pg_dump), restored where a new gateway starts, which then knows
 * the managed key, the rule, the budget and the usage of the first one.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { eventually } from '../routing/http-helpers.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOC = readFileSync(join(ROOT, 'docs/backup.md'), 'utf8');
const MASTER_KEY = 'sk-master-backup';
const master = { authorization: `Bearer ${MASTER_KEY}` };

/** The shell block under the heading `### <title>` of docs/backup.md. */
function commands(title: string): string {
  const section = DOC.split(`### ${title}\n`)[1];
  const block = section === undefined ? undefined : /```sh\n([\s\S]*?)```/.exec(section.split('\n### ')[0]!);
  assert.ok(block, `docs/backup.md has a sh block under "### ${title}"`);
  return block[1]!;
}

/** Runs a documented block with `sh -e` in the repository (where the gateway's node_modules are). */
function runDocumented(title: string, env: Record<string, string>): void {
  const result = spawnSync('sh', ['-e', '-c', commands(title)], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, HOME: process.env.HOME ?? '/tmp', ...env },
  });
  assert.equal(result.status, 0, `${title}:\n${result.stdout}\n${result.stderr}`);
}

/** What the first gateway leaves in storage: a bound managed key, a manual rule, a budget and one request's usage. */
async function writeState(gw: TestGateway): Promise<string> {
  const key = await gw.request('POST', '/admin/api-keys', { body: { name: 'kept', user_path: '/team/kept' }, headers: master });
  assert.equal(key.status, 201, key.text);
  assert.equal((await gw.request('PUT', '/admin/rate-limits', { body: { user_path: '/team', limit_key: { period: 'hour' }, max_requests: 77 }, headers: master })).status, 200);
  assert.equal((await gw.request('PUT', '/admin/budgets', { body: { user_path: '/team', limit_key: { period: 'month' }, max_usd: 42 }, headers: master })).status, 200);
  const chat = await gw.request('POST', '/v1/chat/completions', { body: { model: 'mock-1', messages: [{ role: 'user', content: 'remember me' }] }, headers: { authorization: `Bearer ${key.json().key}` } });
  assert.equal(chat.status, 200, chat.text);
  return key.json().key as string;
}

/** The requests `/admin/usage` (read from storage) counts for /team/kept today. */
async function storedRequests(gw: TestGateway): Promise<number> {
  const today = new Date().toISOString().slice(0, 10);
  const usage = (await gw.request('GET', `/admin/usage?from=${today}&to=${today}&group_by=user_path&bucket=day`, { headers: master })).json().buckets as Array<{ key: string; requests: number }>;
  return usage.find((b) => b.key === '/team/kept')?.requests ?? 0;
}

/** A gateway on restored storage sees everything `writeState` left. */
async function assertRestored(gw: TestGateway, secret: string): Promise<void> {
  assert.equal(await storedRequests(gw), 1, 'the usage record');
  const chat = await gw.request('POST', '/v1/chat/completions', { body: { model: 'mock-1', messages: [{ role: 'user', content: 'still here?' }] }, headers: { authorization: `Bearer ${secret}` } });
  assert.equal(chat.status, 200, `the managed key works: ${chat.text}`);
  const rules = (await gw.request('GET', '/admin/rate-limits', { headers: master })).json().rate_limits as Array<{ subject: string; max_requests: number }>;
  assert.deepEqual(rules.map((r) => [r.subject, r.max_requests]), [['/team', 77]]);
  const budgets = (await gw.request('GET', '/admin/budgets', { headers: master })).json().budgets as Array<{ user_path: string; max_usd: number }>;
  assert.deepEqual(budgets.map((b) => [b.user_path, b.max_usd]), [['/team', 42]]);
}

/** Writes the state, and waits until its usage record is in storage (records are written in batches). */
async function writeStored(gw: TestGateway): Promise<string> {
  const secret = await writeState(gw);
  await eventually(async () => (await storedRequests(gw)) === 1, 5000, 'the usage record in storage');
  return secret;
}

describe('docs/backup.md', () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-backup-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('SQLite: an online backup (sqlite3, and the gateway\'s own SQLite) restores into a gateway that knows everything', async () => {
    const sqlitePath = join(dir, 'floodgate.db');
    const first = await startTestGateway({ env: { MASTER_KEY, SQLITE_PATH: sqlitePath } });
    let secret: string;
    try {
      secret = await writeStored(first);
      // Backups taken while the gateway runs on the file.
      runDocumented('SQLite: back up', { SQLITE_PATH: sqlitePath, BACKUP: join(dir, 'cli.db') });
      runDocumented('SQLite: back up without the sqlite3 command', { SQLITE_PATH: sqlitePath, BACKUP: join(dir, 'node.db') });
    } finally {
      await first.close();
    }

    for (const backup of ['cli.db', 'node.db']) {
      const target = mkdtempSync(join(dir, 'restored-'));
      const restoredPath = join(target, 'floodgate.db');
      runDocumented('SQLite: restore', { SQLITE_PATH: restoredPath, BACKUP: join(dir, backup) });
      const restored = await startTestGateway({ env: { MASTER_KEY, SQLITE_PATH: restoredPath } });
      try {
        await assertRestored(restored, secret);
      } finally {
        await restored.close();
      }
    }
  });

  describe('PostgreSQL', () => {
    const databases: TestDatabase[] = [];
    after(async () => {
      for (const db of databases) await db.drop();
    });

    it('a pg_dump of a running gateway\'s database restores into an empty one that a new gateway starts on', async () => {
      const source = await createTestDatabase();
      databases.push(source);
      const first = await startTestGateway({ env: { MASTER_KEY, STORAGE_TYPE: 'postgres', POSTGRES_URL: source.url } });
      let secret: string;
      const backup = join(dir, 'floodgate.dump');
      try {
        secret = await writeStored(first);
        runDocumented('PostgreSQL: back up', { POSTGRES_URL: source.url, BACKUP: backup });
      } finally {
        await first.close();
      }

      const target = await createTestDatabase();
      databases.push(target);
      runDocumented('PostgreSQL: restore', { POSTGRES_URL: target.url, BACKUP: backup });
      const restored = await startTestGateway({ env: { MASTER_KEY, STORAGE_TYPE: 'postgres', POSTGRES_URL: target.url } });
      try {
        await assertRestored(restored, secret);
      } finally {
        await restored.close();
      }
    });
  });
});
