/**
 * The SQLite schema, version by version. Append-only: never edit a shipped migration (existing
 * databases must open unchanged), add a new version instead.
 */
import { REFUSAL_KEY_COLUMNS } from './refusals/rows.ts';

export interface Migration {
  version: number;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
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
    // and rule (src/storage/refusals/).
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
