/**
 * In-memory Storage for tests and throwaway runs. It passes the same contract suites as the real
 * databases, so code tested against it behaves the same on SQLite and PostgreSQL.
 */
import { MemoryBatches, MemoryFiles } from './batch-files/memory.ts';
import { MemoryBudgets } from './budgets/memory.ts';
import { MemoryCounters } from './counters/memory.ts';
import { MemoryKeys } from './keys/memory.ts';
import { MemoryRefusals } from './refusals/memory.ts';
import { MemoryRules } from './rules/memory.ts';
import { MemoryWatchers, type ChangeListener, type WatchedAggregate } from './shared/watch.ts';
import type { Storage } from './types.ts';
import { MemoryUsage } from './usage/memory.ts';

/** The data behind one or more MemoryStorage handles (a "database" that outlives a close). */
export class MemoryStore {
  /** Told when keys, rules or budgets change through any handle. */
  readonly watchers = new MemoryWatchers();
  readonly keys = new MemoryKeys(this.watchers);
  readonly rules = new MemoryRules(this.watchers);
  readonly budgets = new MemoryBudgets(this.watchers);
  readonly usage = new MemoryUsage();
  readonly counters = new MemoryCounters();
  readonly files = new MemoryFiles();
  readonly batches = new MemoryBatches();
  readonly refusals = new MemoryRefusals();
  migrated = false;
}

export class MemoryStorage implements Storage {
  readonly store: MemoryStore;
  readonly keys: MemoryKeys;
  readonly rules: MemoryRules;
  readonly budgets: MemoryBudgets;
  readonly usage: MemoryUsage;
  readonly counters: MemoryCounters;
  readonly files: MemoryFiles;
  readonly batches: MemoryBatches;
  readonly refusals: MemoryRefusals;
  readonly #stops = new Set<() => Promise<void>>();

  constructor(store: MemoryStore = new MemoryStore()) {
    this.store = store;
    this.keys = store.keys;
    this.rules = store.rules;
    this.budgets = store.budgets;
    this.usage = store.usage;
    this.counters = store.counters;
    this.files = store.files;
    this.batches = store.batches;
    this.refusals = store.refusals;
  }

  async migrate(): Promise<void> {
    this.store.migrated = true;
  }

  async schemaVersion(): Promise<number> {
    return this.store.migrated ? 1 : 0;
  }

  async appliedMigrationCount(): Promise<number> {
    return this.store.migrated ? 1 : 0;
  }

  async watch(aggregate: WatchedAggregate, listener: ChangeListener): Promise<() => Promise<void>> {
    const unwatch = this.store.watchers.watch(aggregate, listener);
    const stop = async (): Promise<void> => {
      this.#stops.delete(stop);
      await unwatch();
    };
    this.#stops.add(stop);
    return stop;
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    await Promise.all([...this.#stops].map((stop) => stop()));
  }
}
