/**
 * PostgreSQL storage (pg Pool). Same schema and semantics as the SQLite implementation; times
 * are `timestamptz` (pg returns Dates), counters `bigint` (pg returns strings, converted here).
 * Every query is parameterised.
 */

import pg from 'pg';
import type { PoolClient } from 'pg';
import { ChannelListener } from './pg-listener.ts';
import type { BudgetDefinition, BudgetKey } from '../budgets/types.ts';
import { subtreeMatch } from '../user-path/user-path.ts';
import { REFUSAL_GROUP_KEY_SQL, REFUSAL_KEY_COLUMNS } from './refusals.ts';
import { COUNTER_COLUMNS, COUNTER_REPLACE, USAGE_GROUP_KEY_SQL, counterKeyFromStored, planBudgetReseed, planConfigReseed, storedCounterKey } from './shared.ts';
import { BATCH_COLUMNS, FILE_COLUMNS, batchFromRow, batchParams, fileFromRow, fileParams } from './object-rows.ts';
import type { BatchRow, FileRow } from './object-rows.ts';
import type { Priority, RuleDefinition, RuleKey, Scope } from '../ratelimit/types.ts';
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
        id text PRIMARY KEY,
        name text NOT NULL,
        user_path text,
        key_hash text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL
      );
      CREATE TABLE rate_limit_rules (
        scope text NOT NULL CHECK (scope IN ('user_path', 'provider', 'model')),
        subject text NOT NULL,
        subject_key text NOT NULL,
        period_seconds integer NOT NULL,
        max_requests bigint,
        max_tokens bigint,
        source text NOT NULL CHECK (source IN ('manual', 'config')),
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (scope, subject_key, period_seconds)
      );
      CREATE TABLE usage_records (
        id bigserial PRIMARY KEY,
        ts timestamptz NOT NULL,
        user_path text NOT NULL,
        provider text NOT NULL,
        model text NOT NULL,
        endpoint text NOT NULL,
        prompt_tokens bigint NOT NULL,
        completion_tokens bigint NOT NULL,
        total_tokens bigint NOT NULL,
        cached boolean NOT NULL,
        status integer NOT NULL,
        latency_ms integer NOT NULL,
        api_key_id text
      );
      CREATE INDEX usage_records_user_path_ts ON usage_records (user_path, ts);
    `,
  },
  {
    // Files and batches (realtime-and-batch). Bytes live in the row: files are capped by the body limit.
    version: 2,
    sql: `
      CREATE TABLE files (
        id text PRIMARY KEY,
        user_path text NOT NULL,
        purpose text NOT NULL,
        filename text NOT NULL,
        bytes bigint NOT NULL,
        created_at timestamptz NOT NULL,
        content bytea,
        provider text,
        provider_file_id text
      );
      CREATE TABLE batches (
        seq bigserial PRIMARY KEY,
        id text NOT NULL UNIQUE,
        user_path text NOT NULL,
        api_key_id text,
        provider text NOT NULL,
        model text NOT NULL,
        endpoint text NOT NULL,
        input_file_id text NOT NULL,
        completion_window text NOT NULL,
        provider_batch_id text,
        status text NOT NULL,
        output_file_id text,
        error_file_id text,
        request_counts text NOT NULL,
        metadata text,
        errors text,
        times text NOT NULL,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
      );
      CREATE INDEX batches_user_path ON batches (user_path);
    `,
  },
  {
    // Budgets: request costs on usage records, and the budgets themselves. The (ts) index
    // covers the budget refresh's sums over a period (read every few seconds).
    version: 3,
    sql: `
      ALTER TABLE usage_records ADD COLUMN cached_prompt_tokens bigint NOT NULL DEFAULT 0;
      ALTER TABLE usage_records ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;
      CREATE INDEX usage_records_ts_cost ON usage_records (ts) INCLUDE (user_path, cost_usd);
      CREATE TABLE budgets (
        user_path text NOT NULL,
        path_key text NOT NULL,
        period text NOT NULL,
        max_usd double precision NOT NULL,
        source text NOT NULL CHECK (source IN ('manual', 'config')),
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (path_key, period)
      );
    `,
  },
  {
    // Per-child rules, and the windows of the in-memory counters kept across restarts.
    version: 4,
    sql: `
      ALTER TABLE rate_limit_rules ADD COLUMN per_child boolean NOT NULL DEFAULT false;
      CREATE TABLE rate_limit_counters (
        counter_key text PRIMARY KEY,
        period_seconds integer NOT NULL,
        window_start bigint NOT NULL,
        requests_previous bigint NOT NULL,
        requests_current bigint NOT NULL,
        tokens_previous bigint NOT NULL,
        tokens_current bigint NOT NULL
      );
    `,
  },
  {
    // Which request a usage record belongs to, and whether its tokens are an estimate.
    version: 5,
    sql: `
      ALTER TABLE usage_records ADD COLUMN request_id text;
      ALTER TABLE usage_records ADD COLUMN estimated boolean NOT NULL DEFAULT false;
    `,
  },
  {
    // Files expire, and each user path's live files are counted against its quota. Files stored
    // before this version expire 30 days after their upload (the default files.ttl_seconds).
    version: 6,
    sql: `
      ALTER TABLE files ADD COLUMN expires_at timestamptz;
      UPDATE files SET expires_at = created_at + interval '30 days';
      CREATE INDEX files_expires_at ON files (expires_at);
      CREATE INDEX files_user_path ON files (lower(user_path));
    `,
  },
  {
    // The highest priority a managed key's requests are served at; keys created before it: normal.
    version: 7,
    sql: `
      ALTER TABLE api_keys ADD COLUMN max_priority text NOT NULL DEFAULT 'normal' CHECK (max_priority IN ('high', 'normal', 'low'));
    `,
  },
  {
    // Requests refused with a 429, counted per minute, user path, asked-for provider and model,
    // and rule (src/storage/refusals.ts).
    version: 8,
    sql: `
      CREATE TABLE refusals (
        minute timestamptz NOT NULL,
        user_path text NOT NULL,
        provider text NOT NULL,
        model text NOT NULL,
        scope text NOT NULL CHECK (scope IN ('user_path', 'provider', 'model', 'budget')),
        subject text NOT NULL,
        period text NOT NULL,
        count bigint NOT NULL,
        PRIMARY KEY (${REFUSAL_KEY_COLUMNS})
      );
    `,
  },
];

/** Arbitrary constant for pg_advisory_xact_lock: serialises migrations across processes. */
const MIGRATION_LOCK_ID = 7_301_944_021;

interface KeyRow {
  id: string;
  name: string;
  user_path: string | null;
  key_hash: string;
  max_priority: Priority;
  created_at: Date;
}

interface RuleRow {
  scope: Scope;
  subject: string;
  period_seconds: number;
  max_requests: string | null;
  max_tokens: string | null;
  per_child: boolean;
  source: 'manual' | 'config';
  created_at: Date;
  updated_at: Date;
}

interface BucketRow {
  start_s: string;
  key: string;
  requests: string;
  prompt_tokens: string;
  completion_tokens: string;
  cost_usd: number;
  cache_hits: string;
}

interface CounterRow {
  counter_key: string;
  period_seconds: number;
  window_start: string;
  requests_previous: string;
  requests_current: string;
  tokens_previous: string;
  tokens_current: string;
}

interface SummaryRow {
  provider: string;
  model: string;
  requests: string;
  prompt_tokens: string | null;
  completion_tokens: string | null;
  total_tokens: string | null;
  cached_prompt_tokens: string | null;
  cost_usd: number | null;
  cached_requests: string | null;
  estimated_requests: string | null;
}

interface BudgetRow {
  user_path: string;
  period: string;
  max_usd: number;
  source: 'manual' | 'config';
  created_at: Date;
  updated_at: Date;
}

export interface PostgresStorageOptions {
  /** Connection string, e.g. postgres://user@host:5432/db. */
  url: string;
  /** Pool size; storage is off the hot path, so a few connections suffice. */
  maxConnections?: number;
  /**
   * Errors raised by idle pooled connections (server restart, network drop). pg emits them as
   * 'error' events, which would crash the process if nobody listened.
   */
  onError?: (err: Error) => void;
}

const RULE_COLUMNS =
  'scope, subject, period_seconds, max_requests, max_tokens, per_child, source, created_at, updated_at';

const UPSERT_RULE = `
  INSERT INTO rate_limit_rules
    (scope, subject, subject_key, period_seconds, max_requests, max_tokens, per_child, source, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
  ON CONFLICT (scope, subject_key, period_seconds) DO UPDATE SET
    subject = excluded.subject,
    max_requests = excluded.max_requests,
    max_tokens = excluded.max_tokens,
    per_child = excluded.per_child,
    source = excluded.source,
    updated_at = excluded.updated_at`;

// ORDER BY ... COLLATE "C" everywhere: byte order, the same as SQLite's BINARY collation, so
// both implementations list in the same order whatever the database locale.
const SUMMARY_SELECT = `
  SELECT provider, model,
    COUNT(*) AS requests,
    SUM(prompt_tokens) AS prompt_tokens,
    SUM(completion_tokens) AS completion_tokens,
    SUM(total_tokens) AS total_tokens,
    SUM(cached_prompt_tokens) AS cached_prompt_tokens,
    SUM(cost_usd) AS cost_usd,
    COUNT(*) FILTER (WHERE cached) AS cached_requests,
    COUNT(*) FILTER (WHERE estimated) AS estimated_requests
  FROM usage_records`;

// ILIKE/lower(): case-insensitive like rule matching and like the SQLite implementation. A null
// prefix covers every path.
const SUM_COST = `
  SELECT q.i, COALESCE(SUM(u.cost_usd), 0) AS cost
  FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS q(prefix, pattern, from_ts, to_ts, i)
  LEFT JOIN usage_records u
    ON u.ts >= q.from_ts AND u.ts < q.to_ts
   AND (q.prefix IS NULL OR lower(u.user_path) = lower(q.prefix) OR u.user_path ILIKE q.pattern ESCAPE '\\')
  GROUP BY q.i ORDER BY q.i`;

const BUDGET_COLUMNS = 'user_path, period, max_usd, source, created_at, updated_at';
// created_at is left alone on conflict: the budget's history starts at its first write.
const UPSERT_BUDGET = `
  INSERT INTO budgets (user_path, path_key, period, max_usd, source, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7)
  ON CONFLICT (path_key, period) DO UPDATE SET
    user_path = excluded.user_path,
    max_usd = excluded.max_usd,
    source = excluded.source,
    updated_at = excluded.updated_at`;

/** Where changes to the managed keys are announced. */
const API_KEYS_CHANNEL = 'floodgate_api_keys';

export class PostgresStorage implements Storage {
  private readonly pool: pg.Pool;
  private readonly url: string;
  private readonly onError: (err: Error) => void;
  private closed = false;

  constructor(options: PostgresStorageOptions) {
    this.url = options.url;
    this.pool = new pg.Pool({
      connectionString: options.url,
      max: options.maxConnections ?? 5,
    });
    this.onError = options.onError ?? (() => {});
    this.pool.on('error', (err) => this.onError(err));
  }

  async migrate(): Promise<void> {
    for (const migration of MIGRATIONS) {
      await this.transaction(async (client) => {
        // The lock is held to the end of this transaction, so concurrent starters queue here
        // instead of racing on CREATE TABLE.
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_ID]);
        await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
          version integer PRIMARY KEY,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
        const done = await client.query('SELECT 1 FROM schema_migrations WHERE version = $1', [
          migration.version,
        ]);
        if (done.rowCount) return;
        await client.query(migration.sql);
        await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [
          migration.version,
        ]);
      });
    }
  }

  /** Highest applied migration version (0 before `migrate()`). */
  async schemaVersion(): Promise<number> {
    const exists = await this.pool.query<{ t: string | null }>(
      "SELECT to_regclass('schema_migrations')::text AS t",
    );
    if (!exists.rows[0]?.t) return 0;
    const res = await this.pool.query<{ v: number | null }>(
      'SELECT MAX(version) AS v FROM schema_migrations',
    );
    return res.rows[0]?.v ?? 0;
  }

  /** Number of applied migrations; lets tests prove that re-running applies nothing twice. */
  async appliedMigrationCount(): Promise<number> {
    const res = await this.pool.query<{ n: string }>('SELECT COUNT(*) AS n FROM schema_migrations');
    return Number(res.rows[0]?.n ?? 0);
  }

  // Every change to the keys is announced on API_KEYS_CHANNEL in its own statement, so the
  // announcement is sent exactly when the change commits (see watchApiKeys).
  async insertApiKey(key: ApiKeyRecord): Promise<void> {
    await this.pool.query(
      `WITH inserted AS (
         INSERT INTO api_keys (id, name, user_path, key_hash, max_priority, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id
       ) SELECT pg_notify('${API_KEYS_CHANNEL}', id) FROM inserted`,
      [key.id, key.name, key.userPath, key.keyHash, key.maxPriority, key.createdAt],
    );
  }

  async listApiKeys(): Promise<ApiKeyRecord[]> {
    const res = await this.pool.query<KeyRow>(
      'SELECT id, name, user_path, key_hash, max_priority, created_at FROM api_keys ORDER BY created_at, id COLLATE "C"',
    );
    return res.rows.map((row) => ({
      id: row.id,
      name: row.name,
      userPath: row.user_path,
      keyHash: row.key_hash,
      maxPriority: row.max_priority,
      createdAt: row.created_at,
    }));
  }

  async deleteApiKey(id: string): Promise<boolean> {
    const res = await this.pool.query(
      `WITH deleted AS (DELETE FROM api_keys WHERE id = $1 RETURNING id) SELECT pg_notify('${API_KEYS_CHANNEL}', id) FROM deleted`,
      [id],
    );
    return (res.rowCount ?? 0) > 0;
  }

  /** LISTEN on the channel every key change is announced on, on a connection of its own. */
  async watchApiKeys(listener: () => void): Promise<() => Promise<void>> {
    const channel = new ChannelListener({ url: this.url, channel: API_KEYS_CHANNEL, onNotify: listener, onError: this.onError });
    await channel.start();
    return () => channel.stop();
  }

  async listRules(): Promise<RuleDefinition[]> {
    return listRulesWith(this.pool);
  }

  async upsertRule(rule: RuleDefinition): Promise<void> {
    await this.pool.query(UPSERT_RULE, ruleParams(rule));
  }

  async deleteRule(key: RuleKey): Promise<boolean> {
    const res = await this.pool.query(
      'DELETE FROM rate_limit_rules WHERE scope = $1 AND subject_key = $2 AND period_seconds = $3',
      [key.scope, key.subject.toLowerCase(), key.periodSeconds],
    );
    return (res.rowCount ?? 0) > 0;
  }

  async replaceConfigRules(rules: readonly RuleDefinition[]): Promise<RuleKey[]> {
    return this.transaction(async (client) => {
      // Lock the table so a concurrent admin write cannot slip between the read and the writes
      // (readers are not blocked by this mode).
      await client.query('LOCK TABLE rate_limit_rules IN SHARE ROW EXCLUSIVE MODE');
      const plan = planConfigReseed(await listRulesWith(client), rules);
      await client.query("DELETE FROM rate_limit_rules WHERE source = 'config'");
      for (const rule of plan.inserts) await client.query(UPSERT_RULE, ruleParams(rule));
      return plan.skipped;
    });
  }

  async listCounters(): Promise<SavedCounter[]> {
    const res = await this.pool.query<CounterRow>(
      `SELECT ${COUNTER_COLUMNS} FROM rate_limit_counters ORDER BY window_start, counter_key COLLATE "C"`,
    );
    return res.rows.map((row) => ({
      key: counterKeyFromStored(row.counter_key),
      periodSeconds: row.period_seconds,
      windowStart: Number(row.window_start),
      requestsPrevious: Number(row.requests_previous),
      requestsCurrent: Number(row.requests_current),
      tokensPrevious: Number(row.tokens_previous),
      tokensCurrent: Number(row.tokens_current),
    }));
  }

  async writeCounters(counters: readonly SavedCounter[], removals: CounterRemovals = {}): Promise<void> {
    await this.transaction(async (client) => {
      if (removals.all) await client.query('DELETE FROM rate_limit_counters');
      const keys = (removals.keys ?? []).map(storedCounterKey);
      if (keys.length > 0) await client.query('DELETE FROM rate_limit_counters WHERE counter_key = ANY($1::text[])', [keys]);
      for (const prefix of removals.prefixes ?? []) {
        await client.query('DELETE FROM rate_limit_counters WHERE left(counter_key, length($1)) = $1', [storedCounterKey(prefix)]);
      }
      if (counters.length === 0) return;
      const column = <T>(field: (c: SavedCounter) => T): T[] => counters.map(field);
      await client.query(
        `INSERT INTO rate_limit_counters (${COUNTER_COLUMNS})
         SELECT * FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[])
         ${COUNTER_REPLACE}`,
        [
          column((c) => storedCounterKey(c.key)),
          column((c) => c.periodSeconds),
          column((c) => c.windowStart),
          column((c) => c.requestsPrevious),
          column((c) => c.requestsCurrent),
          column((c) => c.tokensPrevious),
          column((c) => c.tokensCurrent),
        ],
      );
    });
  }

  async insertUsage(records: readonly UsageRecord[]): Promise<void> {
    if (records.length === 0) return;
    const column = <T>(field: (r: UsageRecord) => T): T[] => records.map(field);
    // unnest() over one array per column: a single parameterised statement for any batch size,
    // without hitting the 65535-parameter limit of a multi-row VALUES list.
    await this.pool.query(
      `INSERT INTO usage_records
         (ts, user_path, provider, model, endpoint, prompt_tokens, completion_tokens, total_tokens,
          cached_prompt_tokens, cost_usd, cached, status, latency_ms, api_key_id, request_id, estimated)
       SELECT * FROM unnest(
         $1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[],
         $7::bigint[], $8::bigint[], $9::bigint[], $10::double precision[], $11::boolean[],
         $12::integer[], $13::integer[], $14::text[], $15::text[], $16::boolean[])`,
      [
        column((r) => new Date(r.timestampMs)),
        column((r) => r.userPath),
        column((r) => r.provider),
        column((r) => r.model),
        column((r) => r.endpoint),
        column((r) => r.promptTokens),
        column((r) => r.completionTokens),
        column((r) => r.totalTokens),
        column((r) => r.cachedPromptTokens),
        column((r) => r.costUsd),
        column((r) => r.cached),
        column((r) => r.status),
        column((r) => Math.round(r.latencyMs)),
        column((r) => r.apiKeyId),
        column((r) => r.requestId),
        column((r) => r.estimated),
      ],
    ).catch((err: unknown) => {
      throw refusedValues(err) ? new UsageRejectedError(err) : err;
    });
  }

  async summarizeUsage(query: UsageQuery): Promise<UsageSummaryRow[]> {
    const subtree = subtreeMatch(query.userPathPrefix);
    const res =
      subtree === undefined
        ? await this.pool.query<SummaryRow>(
            `${SUMMARY_SELECT} WHERE ts >= $1 AND ts < $2
             GROUP BY provider, model ORDER BY provider COLLATE "C", model COLLATE "C"`,
            [query.from, query.to],
          )
        : // ILIKE/lower(): case-insensitive like rule matching and like the SQLite implementation.
          await this.pool.query<SummaryRow>(
            `${SUMMARY_SELECT}
             WHERE (lower(user_path) = lower($1) OR user_path ILIKE $2 ESCAPE '\\')
               AND ts >= $3 AND ts < $4
             GROUP BY provider, model ORDER BY provider COLLATE "C", model COLLATE "C"`,
            [subtree.exact, subtree.below, query.from, query.to],
          );
    return res.rows.map((row) => ({
      provider: row.provider,
      model: row.model,
      requests: Number(row.requests),
      promptTokens: Number(row.prompt_tokens ?? 0),
      completionTokens: Number(row.completion_tokens ?? 0),
      totalTokens: Number(row.total_tokens ?? 0),
      cachedPromptTokens: Number(row.cached_prompt_tokens ?? 0),
      costUsd: row.cost_usd ?? 0,
      cachedRequests: Number(row.cached_requests ?? 0),
      estimatedRequests: Number(row.estimated_requests ?? 0),
    }));
  }

  async bucketUsage(query: UsageBucketQuery): Promise<UsageBucket[]> {
    // The key carries COLLATE "C" itself: ordering by it is then byte order, as in SQLite.
    const res = await this.pool.query<BucketRow>(
      `SELECT (floor(extract(epoch FROM ts) / $1::integer) * $1::integer)::bigint AS start_s,
         (${USAGE_GROUP_KEY_SQL[query.groupBy]}) COLLATE "C" AS key,
         COUNT(*) AS requests, SUM(prompt_tokens) AS prompt_tokens,
         SUM(completion_tokens) AS completion_tokens, SUM(cost_usd) AS cost_usd, COUNT(*) FILTER (WHERE cached) AS cache_hits
       FROM usage_records WHERE ts >= $2 AND ts < $3
       GROUP BY 1, 2 ORDER BY 1, 2`,
      [query.bucketSeconds, query.from, query.to],
    );
    return res.rows.map((row) => ({
      start: new Date(Number(row.start_s) * 1000),
      key: row.key,
      requests: Number(row.requests),
      promptTokens: Number(row.prompt_tokens),
      completionTokens: Number(row.completion_tokens),
      costUsd: row.cost_usd,
      cacheHits: Number(row.cache_hits),
    }));
  }

  async sumCost(queries: readonly UsageQuery[]): Promise<number[]> {
    if (queries.length === 0) return [];
    const subtrees = queries.map((q) => subtreeMatch(q.userPathPrefix));
    const res = await this.pool.query<{ cost: number }>(SUM_COST, [
      subtrees.map((s) => s?.exact ?? null),
      subtrees.map((s) => s?.below ?? null),
      queries.map((q) => q.from),
      queries.map((q) => q.to),
    ]);
    return res.rows.map((row) => row.cost);
  }

  async listBudgets(): Promise<BudgetDefinition[]> {
    return listBudgetsWith(this.pool);
  }

  async upsertBudget(budget: BudgetDefinition): Promise<void> {
    await this.pool.query(UPSERT_BUDGET, budgetParams(budget));
  }

  async deleteBudget(key: BudgetKey): Promise<boolean> {
    const res = await this.pool.query('DELETE FROM budgets WHERE path_key = $1 AND period = $2', [key.userPath.toLowerCase(), key.period]);
    return (res.rowCount ?? 0) > 0;
  }

  async replaceConfigBudgets(budgets: readonly BudgetDefinition[]): Promise<BudgetKey[]> {
    return this.transaction(async (client) => {
      // As for rules: no admin write may slip between the read and the writes.
      await client.query('LOCK TABLE budgets IN SHARE ROW EXCLUSIVE MODE');
      const plan = planBudgetReseed(await listBudgetsWith(client), budgets);
      await client.query("DELETE FROM budgets WHERE source = 'config'");
      for (const budget of plan.inserts) await client.query(UPSERT_BUDGET, budgetParams(budget));
      return plan.skipped;
    });
  }

  async insertFile(file: StoredFile): Promise<void> {
    const marks = FILE_COLUMNS.split(',').map((_, i) => `$${i + 1}`).join(', ');
    await this.pool.query(`INSERT INTO files (${FILE_COLUMNS}) VALUES (${marks})`, fileParams(file, same));
  }

  async getFile(id: string): Promise<StoredFile | undefined> {
    const res = await this.pool.query<FileRow<Date>>(`SELECT ${FILE_COLUMNS} FROM files WHERE id = $1`, [id]);
    const row = res.rows[0];
    return row === undefined ? undefined : fileFromRow(row, same);
  }

  async deleteFile(id: string): Promise<boolean> {
    const res = await this.pool.query('DELETE FROM files WHERE id = $1', [id]);
    return (res.rowCount ?? 0) > 0;
  }

  async fileUsage(userPath: string, at: Date): Promise<FileUsage> {
    const res = await this.pool.query<{ files: string; bytes: string }>(
      'SELECT COUNT(*) AS files, COALESCE(SUM(bytes), 0) AS bytes FROM files WHERE lower(user_path) = lower($1) AND (expires_at IS NULL OR expires_at > $2)',
      [userPath, at],
    );
    return { files: Number(res.rows[0]?.files ?? 0), bytes: Number(res.rows[0]?.bytes ?? 0) };
  }

  async deleteExpiredFiles(at: Date): Promise<number> {
    const res = await this.pool.query('DELETE FROM files WHERE expires_at <= $1', [at]);
    return res.rowCount ?? 0;
  }

  async insertBatch(batch: BatchRecord): Promise<void> {
    const marks = BATCH_COLUMNS.split(',').map((_, i) => `$${i + 1}`).join(', ');
    await this.pool.query(`INSERT INTO batches (${BATCH_COLUMNS}) VALUES (${marks})`, batchParams(batch, same));
  }

  async updateBatch(batch: BatchRecord): Promise<boolean> {
    const [id, ...rest] = batchParams(batch, same);
    const set = BATCH_COLUMNS.split(',').slice(1).map((c, i) => `${c.trim()} = $${i + 1}`).join(', ');
    const res = await this.pool.query(`UPDATE batches SET ${set} WHERE id = $${rest.length + 1}`, [...rest, id]);
    return (res.rowCount ?? 0) > 0;
  }

  async getBatch(id: string): Promise<BatchRecord | undefined> {
    const res = await this.pool.query<BatchRow<Date>>(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = $1`, [id]);
    const row = res.rows[0];
    return row === undefined ? undefined : batchFromRow(row, same);
  }

  async listBatches(query: BatchListQuery): Promise<BatchRecord[]> {
    const subtree = subtreeMatch(query.userPathPrefix);
    const where: string[] = [];
    const params: unknown[] = [];
    if (subtree !== undefined) {
      params.push(subtree.exact, subtree.below);
      where.push(`(lower(user_path) = lower($${params.length - 1}) OR user_path ILIKE $${params.length} ESCAPE '\\')`);
    }
    if (query.after !== undefined) {
      // An unknown cursor pages from nothing rather than from the start.
      params.push(query.after);
      where.push(`seq < COALESCE((SELECT seq FROM batches WHERE id = $${params.length}), 0)`);
    }
    params.push(query.limit);
    const res = await this.pool.query<BatchRow<Date>>(
      `SELECT ${BATCH_COLUMNS} FROM batches ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT $${params.length}`,
      params,
    );
    return res.rows.map((row) => batchFromRow(row, same));
  }

  // ---- refusal counts (RefusalStorage)

  async addRefusals(counts: readonly RefusalCount[]): Promise<void> {
    if (counts.length === 0) return;
    const column = <T>(field: (c: RefusalCount) => T): T[] => counts.map(field);
    await this.pool.query(
      `INSERT INTO refusals (${REFUSAL_KEY_COLUMNS}, count)
       SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[])
       ON CONFLICT (${REFUSAL_KEY_COLUMNS}) DO UPDATE SET count = refusals.count + EXCLUDED.count`,
      [
        column((c) => new Date(c.minuteMs)),
        column((c) => c.userPath),
        column((c) => c.provider),
        column((c) => c.model),
        column((c) => c.scope),
        column((c) => c.subject),
        column((c) => c.period),
        column((c) => c.count),
      ],
    );
  }

  async bucketRefusals(query: UsageBucketQuery): Promise<RefusalBucket[]> {
    // The key carries COLLATE "C" itself: ordering by it is then byte order, as in SQLite.
    const res = await this.pool.query<{ start_s: string; key: string; refused: string }>(
      `SELECT (floor(extract(epoch FROM minute) / $1::integer) * $1::integer)::bigint AS start_s,
         (${REFUSAL_GROUP_KEY_SQL[query.groupBy]}) COLLATE "C" AS key, SUM(count) AS refused
       FROM refusals WHERE minute >= $2 AND minute < $3
       GROUP BY 1, 2 ORDER BY 1, 2`,
      [query.bucketSeconds, query.from, query.to],
    );
    return res.rows.map((row) => ({ start: new Date(Number(row.start_s) * 1000), key: row.key, refused: Number(row.refused) }));
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  private async transaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }
}

/** pg reads and writes timestamptz as Date already. */
const same = (d: Date): Date => d;

type Queryable = Pick<pg.Pool, 'query'> | PoolClient;

async function listRulesWith(db: Queryable): Promise<RuleDefinition[]> {
  const res = await db.query<RuleRow>(
    `SELECT ${RULE_COLUMNS} FROM rate_limit_rules ORDER BY scope, subject_key COLLATE "C", period_seconds`,
  );
  return res.rows.map((row) => ({
    scope: row.scope,
    subject: row.subject,
    periodSeconds: row.period_seconds,
    maxRequests: row.max_requests === null ? undefined : Number(row.max_requests),
    maxTokens: row.max_tokens === null ? undefined : Number(row.max_tokens),
    ...(row.per_child && { perChild: true as const }),
    source: row.source,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  }));
}

async function listBudgetsWith(db: Queryable): Promise<BudgetDefinition[]> {
  const res = await db.query<BudgetRow>(`SELECT ${BUDGET_COLUMNS} FROM budgets ORDER BY path_key COLLATE "C", period COLLATE "C"`);
  return res.rows.map((row) => ({
    userPath: row.user_path,
    period: row.period,
    maxUsd: row.max_usd,
    source: row.source,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  }));
}

/**
 * Whether a failed usage insert was refused for the values it carried: SQLSTATE class 22 (data
 * exception: a NUL in text, a fraction for a bigint), 23 (a constraint) or 54000 (a value too
 * large for an index), rather than for the server's state (connection, locks, shutdown).
 */
function refusedValues(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23') || code === '54000');
}

function budgetParams(b: BudgetDefinition): unknown[] {
  return [b.userPath, b.userPath.toLowerCase(), b.period, b.maxUsd, b.source, b.createdAt, b.updatedAt];
}

function ruleParams(rule: RuleDefinition): unknown[] {
  return [
    rule.scope,
    rule.subject,
    // Folded in JS, not with SQL lower(), so both implementations derive the same key.
    rule.subject.toLowerCase(),
    rule.periodSeconds,
    rule.maxRequests ?? null,
    rule.maxTokens ?? null,
    rule.perChild === true,
    rule.source,
    rule.createdAt,
    rule.updatedAt,
  ];
}
