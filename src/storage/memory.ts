/**
 * In-memory Storage for tests and throwaway runs. It passes the same contract suite as the real
 * databases, so code tested against it behaves the same on SQLite and PostgreSQL.
 */

import { budgetIdentity, type BudgetDefinition, type BudgetKey } from '../budgets/types.ts';
import { ruleIdentity } from '../ratelimit/rules.ts';
import type { RuleDefinition, RuleKey } from '../ratelimit/types.ts';
import { isUnder, subtreeMatch } from '../user-path/user-path.ts';
import { MemoryRefusals } from './refusals.ts';
import { compareBudgets, planBudgetReseed, planConfigReseed, usageGroupKey } from './shared.ts';
import type {
  ApiKeyRecord,
  BatchListQuery,
  BatchRecord,
  CounterRemovals,
  FileUsage,
  RefusalBucket,
  RefusalCount,
  SavedCounter,
  Storage,
  StoredFile,
  UsageBucket,
  UsageBucketQuery,
  UsageQuery,
  UsageRecord,
  UsageSummaryRow,
} from './types.ts';

/** The data behind one or more MemoryStorage handles (a "database" that outlives a close). */
export class MemoryStore {
  readonly keys = new Map<string, ApiKeyRecord>();
  readonly rules = new Map<string, RuleDefinition>();
  readonly budgets = new Map<string, BudgetDefinition>();
  readonly counters = new Map<string, SavedCounter>();
  readonly usage: UsageRecord[] = [];
  readonly files = new Map<string, StoredFile>();
  /** Insertion order is the listing order (newest last). */
  readonly batches = new Map<string, BatchRecord>();
  readonly refusals = new MemoryRefusals();
  migrated = false;
  /** Called when a key is created or deleted through any handle. */
  readonly keyWatchers = new Set<() => void>();
}

const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const clone = <T extends object>(value: T): T => ({ ...value });

export class MemoryStorage implements Storage {
  readonly store: MemoryStore;

  constructor(store: MemoryStore = new MemoryStore()) {
    this.store = store;
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

  async insertApiKey(key: ApiKeyRecord): Promise<void> {
    if (this.store.keys.has(key.id)) throw new Error(`duplicate api key id ${key.id}`);
    for (const existing of this.store.keys.values()) {
      if (existing.keyHash === key.keyHash) throw new Error('duplicate api key hash');
    }
    this.store.keys.set(key.id, clone(key));
    this.keysChanged();
  }

  async listApiKeys(): Promise<ApiKeyRecord[]> {
    return [...this.store.keys.values()]
      .map(clone)
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || byText(a.id, b.id));
  }

  async deleteApiKey(id: string): Promise<boolean> {
    const deleted = this.store.keys.delete(id);
    if (deleted) this.keysChanged();
    return deleted;
  }

  async watchApiKeys(listener: () => void): Promise<() => Promise<void>> {
    // A listener of its own, so one function watching twice is stopped twice.
    const watcher = (): void => listener();
    this.store.keyWatchers.add(watcher);
    return async () => {
      this.store.keyWatchers.delete(watcher);
    };
  }

  /** Told after the write, as a database's notification arrives after its commit. */
  private keysChanged(): void {
    for (const watcher of this.store.keyWatchers) setImmediate(watcher);
  }

  async listRules(): Promise<RuleDefinition[]> {
    return [...this.store.rules.values()]
      .map(copyRule)
      .sort(
        (a, b) =>
          byText(a.scope, b.scope) ||
          byText(a.subject.toLowerCase(), b.subject.toLowerCase()) ||
          a.periodSeconds - b.periodSeconds,
      );
  }

  async upsertRule(rule: RuleDefinition): Promise<void> {
    const key = ruleIdentity(rule);
    const prev = this.store.rules.get(key);
    this.store.rules.set(key, { ...copyRule(rule), createdAt: prev ? prev.createdAt : rule.createdAt });
  }

  async deleteRule(key: RuleKey): Promise<boolean> {
    return this.store.rules.delete(ruleIdentity(key));
  }

  async replaceConfigRules(rules: readonly RuleDefinition[]): Promise<RuleKey[]> {
    const plan = planConfigReseed([...this.store.rules.values()], rules);
    for (const [key, rule] of this.store.rules) {
      if (rule.source === 'config') this.store.rules.delete(key);
    }
    for (const rule of plan.inserts) this.store.rules.set(ruleIdentity(rule), copyRule(rule));
    return plan.skipped;
  }

  async listCounters(): Promise<SavedCounter[]> {
    return [...this.store.counters.values()].map(clone);
  }

  async writeCounters(counters: readonly SavedCounter[], removals: CounterRemovals = {}): Promise<void> {
    const saved = this.store.counters;
    if (removals.all) saved.clear();
    for (const key of removals.keys ?? []) saved.delete(key);
    for (const prefix of removals.prefixes ?? []) {
      for (const key of saved.keys()) if (key.startsWith(prefix)) saved.delete(key);
    }
    for (const counter of counters) saved.set(counter.key, clone(counter));
  }

  async insertUsage(records: readonly UsageRecord[]): Promise<void> {
    for (const r of records) this.store.usage.push(clone(r));
  }

  async summarizeUsage(query: UsageQuery): Promise<UsageSummaryRow[]> {
    const groups = new Map<string, UsageSummaryRow>();
    for (const r of this.selectUsage(query)) {
      const id = `${r.provider}\u0000${r.model}`;
      let row = groups.get(id);
      if (!row) {
        row = {
          provider: r.provider,
          model: r.model,
          requests: 0,
          promptTokens: 0,
          completionTokens: 0,
          totalTokens: 0,
          cachedPromptTokens: 0,
          costUsd: 0,
          cachedRequests: 0,
          estimatedRequests: 0,
        };
        groups.set(id, row);
      }
      row.requests++;
      row.promptTokens += r.promptTokens;
      row.completionTokens += r.completionTokens;
      row.totalTokens += r.totalTokens;
      row.cachedPromptTokens += r.cachedPromptTokens;
      row.costUsd += r.costUsd;
      if (r.cached) row.cachedRequests++;
      if (r.estimated) row.estimatedRequests++;
    }
    return [...groups.values()].sort((a, b) => byText(a.provider, b.provider) || byText(a.model, b.model));
  }

  async bucketUsage(query: UsageBucketQuery): Promise<UsageBucket[]> {
    const from = query.from.getTime();
    const to = query.to.getTime();
    const bucketMs = query.bucketSeconds * 1000;
    const groups = new Map<string, UsageBucket>();
    for (const r of this.store.usage) {
      const ts = r.timestampMs;
      if (ts < from || ts >= to) continue;
      const start = Math.floor(ts / bucketMs) * bucketMs;
      const key = usageGroupKey(query.groupBy, r);
      const id = `${start}\u0000${key}`;
      let bucket = groups.get(id);
      if (!bucket) {
        bucket = { start: new Date(start), key, requests: 0, promptTokens: 0, completionTokens: 0, costUsd: 0, cacheHits: 0 };
        groups.set(id, bucket);
      }
      bucket.requests++;
      bucket.promptTokens += r.promptTokens;
      bucket.completionTokens += r.completionTokens;
      bucket.costUsd += r.costUsd;
      if (r.cached) bucket.cacheHits++;
    }
    return [...groups.values()].sort((a, b) => a.start.getTime() - b.start.getTime() || byText(a.key, b.key));
  }

  async sumCost(queries: readonly UsageQuery[]): Promise<number[]> {
    return queries.map((query) => {
      let cost = 0;
      for (const r of this.selectUsage(query)) cost += r.costUsd;
      return cost;
    });
  }

  async listBudgets(): Promise<BudgetDefinition[]> {
    return [...this.store.budgets.values()].map(copyBudget).sort(compareBudgets);
  }

  async upsertBudget(budget: BudgetDefinition): Promise<void> {
    const key = budgetIdentity(budget);
    const prev = this.store.budgets.get(key);
    this.store.budgets.set(key, { ...copyBudget(budget), createdAt: prev ? prev.createdAt : budget.createdAt });
  }

  async deleteBudget(key: BudgetKey): Promise<boolean> {
    return this.store.budgets.delete(budgetIdentity(key));
  }

  async replaceConfigBudgets(budgets: readonly BudgetDefinition[]): Promise<BudgetKey[]> {
    const plan = planBudgetReseed([...this.store.budgets.values()], budgets);
    for (const [key, budget] of this.store.budgets) {
      if (budget.source === 'config') this.store.budgets.delete(key);
    }
    for (const budget of plan.inserts) this.store.budgets.set(budgetIdentity(budget), copyBudget(budget));
    return plan.skipped;
  }

  /** The records of the query's subtree and time window. */
  private *selectUsage(query: UsageQuery): Iterable<UsageRecord> {
    const prefix = subtreeMatch(query.userPathPrefix)?.exact ?? '/';
    const from = query.from.getTime();
    const to = query.to.getTime();
    for (const r of this.store.usage) {
      if (r.timestampMs < from || r.timestampMs >= to) continue;
      if (!isUnder(r.userPath, prefix)) continue;
      yield r;
    }
  }

  async insertFile(file: StoredFile): Promise<void> {
    if (this.store.files.has(file.id)) throw new Error(`duplicate file id ${file.id}`);
    this.store.files.set(file.id, copyFile(file));
  }

  async getFile(id: string): Promise<StoredFile | undefined> {
    const file = this.store.files.get(id);
    return file === undefined ? undefined : copyFile(file);
  }

  async deleteFile(id: string): Promise<boolean> {
    return this.store.files.delete(id);
  }

  async fileUsage(userPath: string, at: Date): Promise<FileUsage> {
    const key = userPath.toLowerCase();
    const usage: FileUsage = { files: 0, bytes: 0 };
    for (const file of this.store.files.values()) {
      if (file.userPath.toLowerCase() !== key || !isLive(file, at)) continue;
      usage.files += 1;
      usage.bytes += file.bytes;
    }
    return usage;
  }

  async deleteExpiredFiles(at: Date): Promise<number> {
    let removed = 0;
    for (const [id, file] of this.store.files) {
      if (isLive(file, at)) continue;
      this.store.files.delete(id);
      removed += 1;
    }
    return removed;
  }

  async insertBatch(batch: BatchRecord): Promise<void> {
    if (this.store.batches.has(batch.id)) throw new Error(`duplicate batch id ${batch.id}`);
    this.store.batches.set(batch.id, copyBatch(batch));
  }

  async updateBatch(batch: BatchRecord): Promise<boolean> {
    if (!this.store.batches.has(batch.id)) return false;
    this.store.batches.set(batch.id, copyBatch(batch));
    return true;
  }

  async getBatch(id: string): Promise<BatchRecord | undefined> {
    const batch = this.store.batches.get(id);
    return batch === undefined ? undefined : copyBatch(batch);
  }

  async listBatches(query: BatchListQuery): Promise<BatchRecord[]> {
    const prefix = subtreeMatch(query.userPathPrefix)?.exact ?? '/';
    const all = [...this.store.batches.values()].reverse();
    let start = 0;
    if (query.after !== undefined) {
      const at = all.findIndex((b) => b.id === query.after);
      start = at < 0 ? all.length : at + 1;
    }
    const out: BatchRecord[] = [];
    for (const b of all.slice(start)) {
      if (!isUnder(b.userPath, prefix)) continue;
      out.push(copyBatch(b));
      if (out.length >= query.limit) break;
    }
    return out;
  }

  // ---- refusal counts (RefusalStorage)

  addRefusals(counts: readonly RefusalCount[]): Promise<void> {
    return this.store.refusals.addRefusals(counts);
  }

  bucketRefusals(query: UsageBucketQuery): Promise<RefusalBucket[]> {
    return this.store.refusals.bucketRefusals(query);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {}
}

/** Every field present, as a database row gives it back (an absent cap is `undefined`). */
function copyRule(rule: RuleDefinition): RuleDefinition {
  return {
    scope: rule.scope,
    subject: rule.subject,
    periodSeconds: rule.periodSeconds,
    maxRequests: rule.maxRequests,
    maxTokens: rule.maxTokens,
    ...(rule.perChild && { perChild: true as const }),
    source: rule.source,
    createdAt: rule.createdAt,
    updatedAt: rule.updatedAt,
  };
}

/** Every field present, as a database row gives it back. */
function copyBudget(budget: BudgetDefinition): BudgetDefinition {
  return {
    userPath: budget.userPath,
    period: budget.period,
    maxUsd: budget.maxUsd,
    source: budget.source,
    createdAt: budget.createdAt,
    updatedAt: budget.updatedAt,
  };
}

// Deep enough that a caller mutating what it got back cannot change the stored record.
function isLive(file: StoredFile, at: Date): boolean {
  return file.expiresAt === null || file.expiresAt.getTime() > at.getTime();
}

function copyFile(file: StoredFile): StoredFile {
  return { ...file, content: file.content === null ? null : Buffer.from(file.content) };
}

function copyBatch(batch: BatchRecord): BatchRecord {
  return structuredClone(batch);
}
