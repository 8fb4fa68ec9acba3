import { isUnder, subtreeMatch } from '../../user-path/user-path.ts';
import type { BatchListQuery, BatchRecord, BatchRepository, FileRepository, FileUsage, StoredFile } from './types.ts';

// Copies deep enough that a caller mutating what it got back cannot change the stored record.

export class MemoryFiles implements FileRepository {
  readonly #files = new Map<string, StoredFile>();

  async insert(file: StoredFile): Promise<void> {
    if (this.#files.has(file.id)) throw new Error(`duplicate file id ${file.id}`);
    this.#files.set(file.id, copyFile(file));
  }

  async get(id: string): Promise<StoredFile | undefined> {
    const file = this.#files.get(id);
    return file === undefined ? undefined : copyFile(file);
  }

  async delete(id: string): Promise<boolean> {
    return this.#files.delete(id);
  }

  async usage(userPath: string, at: Date): Promise<FileUsage> {
    const key = userPath.toLowerCase();
    const usage: FileUsage = { files: 0, bytes: 0 };
    for (const file of this.#files.values()) {
      if (file.userPath.toLowerCase() !== key || !isLive(file, at)) continue;
      usage.files += 1;
      usage.bytes += file.bytes;
    }
    return usage;
  }

  async deleteExpired(at: Date): Promise<number> {
    let removed = 0;
    for (const [id, file] of this.#files) {
      if (isLive(file, at)) continue;
      this.#files.delete(id);
      removed += 1;
    }
    return removed;
  }
}

export class MemoryBatches implements BatchRepository {
  /** Insertion order is the listing order (newest last). */
  readonly #batches = new Map<string, BatchRecord>();

  async insert(batch: BatchRecord): Promise<void> {
    if (this.#batches.has(batch.id)) throw new Error(`duplicate batch id ${batch.id}`);
    this.#batches.set(batch.id, structuredClone(batch));
  }

  async update(batch: BatchRecord): Promise<boolean> {
    if (!this.#batches.has(batch.id)) return false;
    this.#batches.set(batch.id, structuredClone(batch));
    return true;
  }

  async get(id: string): Promise<BatchRecord | undefined> {
    const batch = this.#batches.get(id);
    return batch === undefined ? undefined : structuredClone(batch);
  }

  async list(query: BatchListQuery): Promise<BatchRecord[]> {
    const prefix = subtreeMatch(query.userPathPrefix)?.exact ?? '/';
    const all = [...this.#batches.values()].reverse();
    let start = 0;
    if (query.after !== undefined) {
      const at = all.findIndex((b) => b.id === query.after);
      start = at < 0 ? all.length : at + 1;
    }
    const out: BatchRecord[] = [];
    for (const b of all.slice(start)) {
      if (!isUnder(b.userPath, prefix)) continue;
      out.push(structuredClone(b));
      if (out.length >= query.limit) break;
    }
    return out;
  }
}

function isLive(file: StoredFile, at: Date): boolean {
  return file.expiresAt === null || file.expiresAt.getTime() > at.getTime();
}

function copyFile(file: StoredFile): StoredFile {
  return { ...file, content: file.content === null ? null : Buffer.from(file.content) };
}
