/**
 * Managed API keys. Storage holds only SHA-256 hashes; the in-memory KeyRing answers lookups
 * on the request path without touching storage.
 */

import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Priority } from '../ratelimit/types.ts';
import { Serial } from '../shared/serial.ts';
import type { ApiKeyRecord } from '../storage/keys/types.ts';
import type { Storage } from '../storage/types.ts';

/** Prefix that makes a Floodgate key recognisable (and greppable in leaked-secret scanners). */
const SECRET_PREFIX = 'fg-';

/** A new secret: `fg-` + 32 random bytes, base64url (256 bits of entropy). */
function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64url');
}

/**
 * Hex SHA-256 of a secret. A plain fast hash is enough here (unlike passwords): the secrets are
 * 256-bit random values, so there is no dictionary to brute-force from a leaked hash.
 */
function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export interface CreateKeyInput {
  name: string;
  /** Normalised user path to bind the key to, or null for an unbound key. */
  userPath: string | null;
  /** The highest priority the key's requests are served at; default normal. */
  maxPriority?: Priority;
}

export interface CreatedKey {
  record: ApiKeyRecord;
  /** The only time the secret exists outside the client. */
  secret: string;
}

/** Where keys are stored, and how the other replicas' changes to them are heard of. */
type KeyStorage = Pick<Storage, 'keys' | 'watch'>;

/**
 * Every key in memory, by the hash of its secret: a lookup on the request path is one Map read.
 *
 * Replicas sharing the storage follow each other's keys (see follow()): a change announced by the
 * storage reloads every key, and so does a timer, in case an announcement was lost. Creations,
 * revocations and reloads run one at a time, so a reload that read storage before a change can
 * never undo it here.
 */
export class KeyRing {
  private readonly storage: KeyStorage;
  private byHash = new Map<string, ApiKeyRecord>();
  private readonly serial = new Serial();

  constructor(storage: KeyStorage, records: readonly ApiKeyRecord[] = []) {
    this.storage = storage;
    for (const record of records) this.byHash.set(record.keyHash, record);
  }

  /** Loads every stored key into memory; call once at start-up. */
  static async load(storage: KeyStorage): Promise<KeyRing> {
    return new KeyRing(storage, await storage.keys.list());
  }

  /** Creates a key: storage first, so a key is never usable unless it will survive a restart. */
  create(input: CreateKeyInput): Promise<CreatedKey> {
    return this.serial.run(async () => {
      const secret = generateSecret();
      const record: ApiKeyRecord = {
        id: randomUUID(),
        name: input.name,
        userPath: input.userPath,
        keyHash: hashSecret(secret),
        maxPriority: input.maxPriority ?? 'normal',
        createdAt: new Date(),
      };
      await this.storage.keys.insert(record);
      this.byHash.set(record.keyHash, record);
      return { record, secret };
    });
  }

  /**
   * Follows the keys the other replicas sharing this storage create and revoke: a reload each time
   * the storage announces a change, and one every `intervalMs` in case an announcement was lost.
   * Resolves once watching, with a function that stops following.
   */
  async follow(options: { intervalMs: number; onError: (err: unknown) => void }): Promise<() => Promise<void>> {
    const reload = async (): Promise<void> => {
      // Swapped whole: a lookup meanwhile sees the old keys or the new ones, never half of them.
      const records = await this.storage.keys.list();
      this.byHash = new Map(records.map((record) => [record.keyHash, record]));
    };
    let changed = (): void => {};
    const stop = this.serial.follow(reload, (listener) => void (changed = listener), options);
    const unwatch = await this.storage.watch('keys', () => changed());
    return async () => {
      stop();
      await unwatch();
    };
  }

  /** All keys, oldest first. Records carry hashes, never secrets. */
  list(): ApiKeyRecord[] {
    return [...this.byHash.values()].sort(
      (a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    );
  }

  get size(): number {
    return this.byHash.size;
  }

  /**
   * Revokes a key; false when no such key exists. Memory is updated after storage succeeds, so a
   * failed delete leaves the key working rather than half-revoked until the next restart.
   */
  revoke(id: string): Promise<boolean> {
    return this.serial.run(async () => {
      const deleted = await this.storage.keys.delete(id);
      let known = false;
      for (const [hash, record] of this.byHash) {
        if (record.id === id) {
          this.byHash.delete(hash);
          known = true;
        }
      }
      return deleted || known;
    });
  }

  /**
   * The key record for a presented secret, or undefined. No storage access.
   *
   * Why a Map lookup is timing-safe here: the secret is hashed before any comparison, so what
   * the Map compares is SHA-256(presented) against stored hashes. Timing can at best reveal how
   * much of an attacker's *own* digest matches a stored digest, and because SHA-256 is preimage
   * resistant that gives no way to steer the next guess towards a real secret; the secret itself
   * never takes part in a variable-time comparison.
   */
  lookup(secret: string): ApiKeyRecord | undefined {
    return this.byHash.get(hashSecret(secret));
  }

}
