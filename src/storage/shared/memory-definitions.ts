/** Rules and budgets in memory, stored alike as in the databases (see ../sql/definitions.ts). */
import type { ReseedPlan, Seeded } from './reseed.ts';
import type { MemoryWatchers } from './watch.ts';

/** What the in-memory store needs of a definition besides the re-seed plan. */
export interface MemoryDefinitionKind<D, K> {
  aggregate: 'rules' | 'budgets';
  identity(key: K): string;
  /** Every field present, as a database row gives it back (an absent cap is `undefined`). */
  copy(definition: D): D;
  /** The listing order, as the databases sort it. */
  compare(a: D, b: D): number;
  plan(existing: readonly D[], seeds: readonly D[]): ReseedPlan<D, K>;
}

export class MemoryDefinitions<D extends Seeded & K, K> {
  readonly #kind: MemoryDefinitionKind<D, K>;
  readonly #watchers: MemoryWatchers;
  readonly #rows = new Map<string, D>();

  constructor(kind: MemoryDefinitionKind<D, K>, watchers: MemoryWatchers) {
    this.#kind = kind;
    this.#watchers = watchers;
  }

  async list(): Promise<D[]> {
    return [...this.#rows.values()].map((d) => this.#kind.copy(d)).sort((a, b) => this.#kind.compare(a, b));
  }

  async upsert(definition: D): Promise<void> {
    const key = this.#kind.identity(definition);
    const prev = this.#rows.get(key);
    this.#rows.set(key, { ...this.#kind.copy(definition), createdAt: prev ? prev.createdAt : definition.createdAt });
    this.#watchers.changed(this.#kind.aggregate);
  }

  async delete(key: K): Promise<boolean> {
    const deleted = this.#rows.delete(this.#kind.identity(key));
    if (deleted) this.#watchers.changed(this.#kind.aggregate);
    return deleted;
  }

  async replaceConfig(definitions: readonly D[]): Promise<K[]> {
    const plan = this.#kind.plan([...this.#rows.values()], definitions);
    for (const [key, row] of this.#rows) {
      if (row.source === 'config') this.#rows.delete(key);
    }
    for (const definition of plan.inserts) this.#rows.set(this.#kind.identity(definition), this.#kind.copy(definition));
    this.#watchers.changed(this.#kind.aggregate);
    return plan.skipped;
  }
}
