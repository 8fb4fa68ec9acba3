/**
 * The one storage interface. Callers never know which database sits behind it; the SQLite and
 * PostgreSQL implementations pass the same contract tests. Nothing on the request hot path awaits
 * storage: keys and rules are loaded into memory at start-up, usage is written in batches.
 */

import type { BudgetDefinition, BudgetKey } from '../budgets/types.ts';
import type { Priority, RuleDefinition, RuleKey } from '../ratelimit/types.ts';

export interface ApiKeyRecord {
  id: string;
  name: string;
  /** Normalised user path the key is bound to, or null when unbound. */
  userPath: string | null;
  /** Hex SHA-256 of the secret; the secret itself is never stored. */
  keyHash: string;
  /** The highest priority its requests are served at (X-Floodgate-Priority above it is lowered to it). */
  maxPriority: Priority;
  createdAt: Date;
}

/** One request's usage, as the recorder hands it to storage. */
export interface UsageRecord {
  /** When the request started, epoch milliseconds. */
  timestampMs: number;
  userPath: string;
  /** Provider instance that executed the request (empty for cache hits served by the gateway). */
  provider: string;
  /** Model id as executed by the provider. */
  model: string;
  endpoint: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** Prompt tokens the provider served from its prompt cache (part of `promptTokens`). */
  cachedPromptTokens: number;
  /** What the request cost in US dollars (0 when its model has no price). */
  costUsd: number;
  cached: boolean;
  status: number;
  latencyMs: number;
  apiKeyId: string | null;
  /** The request's id (its `x-request-id`; a batch line's `request_id`); null when it has none. */
  requestId: string | null;
  /**
   * True when the token counts are the gateway's estimate, not the provider's report: a stream
   * that ended before its usage report (see src/tokens/estimate.ts).
   */
  estimated: boolean;
}

/**
 * `insertUsage` rejects with this when the database refused the records' values (a constraint,
 * a value out of range), not the write itself: the same records will fail again, whereas any
 * other error (connection lost, database locked) may pass on a retry.
 */
export class UsageRejectedError extends Error {
  constructor(cause: unknown) {
    super(`the database refused the usage record: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'UsageRejectedError';
  }
}

export interface UsageSummaryRow {
  provider: string;
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  cachedPromptTokens: number;
  costUsd: number;
  cachedRequests: number;
  /** Requests whose token counts are estimates (`UsageRecord.estimated`). */
  estimatedRequests: number;
}

export interface UsageQuery {
  /**
   * Only records whose user path is this path or below it (`/a` covers `/a` and `/a/b`, not
   * `/ab`; `/` covers everything). Compared case-insensitively (ASCII), like rule matching.
   */
  userPathPrefix: string;
  from: Date;
  /** Exclusive. */
  to: Date;
}

/** What usage buckets are grouped by: the user path, the provider instance, or `provider/model`. */
export type UsageGroupBy = 'user_path' | 'provider' | 'model';

export interface UsageBucketQuery {
  from: Date;
  /** Exclusive. */
  to: Date;
  groupBy: UsageGroupBy;
  /** Bucket length in whole seconds (3600 for hours, 86400 for days), aligned to the Unix epoch, so buckets are UTC hours and days. */
  bucketSeconds: number;
}

/** The usage of one group in one time bucket. */
export interface UsageBucket {
  /** Start of the bucket. */
  start: Date;
  /** The group: a user path as recorded, a provider instance name, or `provider/model`. */
  key: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  /** What the bucket's requests cost in US dollars. */
  costUsd: number;
  /** Requests answered from the response cache. */
  cacheHits: number;
}

/**
 * Requests refused with a 429 (by a rate limit or a budget) in one UTC minute, by who was
 * refused, what it asked for and what refused it (see src/usage/refusals.ts).
 */
export interface RefusalCount {
  /** Start of the minute, epoch milliseconds. */
  minuteMs: number;
  /** The refused caller's user path, as it was given. */
  userPath: string;
  /** The provider instance and model it asked for; '' when it named none. */
  provider: string;
  model: string;
  /** A rate-limit rule's scope, or `budget`. */
  scope: 'user_path' | 'provider' | 'model' | 'budget';
  /** The rule's own subject (a per-child rule's path, not its child's), or the budget's user path. */
  subject: string;
  /** The rule's period label, or the budget's period. */
  period: string;
  count: number;
}

/** The refusals of one group in one time bucket (grouped as UsageBucket is). */
export interface RefusalBucket {
  start: Date;
  /** A user path as given, a provider instance name, or `provider/model` ('' for a refusal that named none). */
  key: string;
  refused: number;
}

/**
 * The refusal counts (migration 8). Kept apart from the rest of Storage so it can move into a
 * module of its own.
 */
export interface RefusalStorage {
  /**
   * Adds each count to the stored count with the same minute, user path, provider, model and
   * rule (creating it when there is none), in one transaction. The counts carry distinct keys.
   */
  addRefusals(counts: readonly RefusalCount[]): Promise<void>;
  /** Refusals in time buckets, one row per bucket and group that has any, by start then key (byte order). */
  bucketRefusals(query: UsageBucketQuery): Promise<RefusalBucket[]>;
}

/**
 * A file held by the gateway (batch input or output). `content` is null for a file that lives
 * at a provider (a forwarded batch's output): its bytes are fetched from there on demand.
 */
export interface StoredFile {
  id: string;
  /** Normalised user path of the caller that created it; only that subtree sees it. */
  userPath: string;
  purpose: string;
  filename: string;
  bytes: number;
  createdAt: Date;
  /** When it stops being served and may be removed; null: kept until deleted. */
  expiresAt: Date | null;
  content: Buffer | null;
  /** Provider instance and its file id, for files that live upstream. */
  provider: string | null;
  providerFileId: string | null;
}

/** What one user path holds in live files. */
export interface FileUsage {
  files: number;
  bytes: number;
}

export interface BatchRequestCounts {
  total: number;
  completed: number;
  failed: number;
}

export interface BatchErrorItem {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

/** One batch as the gateway tracks it; the OpenAI batch object is derived from it. */
export interface BatchRecord {
  id: string;
  userPath: string;
  apiKeyId: string | null;
  provider: string;
  /** Provider's own model id the batch runs on. */
  model: string;
  /** `/v1/chat/completions`, `/v1/embeddings` or `/v1/responses`. */
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  /** The provider's batch id for forwarded batches; null when the gateway runs it itself. */
  providerBatchId: string | null;
  status: string;
  outputFileId: string | null;
  errorFileId: string | null;
  requestCounts: BatchRequestCounts;
  metadata: Record<string, string> | null;
  errors: BatchErrorItem[] | null;
  /** Lifecycle times in Unix seconds, named as in the OpenAI batch object (`in_progress_at`, ...). */
  times: Record<string, number>;
  createdAt: Date;
  updatedAt: Date;
}

export interface BatchListQuery {
  /** This user path and below (case-insensitive, like usage queries). */
  userPathPrefix: string;
  /** A batch id: list only batches created before it (newest first). */
  after?: string;
  limit: number;
}

/**
 * The request and token windows of one rate-limit counter, saved by the in-memory counter store
 * (rate_limits.persist_counters) so that they outlive a restart. Concurrency is never saved.
 */
export interface SavedCounter {
  /** The engine's counter key (NUL-separated parts; see counterKeyOf in src/ratelimit/rules.ts). */
  key: string;
  periodSeconds: number;
  /** Start of the window `requestsCurrent`/`tokensCurrent` belong to, in Unix seconds. */
  windowStart: number;
  requestsPrevious: number;
  requestsCurrent: number;
  tokensPrevious: number;
  tokensCurrent: number;
}

/** Saved counters to remove: every one, these keys, or every key beginning with one of the prefixes. */
export interface CounterRemovals {
  all?: boolean;
  keys?: readonly string[];
  prefixes?: readonly string[];
}

export interface Storage extends RefusalStorage {
  /** Applies pending schema migrations; idempotent. */
  migrate(): Promise<void>;

  insertApiKey(key: ApiKeyRecord): Promise<void>;
  listApiKeys(): Promise<ApiKeyRecord[]>;
  /** Returns false when no such key exists. */
  deleteApiKey(id: string): Promise<boolean>;
  /**
   * Calls `listener` soon after the managed keys change through another connection to the same
   * storage (another replica), and whenever changes may have been missed (a lost connection, back
   * again); it may be called for this connection's own changes too. Resolves once watching, with a
   * function that stops it.
   */
  watchApiKeys(listener: () => void): Promise<() => Promise<void>>;

  listRules(): Promise<RuleDefinition[]>;
  /** Inserts or updates by key (scope, lower(subject), periodSeconds); keeps createdAt on update. */
  upsertRule(rule: RuleDefinition): Promise<void>;
  /** Returns false when no such rule exists. */
  deleteRule(key: RuleKey): Promise<boolean>;
  /**
   * Replaces every `config` rule with `rules` in one transaction; manual rules are untouched.
   * A config rule whose key matches an existing `manual` rule is not written (the operator's
   * manual rule wins); those keys are returned so the caller can warn. A config rule re-seeded
   * under an existing key keeps its createdAt (and its updatedAt when nothing changed), so
   * restarts do not rewrite history.
   */
  replaceConfigRules(rules: readonly RuleDefinition[]): Promise<RuleKey[]>;

  listCounters(): Promise<SavedCounter[]>;
  /**
   * In one transaction: first removes `removals`, then inserts `counters` or replaces the saved
   * ones with the same key. Called off the request path (at most once a second, at shutdown, and
   * when an admin resets or deletes counters).
   */
  writeCounters(counters: readonly SavedCounter[], removals?: CounterRemovals): Promise<void>;

  /**
   * Writes the records in one transaction: all of them or, when it rejects, none. The recorder
   * calls it off the request path with batches of a bounded size. Rejects with a
   * UsageRejectedError when the database refused the records' values.
   */
  insertUsage(records: readonly UsageRecord[]): Promise<void>;
  summarizeUsage(query: UsageQuery): Promise<UsageSummaryRow[]>;
  /** Usage of every user path in time buckets, one row per bucket and group that has records, by start then key (byte order). */
  bucketUsage(query: UsageBucketQuery): Promise<UsageBucket[]>;
  /** The summed `costUsd` of the records each query selects, in query order (one read for all). */
  sumCost(queries: readonly UsageQuery[]): Promise<number[]>;

  /** Sorted by lower(user path), then period. */
  listBudgets(): Promise<BudgetDefinition[]>;
  /** Inserts or updates by key (lower(userPath), period); keeps createdAt on update. */
  upsertBudget(budget: BudgetDefinition): Promise<void>;
  /** Returns false when no such budget exists. */
  deleteBudget(key: BudgetKey): Promise<boolean>;
  /** `replaceConfigRules` for budgets: config budgets replaced, manual ones kept and winning. */
  replaceConfigBudgets(budgets: readonly BudgetDefinition[]): Promise<BudgetKey[]>;

  /** Throws on a duplicate id. */
  insertFile(file: StoredFile): Promise<void>;
  /** The file, expired or not. */
  getFile(id: string): Promise<StoredFile | undefined>;
  /** Returns false when no such file exists. */
  deleteFile(id: string): Promise<boolean>;
  /**
   * The files whose user path is `userPath` exactly (case-insensitive, ASCII), not expired at
   * `at`: how many, and their summed `bytes`.
   */
  fileUsage(userPath: string, at: Date): Promise<FileUsage>;
  /** Removes every file whose expiry is at or before `at`; returns how many. */
  deleteExpiredFiles(at: Date): Promise<number>;
  /** Throws on a duplicate id. */
  insertBatch(batch: BatchRecord): Promise<void>;
  /** Replaces the stored record with the same id; false when there is none. */
  updateBatch(batch: BatchRecord): Promise<boolean>;
  getBatch(id: string): Promise<BatchRecord | undefined>;
  /** Newest first (insertion order); `after` pages past a batch id. */
  listBatches(query: BatchListQuery): Promise<BatchRecord[]>;

  /** One cheap round trip proving storage answers (readiness, `GET /ready`); rejects when it does not. */
  ping(): Promise<void>;

  close(): Promise<void>;
}
