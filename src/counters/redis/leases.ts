/**
 * The concurrency leases this gateway holds in Redis. Every admission that takes slots gets one
 * lease id, written into the sorted set of each of its concurrency rules with an expiry. While
 * the request runs, the gateway renews all the leases it holds in one batched call per interval;
 * a gateway that dies stops renewing, and its slots free themselves when their leases expire.
 */
import { randomBytes } from 'node:crypto';

/** The slots one admission holds: its lease id and the concurrency keys it is still in. */
export class RedisLease {
  readonly id: string;
  readonly keys: Set<string>;

  constructor(id: string, keys: readonly string[]) {
    this.id = id;
    this.keys = new Set(keys);
  }
}

export class LeaseBook {
  /** Unique to this process, so lease ids never collide between gateways. */
  readonly #owner = randomBytes(6).toString('base64url');
  #sequence = 0;
  readonly #held = new Set<RedisLease>();

  /** A new lease id. */
  nextId(): string {
    return `${this.#owner}:${(this.#sequence++).toString(36)}`;
  }

  hold(id: string, keys: readonly string[]): RedisLease {
    const lease = new RedisLease(id, keys);
    this.#held.add(lease);
    return lease;
  }

  /** Stops holding `lease` on these keys; returns the keys it still held there (empty when released already). */
  giveBack(lease: RedisLease, keys: readonly string[]): string[] {
    const released: string[] = [];
    for (const key of keys) if (lease.keys.delete(key)) released.push(key);
    if (lease.keys.size === 0) this.#held.delete(lease);
    return released;
  }

  /** Every (key, lease id) pair held, for one renewal call. */
  pairs(): { keys: string[]; ids: string[] } {
    const keys: string[] = [];
    const ids: string[] = [];
    for (const lease of this.#held) {
      for (const key of lease.keys) {
        keys.push(key);
        ids.push(lease.id);
      }
    }
    return { keys, ids };
  }

  get size(): number {
    return this.#held.size;
  }
}
