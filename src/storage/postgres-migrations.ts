/**
 * The PostgreSQL schema, version by version. Append-only: never edit a shipped migration (existing
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
    // and rule (src/storage/refusals/).
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
