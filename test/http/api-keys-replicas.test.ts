/**
 * Managed keys across replicas (CONTRACT §14): gateway processes sharing their storage — a
 * throwaway PostgreSQL database with no Redis at all, or one SQLite file — accept a key created
 * through any of them and refuse one revoked through any of them within 2 seconds, and list the
 * same keys.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { startReplica, startReplicas, type Replica } from '../support/replicas.ts';

/** The contract's bound for a key change made through one replica to hold on all. */
const PROPAGATION_MS = 2000;
const MASTER = 'replicas-master-key';
const admin = { authorization: `Bearer ${MASTER}` };

async function modelsWith(replica: Replica, key: string): Promise<number> {
  return (await replica.request('GET', '/v1/models', { headers: { authorization: `Bearer ${key}` } })).status;
}

/** Waits until `replica` answers `status` to the key; fails past the contract's bound. Returns the milliseconds it took. */
async function untilAnswers(replica: Replica, key: string, status: number, since: number): Promise<number> {
  for (;;) {
    if ((await modelsWith(replica, key)) === status) return Date.now() - since;
    assert.ok(Date.now() - since < PROPAGATION_MS, `${replica.url} did not answer ${status} to the key within ${PROPAGATION_MS} ms`);
    await sleep(20);
  }
}

/** Each key listed as `<id> <max_priority>`. */
async function listed(replica: Replica): Promise<string[]> {
  const res = await replica.request('GET', '/admin/api-keys', { headers: admin });
  assert.equal(res.status, 200, res.text);
  return (res.json().api_keys as Array<{ id: string; max_priority: string }>).map((k) => `${k.id} ${k.max_priority}`);
}

async function createKey(replica: Replica, name: string): Promise<{ id: string; key: string }> {
  const res = await replica.request('POST', '/admin/api-keys', { body: { name, user_path: `/team/${name}`, max_priority: 'low' }, headers: admin });
  assert.equal(res.status, 201, res.text);
  return res.json() as { id: string; key: string };
}

async function revokeKey(replica: Replica, id: string): Promise<void> {
  const res = await replica.request('DELETE', `/admin/api-keys/${id}`, { headers: admin });
  assert.equal(res.status, 200, res.text);
}

/** A key created on one replica and revoked on another, seen by all within the bound. */
async function createAndRevokeAcross(replicas: readonly Replica[]): Promise<void> {
  const [a, b] = replicas as [Replica, Replica];
  const startedAt = Date.now();
  const created = await createKey(a, `k${startedAt}`);
  for (const replica of replicas) await untilAnswers(replica, created.key, 200, startedAt);
  for (const replica of replicas) assert.deepEqual(await listed(replica), await listed(a));
  assert.ok((await listed(b)).includes(`${created.id} low`), 'listed with its max_priority by the other replicas');

  const revokedAt = Date.now();
  await revokeKey(b, created.id);
  for (const replica of replicas) await untilAnswers(replica, created.key, 401, revokedAt);
  for (const replica of replicas) assert.equal((await listed(replica)).some((k) => k.startsWith(`${created.id} `)), false);
}

describe('replicas sharing PostgreSQL (without Redis) follow each other\'s keys', () => {
  let database: TestDatabase;
  let replicas: Replica[] = [];

  before(async () => {
    database = await createTestDatabase();
    const env = { STORAGE_TYPE: 'postgres', POSTGRES_URL: database.url, MASTER_KEY: MASTER };
    replicas = await startReplicas(3, '', env);
  });
  after(async () => {
    await Promise.all((replicas ?? []).map((r) => r.stop()));
    await database?.drop();
  });

  it('a key created through one is accepted by all, and refused by all once revoked through another, within 2 s', async () => {
    await createAndRevokeAcross(replicas);
    await createAndRevokeAcross([replicas[2]!, replicas[0]!, replicas[1]!]);
  });

  it('a key revoked while a replica has lost its notification connection is refused by it within 2 s', async () => {
    const [a, b] = replicas as [Replica, Replica];
    const created = await createKey(a, 'survivor');
    await untilAnswers(b, created.key, 200, Date.now());
    // Cut every replica's notification connection, as a database restart or a network drop would.
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const cut = await client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'");
      assert.equal(cut.rowCount, replicas.length, 'one notification connection per replica');
    } finally {
      await client.end();
    }
    const revokedAt = Date.now();
    await revokeKey(a, created.id);
    for (const replica of replicas) await untilAnswers(replica, created.key, 401, revokedAt);
    // And they listen again: the next change travels as fast as ever.
    await createAndRevokeAcross(replicas);
  });
});

describe('replicas sharing one SQLite file follow each other\'s keys', () => {
  let dir: string;
  let replicas: Replica[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-shared-sqlite-'));
    const env = { SQLITE_PATH: join(dir, 'floodgate.db'), MASTER_KEY: MASTER };
    replicas = [await startReplica('', env)];
    replicas.push(await startReplica('', env));
  });
  after(async () => {
    await Promise.all((replicas ?? []).map((r) => r.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('a key created through one is accepted by the other, and refused by both once revoked, within 2 s', async () => {
    await createAndRevokeAcross(replicas);
  });
});
