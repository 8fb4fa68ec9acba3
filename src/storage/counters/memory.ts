import type { CounterRemovals, CounterRepository, SavedCounter } from './types.ts';

export class MemoryCounters implements CounterRepository {
  readonly #saved = new Map<string, SavedCounter>();

  async list(): Promise<SavedCounter[]> {
    return [...this.#saved.values()].map((c) => ({ ...c }));
  }

  async write(counters: readonly SavedCounter[], removals: CounterRemovals = {}): Promise<void> {
    const saved = this.#saved;
    if (removals.all) saved.clear();
    for (const key of removals.keys ?? []) saved.delete(key);
    for (const prefix of removals.prefixes ?? []) {
      for (const key of saved.keys()) if (key.startsWith(prefix)) saved.delete(key);
    }
    for (const counter of counters) saved.set(counter.key, { ...counter });
  }
}
