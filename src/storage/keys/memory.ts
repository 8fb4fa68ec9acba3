import { byText } from '../shared/values.ts';
import type { MemoryWatchers } from '../shared/watch.ts';
import type { ApiKeyRecord, KeyRepository } from './types.ts';

export class MemoryKeys implements KeyRepository {
  readonly #keys = new Map<string, ApiKeyRecord>();
  readonly #watchers: MemoryWatchers;

  constructor(watchers: MemoryWatchers) {
    this.#watchers = watchers;
  }

  async insert(key: ApiKeyRecord): Promise<void> {
    if (this.#keys.has(key.id)) throw new Error(`duplicate api key id ${key.id}`);
    for (const existing of this.#keys.values()) {
      if (existing.keyHash === key.keyHash) throw new Error('duplicate api key hash');
    }
    this.#keys.set(key.id, { ...key });
    this.#watchers.changed('keys');
  }

  async list(): Promise<ApiKeyRecord[]> {
    return [...this.#keys.values()].map((k) => ({ ...k })).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || byText(a.id, b.id));
  }

  async delete(id: string): Promise<boolean> {
    const deleted = this.#keys.delete(id);
    if (deleted) this.#watchers.changed('keys');
    return deleted;
  }
}
