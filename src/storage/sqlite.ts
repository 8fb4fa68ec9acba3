/**
 * SQLite storage (better-sqlite3). The driver is synchronous; methods still return promises so
 * callers see the one `Storage` interface. The one write on a steady request path, usage, comes
 * from the usage recorder in batches off the request path, one transaction each. Timestamps are
 * stored as epoch milliseconds (INTEGER): compact, sortable, and exactly what a JS Date holds.
 */

import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { Database as Db, Statement } from 'better-sqlite3';
import type { Priority, RuleDefinition, RuleKey, Scope } from '../ratelimit/types.ts';
import type { BudgetDefinition, BudgetKey } from '../budgets/types.ts';
import { subtreeMatch } from '../user-path/user-path.ts';
import { REFUSAL_GROUP_KEY_SQL, REFUSAL_KEY_COLUMNS } from './refusals.ts';
import { COUNTER_COLUMNS, COUNTER_REPLACE, USAGE_GROUP_KEY_SQL, counterKeyFromStored, planBudgetReseed, planConfigReseed, storedCounterKey } from './shared.ts';
import { BATCH_COLUMNS, FILE_COLUMNS, batchFromRow, batchParams, fileFromRow, fileParams } from './object-rows.ts';
import type { BatchRow, FileRow } from './object-rows.ts';
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
import { UsageRejectedError } from './types.ts';

interface Migration {
  version: number;
  sql: string;
}

/** Append-only: never edit a shipped migration, add a new version instead. */
const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        user_path TEXT,
        key_hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE rate_limit_rules (
        scope TEXT NOT NULL CHECK (scope IN ('user_path', 'provider', 'model')),
        subject TEXT NOT NULL,
        subject_key TEXT NOT NULL,
        period_seconds INTEGER NOT NULL,
        max_requests INTEGER,
        max_tokens INTEGER,
        source TEXT NOT NULL CHECK (source IN ('manual', 'config')),
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (scope, subject_key, period_seconds)
      );
      CREATE TABLE usage_records (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts INTEGER NOT NULL,
        user_path TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        total_tokens INTEGER NOT NULL,
        cached INTEGER NOT NULL,
        status INTEGER NOT NULL,
        latency_ms INTEGER NOT NULL,
        api_key_id TEXT
      );
      CREATE INDEX usage_records_user_path_ts ON usage_records (user_path, ts);
    `,
  },
  {
    // Files and batches (realtime-and-batch). Bytes live in the row: files are capped by the body limit.
    version: 2,
    sql: `
      CREATE TABLE files (
        id TEXT PRIMARY KEY,
        user_path TEXT NOT NULL,
        purpose TEXT NOT NULL,
        filename TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        content BLOB,
        provider TEXT,
        provider_file_id TEXT
      );
      CREATE TABLE batches (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        user_path TEXT NOT NULL,
        api_key_id TEXT,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        input_file_id TEXT NOT NULL,
        completion_window TEXT NOT NULL,
        provider_batch_id TEXT,
        status TEXT NOT NULL,
        output_file_id TEXT,
        error_file_id TEXT,
        request_counts TEXT NOT NULL,
        metadata TEXT,
        errors TEXT,
        times TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      );
      CREATE INDEX batches_user_path ON batches (user_path);
    `,
  },
  {
    // Budgets: request costs on usage records, and the budgets themselves. The (ts, ...) index
    // covers the budget refresh's sums over a period (read every few seconds).
    version: 3,
    sql: `
      ALTER TABLE usage_records ADD COLUMN cached_prompt_tokens INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE usage_records ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
      CREATE INDEX usage_records_ts_cost ON usage_records (ts, user_path, cost_usd);
      CREATE TABLE budgets (
        user_path TEXT NOT NULL,
        path_key TEXT NOT NULL,
        period TEXT NOT NULL,
        max_usd REAL NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('manual', 'config')),
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (path_key, period)
      );
    `,
  },
  {
    // Per-child rules, and the windows of the in-memory counters kept across restarts.
    version: 4,
    sql: `
      ALTER TABLE rate_limit_rules ADD COLUMN per_child INTEGER NOT NULL DEFAULT 0 CHECK (per_child IN (0, 1));
      CREATE TABLE rate_limit_counters (
        counter_key TEXT PRIMARY KEY,
        period_seconds INTEGER NOT NULL,
        window_start INTEGER NOT NULL,
        requests_previous INTEGER NOT NULL,
        requests_current INTEGER NOT NULL,
        tokens_previous INTEGER NOT NULL,
        tokens_current INTEGER NOT NULL
      );
    `,
  },
  {
    // Which request a usage record belongs to, and whether its tokens are an estimate.
    version: 5,
    sql: `
      ALTER TABLE usage_records ADD COLUMN request_id TEXT;
      ALTER TABLE usage_records ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0 CHECK (estimated IN (0, 1));
    `,
  },
  {
    // Files expire, and each user path's live files are counted against its quota. Files stored
    // before this version expire 30 days after their upload (the default files.ttl_seconds).
    version: 6,
    sql: `
      ALTER TABLE files ADD COLUMN expires_at INTEGER;
      UPDATE files SET expires_at = created_at + 2592000000;
      CREATE INDEX files_expires_at ON files (expires_at);
      CREATE INDEX files_user_path ON files (lower(user_path));
    `,
  },
  {
    // The highest priority a managed key's requests are served at; keys created before it: normal.
    version: 7,
    sql: `
      ALTER TABLE api_keys ADD COLUMN max_priority TEXT NOT NULL DEFAULT 'normal' CHECK (max_priority IN ('high', 'normal', 'low'));
    `,
  },
  {
    // Requests refused with a 429, counted per minute, user path, asked-for provider and model,
    // and rule (src/storage/refusals.ts).
    version: 8,
    sql: `
      CREATE TABLE refusals (
        minute INTEGER NOT NULL,
        user_path TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('user_path', 'provider', 'model', 'budget')),
        subject TEXT NOT NULL,
        period TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (${REFUSAL_KEY_COLUMNS})
      );
    `,
  },
];

interface KeyRow {
  id: string;
  name: string;
  user_path: string | null;
  key_hash: string;
  max_priority: Priority;
  created_at: number;
}

interface RuleRow {
  scope: Scope;
  subject: string;
  period_seconds: number;
  max_requests: number | null;
  max_tokens: number | null;
  per_child: number;
  source: 'manual' | 'config';
  created_at: number;
  updated_at: number;
}

interface BucketRow {
  start_ms: number;
  key: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd: number;
  cache_hits: number;
}

interface CounterRow {
  counter_key: string;
  period_seconds: number;
  window_start: number;
  requests_previous: number;
  requests_current: number;
  tokens_previous: number;
  tokens_current: number;
}

interface SummaryRow {
  provider: string;
  model: string;
  requests: number;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  total_tokens: number | null;
  cached_prompt_tokens: number | null;
  cost_usd: number | null;
  cached_requests: number | null;
  estimated_requests: number | null;
}

interface BudgetRow {
  user_path: string;
  period: string;
  max_usd: number;
  source: 'manual' | 'config';
  created_at: number;
  updated_at: number;
}

interface Statements {
  insertKey: Statement<[string, string, string | null, string, Priority, number]>;
  listKeys: Statement<[], KeyRow>;
  deleteKey: Statement<[string]>;
  listRules: Statement<[], RuleRow>;
  upsertRule: Statement<
    [string, string, string, number, number | null, number | null, number, string, number, number]
  >;
  deleteRule: Statement<[string, string, number]>;
  deleteConfigRules: Statement<[]>;
  listCounters: Statement<[], CounterRow>;
  saveCounter: Statement<[string, number, number, number, number, number, number]>;
  deleteCounter: Statement<[string]>;
  deleteCountersUnder: Statement<[string, string]>;
  deleteAllCounters: Statement<[]>;
  summarizeAll: Statement<[number, number], SummaryRow>;
  summarizeSubtree: Statement<[string, string, number, number], SummaryRow>;
}

export interface SqliteStorageOptions {
  /** Database file; its directory is created. `:memory:` gives a private in-memory database. */
  path: string;
}

const USAGE_COLUMNS =
  'ts, user_path, provider, model, endpoint, prompt_tokens, completion_tokens, total_tokens, cached_prompt_tokens, cost_usd, cached, status, latency_ms, api_key_id, request_id, estimated';
/** Rows per INSERT statement: a multi-row statement is bound and stepped once for many rows. */
const USAGE_ROWS_PER_STATEMENT = 32;

const SUMMARY_COLUMNS = `
  provider, model,
  COUNT(*) AS requests,
  SUM(prompt_tokens) AS prompt_tokens,
  SUM(completion_tokens) AS completion_tokens,
  SUM(total_tokens) AS total_tokens,
  SUM(cached_prompt_tokens) AS cached_prompt_tokens,
  SUM(cost_usd) AS cost_usd,
  SUM(cached) AS cached_requests,
  SUM(estimated) AS estimated_requests`;

// SQLite's = is case-sensitive but LIKE folds ASCII case; lower() on both sides of = keeps
// the two halves consistent (rule matching is case-insensitive too).
const SUBTREE = `(lower(user_path) = lower(?) OR user_path LIKE ? ESCAPE '\\')`;

const BUDGET_COLUMNS = 'user_path, period, max_usd, source, created_at, updated_at';
// created_at is left alone on conflict: the budget's history starts at its first write.
const UPSERT_BUDGET = `
  INSERT INTO budgets (user_path, path_key, period, max_usd, source, created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (path_key, period) DO UPDATE SET
    user_path = excluded.user_path,
    max_usd = excluded.max_usd,
    source = excluded.source,
    updated_at = excluded.updated_at`;

/** How often another process's changes are looked for (see watchApiKeys). */
const SQLITE_WATCH_INTERVAL_MS = 1000;

export class SqliteStorage implements Storage {
  private readonly db: Db;
  private stmts: Statements | undefined;
  /** Statements prepared on first use, cached by their text (files, batches, usage inserts). */
  private readonly cachedStmts = new Map<string, Statement>();
  /** One transaction per batch: one commit instead of one per record. */
  private readonly insertUsageRows: (records: readonly UsageRecord[]) => void;
  private readonly writeCounterRows: (counters: readonly SavedCounter[], removals: CounterRemovals) => void;

  constructor(options: SqliteStorageOptions) {
    const inMemory = options.path === ':memory:' || options.path === '';
    if (!inMemory) mkdirSync(dirname(options.path), { recursive: true });
    this.db = new Database(options.path);
    // WAL lets readers run beside the single writer; NORMAL is durable across process crashes
    // in WAL mode (only an OS crash can lose the last commits), which fits usage records.
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    // Another process may hold the write lock on the same file for a moment: wait, don't fail.
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('foreign_keys = ON');
    this.insertUsageRows = this.db.transaction((records: readonly UsageRecord[]) => {
      for (let first = 0; first < records.length; first += USAGE_ROWS_PER_STATEMENT) {
        const rows = records.slice(first, first + USAGE_ROWS_PER_STATEMENT);
        this.usageInsert(rows.length).run(...rows.flatMap(usageParams));
      }
    });
    this.writeCounterRows = this.db.transaction((counters: readonly SavedCounter[], removals: CounterRemovals) => {
      const stmts = this.s();
      if (removals.all) stmts.deleteAllCounters.run();
      for (const key of removals.keys ?? []) stmts.deleteCounter.run(storedCounterKey(key));
      for (const prefix of removals.prefixes ?? []) stmts.deleteCountersUnder.run(storedCounterKey(prefix), storedCounterKey(prefix));
      for (const c of counters) {
        stmts.saveCounter.run(storedCounterKey(c.key), c.periodSeconds, c.windowStart, c.requestsPrevious, c.requestsCurrent, c.tokensPrevious, c.tokensCurrent);
      }
    });
  }

  async migrate(): Promise<void> {
    this.db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY,
      applied_at INTEGER NOT NULL
    )`);
    const applied = this.db.prepare<[number], { version: number }>(
      'SELECT version FROM schema_migrations WHERE version = ?',
    );
    const record = this.db.prepare<[number, number]>(
      'INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)',
    );
    for (const migration of MIGRATIONS) {
      // IMMEDIATE takes the write lock before the check, so two processes starting together
      // cannot both apply the same migration.
      this.db
        .transaction(() => {
          if (applied.get(migration.version)) return;
          this.db.exec(migration.sql);
          record.run(migration.version, Date.now());
        })
        .immediate();
    }
    this.prepare();
  }

  /** Highest applied migration version (0 before `migrate()`). */
  async schemaVersion(): Promise<number> {
    const exists = this.db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
      .get();
    if (!exists) return 0;
    const row = this.db
      .prepare<[], { v: number | null }>('SELECT MAX(version) AS v FROM schema_migrations')
      .get();
    return row?.v ?? 0;
  }

  /** Number of applied migrations; lets tests prove that re-running applies nothing twice. */
  async appliedMigrationCount(): Promise<number> {
    const row = this.db
      .prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM schema_migrations')
      .get();
    return row?.n ?? 0;
  }

  async insertApiKey(key: ApiKeyRecord): Promise<void> {
    this.s().insertKey.run(key.id, key.name, key.userPath, key.keyHash, key.maxPriority, key.createdAt.getTime());
  }

  async listApiKeys(): Promise<ApiKeyRecord[]> {
    return this.s()
      .listKeys.all()
      .map((row) => ({
        id: row.id,
        name: row.name,
        userPath: row.user_path,
        keyHash: row.key_hash,
        maxPriority: row.max_priority,
        createdAt: new Date(row.created_at),
      }));
  }

  async deleteApiKey(id: string): Promise<boolean> {
    return this.s().deleteKey.run(id).changes > 0;
  }

  /**
   * SQLite has no notifications. `PRAGMA data_version` changes when another connection (another
   * process sharing the file) has committed anything; it costs no I/O, so it is read every second
   * and the listener called when it moved.
   */
  async watchApiKeys(listener: () => void): Promise<() => Promise<void>> {
    const version = (): number => this.db.pragma('data_version', { simple: true }) as number;
    let seen = version();
    const timer = setInterval(() => {
      if (!this.db.open) return;
      const now = version();
      if (now === seen) return;
      seen = now;
      listener();
    }, SQLITE_WATCH_INTERVAL_MS);
    timer.unref();
    return async () => clearInterval(timer);
  }

  async listRules(): Promise<RuleDefinition[]> {
    return this.s().listRules.all().map(ruleFromRow);
  }

  async upsertRule(rule: RuleDefinition): Promise<void> {
    this.writeRule(rule);
  }

  async deleteRule(key: RuleKey): Promise<boolean> {
    return this.s().deleteRule.run(key.scope, key.subject.toLowerCase(), key.periodSeconds)
      .changes > 0;
  }

  async replaceConfigRules(rules: readonly RuleDefinition[]): Promise<RuleKey[]> {
    const stmts = this.s();
    return this.db
      .transaction(() => {
        const plan = planConfigReseed(stmts.listRules.all().map(ruleFromRow), rules);
        stmts.deleteConfigRules.run();
        for (const rule of plan.inserts) this.writeRule(rule);
        return plan.skipped;
      })
      .immediate();
  }

  async listCounters(): Promise<SavedCounter[]> {
    return this.s().listCounters.all().map((row) => ({
      key: counterKeyFromStored(row.counter_key),
      periodSeconds: row.period_seconds,
      windowStart: row.window_start,
      requestsPrevious: row.requests_previous,
      requestsCurrent: row.requests_current,
      tokensPrevious: row.tokens_previous,
      tokensCurrent: row.tokens_current,
    }));
  }

  async writeCounters(counters: readonly SavedCounter[], removals: CounterRemovals = {}): Promise<void> {
    this.s();
    this.writeCounterRows(counters, removals);
  }

  async insertUsage(records: readonly UsageRecord[]): Promise<void> {
    this.s();
    if (records.length === 0) return;
    try {
      this.insertUsageRows(records);
    } catch (err) {
      throw refusedValues(err) ? new UsageRejectedError(err) : err;
    }
  }

  async summarizeUsage(query: UsageQuery): Promise<UsageSummaryRow[]> {
    const subtree = subtreeMatch(query.userPathPrefix);
    const from = query.from.getTime();
    const to = query.to.getTime();
    const rows =
      subtree === undefined
        ? this.s().summarizeAll.all(from, to)
        : this.s().summarizeSubtree.all(subtree.exact, subtree.below, from, to);
    return rows.map((row) => ({
      provider: row.provider,
      model: row.model,
      requests: row.requests,
      promptTokens: row.prompt_tokens ?? 0,
      completionTokens: row.completion_tokens ?? 0,
      totalTokens: row.total_tokens ?? 0,
      cachedPromptTokens: row.cached_prompt_tokens ?? 0,
      costUsd: row.cost_usd ?? 0,
      cachedRequests: row.cached_requests ?? 0,
      estimatedRequests: row.estimated_requests ?? 0,
    }));
  }

  async bucketUsage(query: UsageBucketQuery): Promise<UsageBucket[]> {
    const bucketMs = query.bucketSeconds * 1000;
    const rows = this.cachedStmt(
      `SELECT CAST(ts / ? AS INTEGER) * ? AS start_ms, ${USAGE_GROUP_KEY_SQL[query.groupBy]} AS key,
         COUNT(*) AS requests, SUM(prompt_tokens) AS prompt_tokens,
         SUM(completion_tokens) AS completion_tokens, SUM(cost_usd) AS cost_usd, SUM(cached) AS cache_hits
       FROM usage_records WHERE ts >= ? AND ts < ?
       GROUP BY start_ms, key ORDER BY start_ms, key`,
    ).all(bucketMs, bucketMs, query.from.getTime(), query.to.getTime()) as BucketRow[];
    return rows.map((row) => ({
      start: new Date(row.start_ms),
      key: row.key,
      requests: row.requests,
      promptTokens: row.prompt_tokens,
      completionTokens: row.completion_tokens,
      costUsd: row.cost_usd,
      cacheHits: row.cache_hits,
    }));
  }

  async sumCost(queries: readonly UsageQuery[]): Promise<number[]> {
    const all = this.cachedStmt('SELECT COALESCE(SUM(cost_usd), 0) AS cost FROM usage_records WHERE ts >= ? AND ts < ?');
    const underPath = this.cachedStmt(`SELECT COALESCE(SUM(cost_usd), 0) AS cost FROM usage_records WHERE ts >= ? AND ts < ? AND ${SUBTREE}`);
    // One read transaction: every sum sees the same snapshot.
    return this.db.transaction(() =>
      queries.map((query) => {
        const subtree = subtreeMatch(query.userPathPrefix);
        const window = [query.from.getTime(), query.to.getTime()];
        const row = (subtree === undefined ? all.get(...window) : underPath.get(...window, subtree.exact, subtree.below)) as { cost: number };
        return row.cost;
      }),
    )();
  }

  async listBudgets(): Promise<BudgetDefinition[]> {
    return this.listBudgetRows();
  }

  async upsertBudget(budget: BudgetDefinition): Promise<void> {
    this.cachedStmt(UPSERT_BUDGET).run(...budgetParams(budget));
  }

  async deleteBudget(key: BudgetKey): Promise<boolean> {
    return this.cachedStmt('DELETE FROM budgets WHERE path_key = ? AND period = ?').run(key.userPath.toLowerCase(), key.period).changes > 0;
  }

  async replaceConfigBudgets(budgets: readonly BudgetDefinition[]): Promise<BudgetKey[]> {
    this.s();
    return this.db
      .transaction(() => {
        const plan = planBudgetReseed(this.listBudgetRows(), budgets);
        this.cachedStmt("DELETE FROM budgets WHERE source = 'config'").run();
        for (const budget of plan.inserts) this.cachedStmt(UPSERT_BUDGET).run(...budgetParams(budget));
        return plan.skipped;
      })
      .immediate();
  }

  async insertFile(file: StoredFile): Promise<void> {
    const marks = FILE_COLUMNS.split(',').map(() => '?').join(', ');
    this.cachedStmt(`INSERT INTO files (${FILE_COLUMNS}) VALUES (${marks})`).run(...fileParams(file, epochMs));
  }

  async getFile(id: string): Promise<StoredFile | undefined> {
    const row = this.cachedStmt(`SELECT ${FILE_COLUMNS} FROM files WHERE id = ?`).get(id) as FileRow<number> | undefined;
    return row === undefined ? undefined : fileFromRow(row, fromEpochMs);
  }

  async deleteFile(id: string): Promise<boolean> {
    return this.cachedStmt('DELETE FROM files WHERE id = ?').run(id).changes > 0;
  }

  async fileUsage(userPath: string, at: Date): Promise<FileUsage> {
    const row = this.cachedStmt(
      'SELECT COUNT(*) AS files, COALESCE(SUM(bytes), 0) AS bytes FROM files WHERE lower(user_path) = lower(?) AND (expires_at IS NULL OR expires_at > ?)',
    ).get(userPath, at.getTime()) as { files: number; bytes: number };
    return { files: row.files, bytes: row.bytes };
  }

  async deleteExpiredFiles(at: Date): Promise<number> {
    return this.cachedStmt('DELETE FROM files WHERE expires_at <= ?').run(at.getTime()).changes;
  }

  async insertBatch(batch: BatchRecord): Promise<void> {
    const marks = BATCH_COLUMNS.split(',').map(() => '?').join(', ');
    this.cachedStmt(`INSERT INTO batches (${BATCH_COLUMNS}) VALUES (${marks})`).run(...batchParams(batch, epochMs));
  }

  async updateBatch(batch: BatchRecord): Promise<boolean> {
    const [id, ...rest] = batchParams(batch, epochMs);
    const set = BATCH_COLUMNS.split(',').slice(1).map((c) => `${c.trim()} = ?`).join(', ');
    return this.cachedStmt(`UPDATE batches SET ${set} WHERE id = ?`).run(...rest, id).changes > 0;
  }

  async getBatch(id: string): Promise<BatchRecord | undefined> {
    const row = this.cachedStmt(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = ?`).get(id) as BatchRow<number> | undefined;
    return row === undefined ? undefined : batchFromRow(row, fromEpochMs);
  }

  async listBatches(query: BatchListQuery): Promise<BatchRecord[]> {
    const subtree = subtreeMatch(query.userPathPrefix);
    const where: string[] = [];
    const params: unknown[] = [];
    if (subtree !== undefined) {
      where.push(SUBTREE);
      params.push(subtree.exact, subtree.below);
    }
    if (query.after !== undefined) {
      // An unknown cursor pages from nothing rather than from the start.
      where.push('seq < COALESCE((SELECT seq FROM batches WHERE id = ?), 0)');
      params.push(query.after);
    }
    const sql = `SELECT ${BATCH_COLUMNS} FROM batches ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`;
    const rows = this.cachedStmt(sql).all(...params, query.limit) as BatchRow<number>[];
    return rows.map((row) => batchFromRow(row, fromEpochMs));
  }

  /** A local file: it answers as long as it is open. */
  // ---- refusal counts (RefusalStorage)

  async addRefusals(counts: readonly RefusalCount[]): Promise<void> {
    if (counts.length === 0) return;
    const add = this.cachedStmt(
      `INSERT INTO refusals (${REFUSAL_KEY_COLUMNS}, count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (${REFUSAL_KEY_COLUMNS}) DO UPDATE SET count = count + excluded.count`,
    );
    this.db.transaction(() => {
      for (const c of counts) add.run(c.minuteMs, c.userPath, c.provider, c.model, c.scope, c.subject, c.period, c.count);
    })();
  }

  async bucketRefusals(query: UsageBucketQuery): Promise<RefusalBucket[]> {
    const bucketMs = query.bucketSeconds * 1000;
    const rows = this.cachedStmt(
      `SELECT CAST(minute / ? AS INTEGER) * ? AS start_ms, ${REFUSAL_GROUP_KEY_SQL[query.groupBy]} AS key, SUM(count) AS refused
       FROM refusals WHERE minute >= ? AND minute < ?
       GROUP BY start_ms, key ORDER BY start_ms, key`,
    ).all(bucketMs, bucketMs, query.from.getTime(), query.to.getTime()) as Array<{ start_ms: number; key: string; refused: number }>;
    return rows.map((row) => ({ start: new Date(row.start_ms), key: row.key, refused: row.refused }));
  }

  async ping(): Promise<void> {
    this.cachedStmt('SELECT 1').get();
  }

  /** Idempotent. */
  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  private listBudgetRows(): BudgetDefinition[] {
    const rows = this.cachedStmt(`SELECT ${BUDGET_COLUMNS} FROM budgets ORDER BY path_key, period`).all() as BudgetRow[];
    return rows.map((row) => ({
      userPath: row.user_path,
      period: row.period,
      maxUsd: row.max_usd,
      source: row.source,
      createdAt: new Date(row.created_at),
      updatedAt: new Date(row.updated_at),
    }));
  }

  private cachedStmt(sql: string): Statement {
    this.s();
    let stmt = this.cachedStmts.get(sql);
    if (stmt === undefined) {
      stmt = this.db.prepare(sql);
      this.cachedStmts.set(sql, stmt);
    }
    return stmt;
  }

  private usageInsert(rows: number): Statement {
    const row = `(${USAGE_COLUMNS.split(',').map(() => '?').join(', ')})`;
    return this.cachedStmt(`INSERT INTO usage_records (${USAGE_COLUMNS}) VALUES ${new Array(rows).fill(row).join(', ')}`);
  }

  private writeRule(rule: RuleDefinition): void {
    this.s().upsertRule.run(
      rule.scope,
      rule.subject,
      rule.subject.toLowerCase(),
      rule.periodSeconds,
      rule.maxRequests ?? null,
      rule.maxTokens ?? null,
      rule.perChild ? 1 : 0,
      rule.source,
      rule.createdAt.getTime(),
      rule.updatedAt.getTime(),
    );
  }

  private s(): Statements {
    if (!this.stmts) throw new Error('SqliteStorage: call migrate() before using the storage');
    return this.stmts;
  }

  /** Statements are prepared once, after the schema exists (preparing needs the tables). */
  private prepare(): void {
    if (this.stmts) return;
    const db = this.db;
    this.stmts = {
      insertKey: db.prepare(
        'INSERT INTO api_keys (id, name, user_path, key_hash, max_priority, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      listKeys: db.prepare(
        'SELECT id, name, user_path, key_hash, max_priority, created_at FROM api_keys ORDER BY created_at, id',
      ),
      deleteKey: db.prepare('DELETE FROM api_keys WHERE id = ?'),
      listRules: db.prepare(
        `SELECT scope, subject, period_seconds, max_requests, max_tokens, per_child, source, created_at, updated_at
         FROM rate_limit_rules ORDER BY scope, subject_key, period_seconds`,
      ),
      // created_at is left alone on conflict: the rule's history starts at its first write.
      upsertRule: db.prepare(
        `INSERT INTO rate_limit_rules
           (scope, subject, subject_key, period_seconds, max_requests, max_tokens, per_child, source, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (scope, subject_key, period_seconds) DO UPDATE SET
           subject = excluded.subject,
           max_requests = excluded.max_requests,
           max_tokens = excluded.max_tokens,
           per_child = excluded.per_child,
           source = excluded.source,
           updated_at = excluded.updated_at`,
      ),
      deleteRule: db.prepare(
        'DELETE FROM rate_limit_rules WHERE scope = ? AND subject_key = ? AND period_seconds = ?',
      ),
      deleteConfigRules: db.prepare("DELETE FROM rate_limit_rules WHERE source = 'config'"),
      listCounters: db.prepare(`SELECT ${COUNTER_COLUMNS} FROM rate_limit_counters ORDER BY window_start, counter_key`),
      saveCounter: db.prepare(`INSERT INTO rate_limit_counters (${COUNTER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) ${COUNTER_REPLACE}`),
      deleteCounter: db.prepare('DELETE FROM rate_limit_counters WHERE counter_key = ?'),
      deleteCountersUnder: db.prepare('DELETE FROM rate_limit_counters WHERE substr(counter_key, 1, length(?)) = ?'),
      deleteAllCounters: db.prepare('DELETE FROM rate_limit_counters'),
      summarizeAll: db.prepare(
        `SELECT ${SUMMARY_COLUMNS} FROM usage_records
         WHERE ts >= ? AND ts < ?
         GROUP BY provider, model ORDER BY provider, model`,
      ),
      summarizeSubtree: db.prepare(
        `SELECT ${SUMMARY_COLUMNS} FROM usage_records
         WHERE ${SUBTREE}
           AND ts >= ? AND ts < ?
         GROUP BY provider, model ORDER BY provider, model`,
      ),
    };
  }
}

const epochMs = (d: Date): number => d.getTime();
const fromEpochMs = (ms: number): Date => new Date(ms);

/** Parameters in USAGE_COLUMNS order. */
function usageParams(r: UsageRecord): Array<string | number | null> {
  return [
    r.timestampMs, r.userPath, r.provider, r.model, r.endpoint, r.promptTokens, r.completionTokens,
    r.totalTokens, r.cachedPromptTokens, r.costUsd, r.cached ? 1 : 0, r.status, Math.round(r.latencyMs), r.apiKeyId,
    r.requestId, r.estimated ? 1 : 0,
  ];
}

/**
 * Whether a failed usage insert was refused for the values it carried (a constraint, a value
 * too big, a type the driver cannot bind), rather than for the database's state (busy, full, I/O).
 */
function refusedValues(err: unknown): boolean {
  if (err instanceof TypeError || err instanceof RangeError) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CONSTRAINT') || code === 'SQLITE_MISMATCH' || code === 'SQLITE_TOOBIG');
}

function budgetParams(b: BudgetDefinition): Array<string | number> {
  return [b.userPath, b.userPath.toLowerCase(), b.period, b.maxUsd, b.source, b.createdAt.getTime(), b.updatedAt.getTime()];
}

function ruleFromRow(row: RuleRow): RuleDefinition {
  return {
    scope: row.scope,
    subject: row.subject,
    periodSeconds: row.period_seconds,
    maxRequests: row.max_requests ?? undefined,
    maxTokens: row.max_tokens ?? undefined,
    ...(row.per_child === 1 && { perChild: true as const }),
    source: row.source,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}
