import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { KeyRing } from '../../src/auth/keys.ts';
import { MemoryStorage, MemoryStore } from '../../src/storage/memory.ts';
import { SqliteStorage } from '../../src/storage/sqlite.ts';
import type { ApiKeyRecord } from '../../src/storage/keys/types.ts';

async function memoryStorage(): Promise<SqliteStorage> {
  const storage = new SqliteStorage({ path: ':memory:' });
  await storage.migrate();
  return storage;
}

const hashSecret = (secret: string): string => createHash('sha256').update(secret).digest('hex');

describe('key secrets', () => {
  it('are fg- + 32 random bytes in base64url, stored as their hex SHA-256', async () => {
    const storage = await memoryStorage();
    const ring = await KeyRing.load(storage);
    const one = await ring.create({ name: 'one', userPath: '/' });
    const two = await ring.create({ name: 'two', userPath: '/' });
    assert.match(one.secret, /^fg-[A-Za-z0-9_-]{43}$/);
    assert.equal(Buffer.from(one.secret.slice(3), 'base64url').length, 32);
    assert.notEqual(two.secret, one.secret);
    assert.equal(one.record.keyHash, hashSecret(one.secret));
    await storage.close();
  });
});

describe('KeyRing', () => {
  it('creates keys, stores only the hash, and looks them up', async () => {
    const storage = await memoryStorage();
    const ring = await KeyRing.load(storage);
    const { record, secret } = await ring.create({ name: 'ci', userPath: '/team/ci' });
    assert.equal(record.name, 'ci');
    assert.equal(record.userPath, '/team/ci');
    assert.equal(record.keyHash, hashSecret(secret));
    assert.ok(record.createdAt instanceof Date);

    const stored = await storage.keys.list();
    assert.equal(stored.length, 1);
    assert.equal(stored[0]?.keyHash, hashSecret(secret));
    assert.ok(!JSON.stringify(stored).includes(secret));

    assert.deepEqual(ring.lookup(secret), record);
    assert.equal(ring.lookup(`${secret}x`), undefined);
    assert.equal(ring.lookup(''), undefined);
    await storage.close();
  });

  it('loads existing keys at start-up', async () => {
    const storage = await memoryStorage();
    const first = await KeyRing.load(storage);
    const a = await first.create({ name: 'a', userPath: null });
    const b = await first.create({ name: 'b', userPath: '/b' });

    const second = await KeyRing.load(storage);
    assert.equal(second.size, 2);
    assert.deepEqual(second.lookup(a.secret)?.id, a.record.id);
    assert.deepEqual(second.lookup(b.secret)?.userPath, '/b');
    assert.deepEqual(
      second.list().map((k) => k.name).sort(), // same-millisecond keys tie on createdAt
      ['a', 'b'],
    );
    await storage.close();
  });

  it('lookup does not touch storage', async () => {
    const storage = await memoryStorage();
    const ring = await KeyRing.load(storage);
    const { secret, record } = await ring.create({ name: 'x', userPath: null });
    await storage.close(); // any storage call would now throw
    assert.equal(ring.lookup(secret)?.id, record.id);
  });

  it('revokes keys', async () => {
    const storage = await memoryStorage();
    const ring = await KeyRing.load(storage);
    const { secret, record } = await ring.create({ name: 'x', userPath: null });
    const other = await ring.create({ name: 'y', userPath: null });
    assert.equal(await ring.revoke(record.id), true);
    assert.equal(ring.lookup(secret), undefined);
    assert.equal(await ring.revoke(record.id), false);
    assert.equal(await ring.revoke('no-such-id'), false);
    assert.deepEqual(ring.list().map((k) => k.id), [other.record.id]);
    assert.deepEqual((await storage.keys.list()).map((k) => k.id), [other.record.id]);
    await storage.close();
  });

  it('does not add a key to memory when storage fails', async () => {
    const failing = {
      keys: {
        insert: async (): Promise<void> => {
          throw new Error('disk full');
        },
        list: async (): Promise<ApiKeyRecord[]> => [],
        delete: async (): Promise<boolean> => false,
      },
      watch: async () => async () => {},
    };
    const ring = await KeyRing.load(failing);
    await assert.rejects(ring.create({ name: 'x', userPath: null }), /disk full/);
    assert.equal(ring.size, 0);
  });

  it('keeps a key working when revoking it fails in storage', async () => {
    const storage = await memoryStorage();
    const ring = await KeyRing.load(storage);
    const { secret, record } = await ring.create({ name: 'x', userPath: null });
    await storage.close();
    await assert.rejects(ring.revoke(record.id));
    assert.equal(ring.lookup(secret)?.id, record.id);
  });
});

describe('KeyRings sharing a storage', () => {
  /** Polls until `check` holds (the rings follow each other asynchronously). */
  async function until(check: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 2000;
    while (!check()) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  it('follow each other: a key created through one is accepted by the other, a revoked one refused by both', async () => {
    const store = new MemoryStore();
    const [a, b] = await Promise.all([KeyRing.load(new MemoryStorage(store)), KeyRing.load(new MemoryStorage(store))]);
    const errors: unknown[] = [];
    // A periodic reload far off: only the storage's announcements can make this pass.
    const stops = await Promise.all([a, b].map((ring) => ring.follow({ intervalMs: 3_600_000, onError: (err) => errors.push(err) })));
    try {
      const { secret, record } = await a.create({ name: 'shared', userPath: '/team' });
      await until(() => b.lookup(secret)?.id === record.id, 'the other ring to accept the new key');
      assert.deepEqual(b.list(), a.list());

      assert.equal(await b.revoke(record.id), true);
      assert.equal(b.lookup(secret), undefined, 'refused at once where it was revoked');
      await until(() => a.lookup(secret) === undefined, 'the other ring to refuse the revoked key');
      assert.deepEqual(a.list(), []);
      assert.deepEqual(errors, []);
    } finally {
      await Promise.all(stops.map((stop) => stop()));
    }
  });

  it('a reload racing a creation or a revocation never undoes it', async () => {
    const store = new MemoryStore();
    const own = new MemoryStorage(store);
    const foreign = new MemoryStorage(store);
    let announce = (): void => {};
    // Reads take a while, as over a network; and, as with SQLite, only other connections' writes are announced.
    const slow: Parameters<typeof KeyRing.load>[0] = {
      keys: {
        insert: (key) => own.keys.insert(key),
        delete: (id) => own.keys.delete(id),
        list: async () => {
          const rows = await own.keys.list();
          await new Promise((resolve) => setTimeout(resolve, 20));
          return rows;
        },
      },
      watch: async (_aggregate, listener) => {
        announce = listener;
        return async () => {};
      },
    };
    const ring = await KeyRing.load(slow);
    const stop = await ring.follow({ intervalMs: 3_600_000, onError: (err) => assert.fail(String(err)) });
    const settle = () => new Promise((resolve) => setTimeout(resolve, 60));
    try {
      // Another replica writes; the reload its announcement starts reads storage before this ring's creation.
      await foreign.keys.insert({ id: 'foreign-1', name: 'f', userPath: null, keyHash: 'hash-1', maxPriority: 'normal', createdAt: new Date() });
      announce();
      const created = await ring.create({ name: 'mine', userPath: null });
      await settle();
      assert.equal(ring.lookup(created.secret)?.id, created.record.id, 'the created key was dropped by a reload that read storage before it');
      assert.deepEqual(ring.list().map((k) => k.id).sort(), ['foreign-1', created.record.id].sort());

      await foreign.keys.insert({ id: 'foreign-2', name: 'f', userPath: null, keyHash: 'hash-2', maxPriority: 'normal', createdAt: new Date() });
      announce();
      await ring.revoke(created.record.id);
      await settle();
      assert.equal(ring.lookup(created.secret), undefined, 'the revoked key was brought back by a reload that read storage before the revocation');
    } finally {
      await stop();
    }
  });
});
