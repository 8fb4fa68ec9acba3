/**
 * What an operator defines — rate-limit rules, budgets — lives one way: seeded from the
 * configuration at every start (config definitions are read-only through the API), manual ones
 * written through the admin API and stored, each write reaching storage before the live engine
 * (so what is enforced always survives a restart), and every replica sharing the storage following
 * the others' writes. `DefinitionManager` is that life once; a `DefinitionKind` says what differs.
 */
import type { Result } from '../shared/result.ts';
import { Serial } from '../shared/serial.ts';
import type { Storage, WatchedAggregate } from '../storage/types.ts';

export type DefinitionSource = 'manual' | 'config';

/** What every definition carries besides its own fields. */
export interface Definition {
  readonly source: DefinitionSource;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** Why a change was refused; the HTTP layer maps the reason to 400, 404 or 409 and its own code. */
export class DefinitionChangeError extends Error {
  readonly reason: 'invalid' | 'not_found' | 'managed_by_config';
  constructor(reason: DefinitionChangeError['reason'], message: string) {
    super(message);
    this.name = 'DefinitionChangeError';
    this.reason = reason;
  }
}

/** A stored definition that no longer passes validation, and why; it stays in storage, not enforced. */
export interface InvalidStored {
  readonly item: string;
  readonly error: string;
}

/** What differs from one kind of definition to another. `W` is what a write carries, `K` the key. */
export interface DefinitionKind<D extends Definition, W extends K, K> {
  /** One string per key, equal for keys that name the same definition (case rules included). */
  identity(key: K): string;
  /** A write as a definition, or a message naming the offending field. */
  build(write: W, source: DefinitionSource, createdAt: Date, updatedAt: Date): Result<D>;
  /** A stored row as it is enforced, or why it is not (written before today's bounds, or by hand). */
  check(row: D): Result<D>;
  /** A row, for the log line of an invalid one. */
  label(row: D): string;
  notFoundMessage(key: K): string;
  /** The 409 of a write to a config definition; `origin` says where it was declared. */
  managedByConfigMessage(key: K, origin: string): string;
}

/** Where definitions of one kind are stored. */
export interface DefinitionStore<D, K> {
  list(): Promise<D[]>;
  upsert(definition: D): Promise<void>;
  delete(key: K): Promise<boolean>;
  /**
   * Replaces every config definition with these in one step; manual ones are untouched and win
   * over a config one with the same key (its key is answered, so the caller can warn).
   */
  replaceConfig(definitions: readonly D[]): Promise<K[]>;
}

/** The live side (the rate limiter, the budget tracker): what is enforced now. */
export interface LiveDefinitions<D, K> {
  get(key: K): D | undefined;
  /** Everything valid in storage (at start, and when following other replicas). */
  replaceAll(valid: readonly D[]): void | Promise<void>;
  /** A definition created, or changed from `existing`. */
  put(definition: D, existing: D | undefined): void | Promise<void>;
  remove(key: K): void | Promise<void>;
}

/**
 * How replicas sharing the storage tell each other that definitions changed: `onChange` fires on
 * another replica's write, or when writes may have been missed. `announce`, where the channel
 * needs the writer to speak (storage notifications do not), tells the others.
 */
export interface ChangeFeed {
  announce?(): Promise<void>;
  onChange(listener: () => void): void;
}

/** One feed that reports what any of `feeds` reports, and announces through each. */
export function mergeFeeds(feeds: readonly ChangeFeed[]): ChangeFeed {
  return {
    async announce() {
      for (const feed of feeds) await feed.announce?.();
    },
    onChange(listener) {
      for (const feed of feeds) feed.onChange(listener);
    },
  };
}

/**
 * The storage's own announcements of `aggregate`'s changes (Storage.watch) as a feed: the path that
 * works without Redis, for replicas sharing a PostgreSQL database or an SQLite file. Resolves once
 * watching, with the feed and a function that stops watching.
 */
export async function storageFeed(storage: Pick<Storage, 'watch'>, aggregate: WatchedAggregate): Promise<{ feed: ChangeFeed; stop: () => Promise<void> }> {
  const listeners: Array<() => void> = [];
  const stop = await storage.watch(aggregate, () => {
    for (const listener of listeners) listener();
  });
  return { feed: { onChange: (listener) => void listeners.push(listener) }, stop };
}

/** Seeds carry where they were declared, for the 409 and the start-up warnings. */
export type Seed<W> = W & { readonly origin: string };

export class DefinitionManager<D extends Definition, W extends K, K> {
  readonly #kind: DefinitionKind<D, W, K>;
  readonly #store: DefinitionStore<D, K>;
  readonly #live: LiveDefinitions<D, K>;
  readonly #now: () => number;
  /** identity → where a config definition was declared. */
  readonly #configOrigins = new Map<string, string>();
  readonly #feeds: ChangeFeed[] = [];
  readonly #serial = new Serial();

  private constructor(kind: DefinitionKind<D, W, K>, store: DefinitionStore<D, K>, live: LiveDefinitions<D, K>, now: () => number) {
    this.#kind = kind;
    this.#store = store;
    this.#live = live;
    this.#now = now;
  }

  /**
   * Re-seeds the config definitions (stale ones removed, manual ones untouched and winning) and
   * loads every valid stored definition into the live side. Answers the manager, the seeds that lost
   * to a manual definition with the same key, and the stored rows that are not enforced.
   */
  static async start<D extends Definition, W extends K, K>(options: {
    kind: DefinitionKind<D, W, K>;
    store: DefinitionStore<D, K>;
    live: LiveDefinitions<D, K>;
    seeds: ReadonlyArray<Seed<W>>;
    now: () => number;
  }): Promise<{ manager: DefinitionManager<D, W, K>; shadowed: Array<Seed<W>>; invalid: InvalidStored[] }> {
    const { kind, store, seeds } = options;
    const manager = new DefinitionManager(kind, store, options.live, options.now);
    const at = new Date(options.now());
    const bySeedKey = new Map<string, Seed<W>>();
    const rows = seeds.map((seed) => {
      const definition = manager.#build(seed, 'config', at, at);
      manager.#configOrigins.set(kind.identity(seed), seed.origin);
      bySeedKey.set(kind.identity(seed), seed);
      return definition;
    });
    const skipped = await store.replaceConfig(rows);
    const shadowed = skipped.map((key) => bySeedKey.get(kind.identity(key))).filter((seed): seed is Seed<W> => seed !== undefined);
    for (const seed of shadowed) manager.#configOrigins.delete(kind.identity(seed));
    const invalid = await manager.#load();
    return { manager, shadowed, invalid };
  }

  /** Creates the definition or changes it; config definitions refuse with a 409's reason. */
  async put(write: W): Promise<void> {
    await this.#serial.run(async () => {
      this.#assertManual(write);
      const existing = this.#live.get(write);
      const now = new Date(this.#now());
      const definition = this.#build(write, 'manual', existing?.createdAt ?? now, now);
      await this.#store.upsert(definition);
      await this.#live.put(definition, existing);
    });
    await this.#announce();
  }

  async delete(key: K): Promise<void> {
    await this.#serial.run(async () => {
      this.#assertManual(key);
      if (this.#live.get(key) === undefined) throw new DefinitionChangeError('not_found', this.#kind.notFoundMessage(key));
      await this.#store.delete(key);
      await this.#live.remove(key);
    });
    await this.#announce();
  }

  /** Re-reads storage into the live side; answers the stored rows that are not enforced. */
  reload(): Promise<InvalidStored[]> {
    return this.#serial.run(() => this.#load());
  }

  /**
   * Follows the writes of the other replicas sharing this storage: a reload on every change the
   * feed reports, and one every `intervalMs` (when given) in case a report was lost. Answers a stop function.
   */
  follow(feed: ChangeFeed | undefined, options: { intervalMs?: number; onError: (err: unknown) => void }): () => void {
    if (feed !== undefined) this.#feeds.push(feed);
    const stop = this.#serial.follow(() => this.#load(), (listener) => feed?.onChange(listener), options);
    return () => {
      stop();
      if (feed !== undefined) this.#feeds.splice(this.#feeds.indexOf(feed), 1);
    };
  }

  async #announce(): Promise<void> {
    for (const feed of this.#feeds) await feed.announce?.();
  }

  async #load(): Promise<InvalidStored[]> {
    const valid: D[] = [];
    const invalid: InvalidStored[] = [];
    for (const row of await this.#store.list()) {
      // A row written before today's bounds (or by hand) must not take the live side, and with it
      // every admin answer, down: it stays in storage untouched but is not enforced.
      const checked = this.#kind.check(row);
      if (checked.ok) valid.push(checked.value);
      else invalid.push({ item: this.#kind.label(row), error: checked.error });
    }
    await this.#live.replaceAll(valid);
    return invalid;
  }

  #assertManual(key: K): void {
    const origin = this.#configOrigins.get(this.#kind.identity(key));
    if (origin !== undefined) throw new DefinitionChangeError('managed_by_config', this.#kind.managedByConfigMessage(key, origin));
  }

  #build(write: W, source: DefinitionSource, createdAt: Date, updatedAt: Date): D {
    const built = this.#kind.build(write, source, createdAt, updatedAt);
    if (!built.ok) throw new DefinitionChangeError('invalid', built.error);
    return built.value;
  }
}
