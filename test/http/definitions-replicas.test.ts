/**
 * Rate-limit rules and budgets across replicas without Redis: gateway processes sharing their
 * storage — a throwaway PostgreSQL database, or one SQLite file — enforce a rule created through
 * any of them, stop enforcing it once deleted through another, and list a budget created or
 * deleted through another, within 2 seconds: the storage itself tells them (its refresh of budget
 * spend is set far beyond that here, so only the storage's announcement can make it).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { startReplicas, type Replica } from '../support/replicas.ts';
import { USER_PATH_HEADER, chat } from '../support/rate-limits.ts';

const PROPAGATION_MS = 2000;
const MASTER = 'definitions-replicas-master-key';
const admin = { authorization: `Bearer ${MASTER}` };
/** Budget spend re-read (with every budget) once a minute: far beyond the bound. */
const ENV = { MASTER_KEY: MASTER, BUDGETS_REFRESH_SECONDS: '60' };

/** Polls `check` until it holds; fails past the bound counted from `since`. */
async function within(what: string, since: number, check: () => Promise<boolean>): Promise<void> {
  for (;;) {
    if (await check()) return;
    assert.ok(Date.now() - since < PROPAGATION_MS, `${what} within ${PROPAGATION_MS} ms`);
    await sleep(20);
  }
}

async function adminCall(replica: Replica, method: string, path: string, body: unknown): Promise<void> {
  const res = await replica.request(method, path, { body, headers: admin });
  assert.equal(res.status, 200, res.text);
}

async function chatStatus(replica: Replica, userPath: string): Promise<number> {
  return (await replica.request('POST', '/v1/chat/completions', { body: chat('mock/mock-1'), headers: { ...admin, [USER_PATH_HEADER]: userPath } })).status;
}

async function budgetPaths(replica: Replica): Promise<string[]> {
  const res = await replica.request('GET', '/admin/budgets', { headers: admin });
  assert.equal(res.status, 200, res.text);
  return (res.json().budgets as Array<{ user_path: string }>).map((b) => b.user_path);
}

/** A rule written through `a` is enforced by `b`, and lifted there once deleted through `a`. */
async function ruleAcross(a: Replica, b: Replica, userPath: string): Promise<void> {
  const rule = { user_path: userPath, limit_key: { period: 'minute' }, max_requests: 1 };
  const createdAt = Date.now();
  await adminCall(a, 'PUT', '/admin/rate-limits', rule);
  await within('the other replica enforces the new rule', createdAt, async () => (await chatStatus(b, userPath)) === 429);
  const deletedAt = Date.now();
  await adminCall(a, 'DELETE', '/admin/rate-limits', { user_path: userPath, limit_key: rule.limit_key });
  await within('the other replica lifts the deleted rule', deletedAt, async () => (await chatStatus(b, userPath)) === 200);
}

/** A budget written through `a` is listed by `b`, and no longer once deleted through `a`. */
async function budgetAcross(a: Replica, b: Replica, userPath: string): Promise<void> {
  const createdAt = Date.now();
  await adminCall(a, 'PUT', '/admin/budgets', { user_path: userPath, limit_key: { period: 'day' }, max_usd: 5 });
  await within('the other replica lists the new budget', createdAt, async () => (await budgetPaths(b)).includes(userPath));
  const deletedAt = Date.now();
  await adminCall(a, 'DELETE', '/admin/budgets', { user_path: userPath, limit_key: { period: 'day' } });
  await within('the other replica drops the deleted budget', deletedAt, async () => !(await budgetPaths(b)).includes(userPath));
}

function followEachOther(replicas: () => Replica[]): void {
  it('a rule created through one is enforced by the other, and lifted once deleted through it, within 2 s', async () => {
    const [a, b] = replicas() as [Replica, Replica];
    await ruleAcross(a, b, '/rules/one');
    await ruleAcross(b, a, '/rules/two');
  });

  it('a budget created through one is listed by the other, and gone once deleted through it, within 2 s', async () => {
    const [a, b] = replicas() as [Replica, Replica];
    await budgetAcross(a, b, '/budgets/one');
    await budgetAcross(b, a, '/budgets/two');
  });
}

describe('replicas sharing PostgreSQL (without Redis) follow each other\'s rules and budgets', () => {
  let database: TestDatabase;
  let replicas: Replica[] = [];

  before(async () => {
    database = await createTestDatabase();
    replicas = await startReplicas(2, '', { ...ENV, STORAGE_TYPE: 'postgres', POSTGRES_URL: database.url });
  });
  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await database?.drop();
  });

  followEachOther(() => replicas);
});

describe('replicas sharing one SQLite file follow each other\'s rules and budgets', () => {
  let dir: string;
  let replicas: Replica[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-shared-sqlite-'));
    // One after the other: the first creates the file's schema.
    replicas = await startReplicas(1, '', { ...ENV, SQLITE_PATH: join(dir, 'floodgate.db') });
    replicas.push(...(await startReplicas(1, '', { ...ENV, SQLITE_PATH: join(dir, 'floodgate.db') })));
  });
  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  followEachOther(() => replicas);
});
