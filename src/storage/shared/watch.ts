/**
 * What storage can tell its watchers about: the aggregates every replica sharing the storage
 * follows (see Storage.watch).
 */
export type WatchedAggregate = 'keys' | 'rules' | 'budgets';

export type ChangeListener = () => void;

/** The watchers of one in-memory store, by aggregate; told after the write, as a database's notification arrives after its commit. */
export class MemoryWatchers {
  readonly #listeners = new Map<WatchedAggregate, Set<ChangeListener>>();

  watch(aggregate: WatchedAggregate, listener: ChangeListener): () => Promise<void> {
    // A listener of its own, so one function watching twice is stopped twice.
    const watcher = (): void => listener();
    let set = this.#listeners.get(aggregate);
    if (set === undefined) this.#listeners.set(aggregate, (set = new Set()));
    set.add(watcher);
    return async () => {
      set.delete(watcher);
    };
  }

  changed(aggregate: WatchedAggregate): void {
    for (const watcher of this.#listeners.get(aggregate) ?? []) setImmediate(watcher);
  }
}
