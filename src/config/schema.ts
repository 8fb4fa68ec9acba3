/**
 * The zod schema of floodgate.yaml. Validation and defaulting happen in one pass so
 * the resolved config is fully populated and every consumer sees the same defaults.
 *
 * Values reach this schema after `${VAR}` interpolation, so numeric and boolean fields accept their
 * string spellings (`port: ${PORT:-8080}` is the string "8080"). Empty strings and YAML nulls in
 * optional fields mean "absent": `master_key: ${MASTER_KEY}` with MASTER_KEY unset is no master key.
 */
import { z } from 'zod';
import { BUDGET_PERIOD_NAMES, periodFromSeconds } from '../budgets/periods.ts';
import { MAX_USD } from '../budgets/types.ts';
import { MAX_PRICE_PER_MTOK } from '../shared/money.ts';
import { PROVIDER_TYPES, type ProviderConfig } from '../providers/registry.ts';
import { DEFAULT_MAX_EVENT_BYTES } from '../providers/sse.ts';
import { DEFAULT_MAX_RESPONSE_BYTES } from '../providers/upstream.ts';
import { MAX_CAP, MAX_PERIOD_SECONDS, validateModelSubject, validateProviderSubject } from '../ratelimit/normalize.ts';
import { normalizeUserPath } from '../user-path/user-path.ts';
import { booleanSetting, coerceBool, coerceString, isAbsent, str } from '../shared/config-fields.ts';
import { providerNameError } from './normalize.ts';

const DEFAULT_BODY_LIMIT = 10 * 1024 * 1024;
const DEFAULT_USER_PATH_HEADER = 'X-Floodgate-User-Path';

const PERIOD_SECONDS = { minute: 60, hour: 3600, day: 86400, concurrent: 0 } as const;
export type PeriodName = keyof typeof PERIOD_SECONDS;
const PERIOD_NAMES = ['minute', 'hour', 'day', 'concurrent'] as const;

const BYTE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** `<n>`, `<n>kb`, `<n>mb`, `<n>gb` (1024-based, case-insensitive) → bytes; undefined when malformed. */
function parseByteSize(raw: string | number): number | undefined {
  if (typeof raw === 'number') return Number.isInteger(raw) && raw > 0 ? raw : undefined;
  const m = /^\s*(\d+)\s*(b|kb|mb|gb)?\s*$/i.exec(raw);
  if (!m) return undefined;
  const bytes = Number(m[1]) * BYTE_UNITS[(m[2] ?? 'b').toLowerCase()]!;
  return bytes > 0 && Number.isSafeInteger(bytes) ? bytes : undefined;
}

// ---- scalar helpers -------------------------------------------------------------------------

const absentToUndefined = (v: unknown): unknown => (isAbsent(v) ? undefined : v);

function coerceInt(v: unknown): unknown {
  if (isAbsent(v)) return undefined;
  return typeof v === 'string' && /^\s*[+-]?\d+\s*$/.test(v) ? Number(v) : v;
}

function coerceNumber(v: unknown): unknown {
  if (isAbsent(v)) return undefined;
  return typeof v === 'string' && /^\s*[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*$/i.test(v) ? Number(v) : v;
}

function intSchema(min: number, max?: number) {
  const msg = max === undefined ? `must be an integer >= ${min}` : `must be an integer ${min}..${max}`;
  const base = z.number({ error: msg }).int({ error: msg }).min(min, { error: msg });
  return max === undefined ? base : base.max(max, { error: msg });
}

const optInt = (min: number, max?: number) => z.preprocess(coerceInt, intSchema(min, max).optional());
const defInt = (def: number, min: number, max?: number) =>
  z.preprocess(coerceInt, intSchema(min, max).default(def));
/** A decimal number in [min, max]. */
const defNumber = (def: number, min: number, max: number) => {
  const msg = `must be a number from ${min} to ${max}`;
  return z.preprocess(coerceNumber, z.number({ error: msg }).min(min, { error: msg }).max(max, { error: msg }).default(def));
};
const defBool = booleanSetting;

const BYTE_SIZE_ERROR = 'must be a size in bytes: <n>, <n>kb, <n>mb or <n>gb (e.g. 10mb)';

/** A size in bytes, written as a number or with a unit (`10mb`). */
const defByteSize = (def: number) => z.preprocess(
  (v) => (isAbsent(v) ? undefined : typeof v === 'string' || typeof v === 'number' ? (parseByteSize(v) ?? v) : v),
  z.number({ error: BYTE_SIZE_ERROR }).int({ error: BYTE_SIZE_ERROR }).positive({ error: BYTE_SIZE_ERROR }).default(def),
);

const nonEmptyStr = () => str().min(1, { error: 'must not be empty' });
const optStr = () => z.preprocess(coerceString, str().optional());
const defStr = (def: string) => z.preprocess(coerceString, str().default(def));

/** Absent sections (missing key or a bare `key:` in YAML) get their defaults. */
function section<T extends z.ZodType>(schema: T) {
  return z.preprocess(absentToUndefined, schema);
}

/** A model reference: `provider/model` or a bare model; trimmed, must not begin or end with `/`. */
const modelName = z.preprocess(
  coerceString,
  str().transform((v, ctx) => {
    const r = validateModelSubject(v, `"${v}"`);
    if (r.ok) return r.value;
    ctx.addIssue({ code: 'custom', message: r.error });
    return z.NEVER;
  }),
);

// ---- sections -------------------------------------------------------------------------------

const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export const DEFAULT_HOST = '127.0.0.1';

const serverSchema = z.strictObject({
  host: z.preprocess(coerceString, nonEmptyStr().default(DEFAULT_HOST)),
  port: defInt(8080, 0, 65535),
  master_key: optStr(),
  user_path_header: z.preprocess(
    coerceString,
    str().regex(HEADER_TOKEN, { error: 'must be a valid HTTP header name' }).default(DEFAULT_USER_PATH_HEADER),
  ),
  body_limit: defByteSize(DEFAULT_BODY_LIMIT),
  /** How long a shutdown waits for running requests before it cuts them. */
  shutdown_grace_seconds: defInt(10, 0, 3600),
  /** From a connection's opening (or a request's first byte) to the end of the request's headers. */
  headers_timeout_seconds: defInt(30, 1, 3600),
  /** From a request's first byte to the end of its body; the answer is not timed. */
  request_timeout_seconds: defInt(300, 1, 86_400),
  /** How long an idle keep-alive connection is kept between two requests. */
  keep_alive_timeout_seconds: defInt(72, 1, 3600),
  /** Open connections at most; further ones are closed at once. */
  max_connections: defInt(10_000, 1, 1_000_000),
}).superRefine((v, ctx) => {
  if (v.headers_timeout_seconds > v.request_timeout_seconds) {
    ctx.addIssue({ code: 'custom', path: ['headers_timeout_seconds'], message: `must not exceed request_timeout_seconds (${v.request_timeout_seconds})` });
  }
});

const storageSchema = z
  .strictObject({
    type: z.preprocess(
      absentToUndefined,
      z.enum(['sqlite', 'postgres'], { error: 'must be one of sqlite, postgres' }).default('sqlite'),
    ),
    sqlite: section(z.strictObject({ path: z.preprocess(coerceString, nonEmptyStr().default('data/floodgate.db')) }).prefault({})),
    postgres: section(
      z
        .strictObject({
          url: optStr().refine((v) => v === undefined || /^postgres(ql)?:\/\//.test(v), {
            error: 'must be a postgres:// or postgresql:// URL',
          }),
        })
        .prefault({}),
    ),
  })
  .superRefine((v, ctx) => {
    if (v.type === 'postgres' && v.postgres.url === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['postgres', 'url'],
        message: 'required when storage.type is postgres (set it here or with POSTGRES_URL)',
      });
    }
  });

const usageSchema = z.strictObject({ enabled: defBool(true) });

const loggingSchema = z.strictObject({
  /** One JSON line per request on stdout (the access log); failed requests are logged either way. */
  access: defBool(false),
});

/** Files kept by the gateway (`POST /v1/files` and batch output). */
const filesSchema = z.strictObject({
  /** How long a file is kept; an upload's `expires_after` may ask for less. */
  ttl_seconds: defInt(30 * 86_400, 1, MAX_PERIOD_SECONDS),
  /** Bytes of live files one user path may hold; an upload beyond it is refused. */
  max_bytes_per_user_path: defByteSize(1024 ** 3),
  /** Live files one user path may hold; an upload beyond it is refused. */
  max_files_per_user_path: defInt(1000, 1, 1_000_000),
});

const cacheSchema = z.strictObject({
  response: section(
    z
      .strictObject({
        enabled: defBool(false),
        ttl_seconds: defInt(300, 1),
        max_entries: defInt(10000, 1),
        // Whether different user paths may be served each other's cached responses.
        shared: defBool(false),
      })
      .prefault({}),
  ),
});

// The fields every provider type has; each type adds its own (its `configFields`, see src/providers/registry.ts).
const providerCommon = {
  api_key: optStr(),
  models: section(z.array(modelName, { error: 'must be a list of model names' }).optional()),
  connect_timeout_ms: defInt(10000, 1),
  // Time allowed for response headers, and the longest silence while a body streams.
  timeout_ms: defInt(600000, 1),
  // The largest answer read whole (a JSON answer, an error answer): 502 beyond it.
  max_response_bytes: defByteSize(DEFAULT_MAX_RESPONSE_BYTES),
  // The largest event of a relayed SSE stream: the stream ends with an error event beyond it.
  max_event_bytes: defByteSize(DEFAULT_MAX_EVENT_BYTES),
  // Capacity learned from the provider's own answers (rate-limit headers, 429s): see docs/rate-limits.md.
  learned: section(
    z.strictObject({
      enabled: defBool(true),
      // At or below this many remaining requests (or tokens), the model is routed around until the reset.
      reserve: defInt(0, 0),
      // How long a 429 without a retry-after routes the model around.
      cooldown_seconds: defNumber(5, 0, 86_400),
    }).prefault({}),
  ),
};

const PROVIDER_TYPE_NAMES = PROVIDER_TYPES.map((t) => t.type).join(', ');

const providerVariants = PROVIDER_TYPES.map((t) => {
  const variant = z.strictObject({ type: z.literal(t.type), ...t.configFields, ...providerCommon });
  const check = t.check as ((settings: z.output<typeof variant>) => Array<{ key: string; message: string }>) | undefined;
  if (check === undefined) return variant;
  return variant.superRefine((settings, ctx) => {
    for (const { key, message } of check(settings)) ctx.addIssue({ code: 'custom', path: key === '' ? [] : key.split('.'), message });
  });
});

/**
 * One `providers.<name>` entry, checked against the fields of the type it names. Its output type
 * is the registry's `ProviderConfig` with the common defaults filled in: zod cannot name the
 * union of a list built at run time, and the registry spells the same union from the same list.
 */
const providerSchema = z.discriminatedUnion('type', providerVariants as [typeof providerVariants[number], ...typeof providerVariants], {
  error: (iss) => {
    const input: unknown = iss.input;
    if (input === null || typeof input !== 'object' || Array.isArray(input)) return 'expected a mapping';
    const type = (input as Record<string, unknown>)['type'];
    return type === undefined ? `required (one of ${PROVIDER_TYPE_NAMES})` : `must be one of ${PROVIDER_TYPE_NAMES}`;
  },
}) as unknown as z.ZodType<ProviderConfig & { connect_timeout_ms: number; timeout_ms: number; max_response_bytes: number; max_event_bytes: number; learned: LearnedConfig }, unknown>;

/** `providers.<name>.learned`: capacity learned from the provider's own answers. */
export interface LearnedConfig {
  enabled: boolean;
  reserve: number;
  cooldown_seconds: number;
}

const providerName = z.string().superRefine((v, ctx) => {
  const err = providerNameError(v);
  if (err) ctx.addIssue({ code: 'custom', message: err });
});

const aliasName = z.string().superRefine((v, ctx) => {
  if (v.trim() === '' || /\s/.test(v)) ctx.addIssue({ code: 'custom', message: `invalid alias name "${v}": must be non-empty without whitespace` });
  else if (v.includes('/')) {
    ctx.addIssue({ code: 'custom', message: `invalid alias name "${v}": must not contain "/" (it would read as provider/model)` });
  }
});

const TARGET_ERROR = 'expected "provider/model" or { model, weight }';

const aliasTarget = z.preprocess(
  (v) => (typeof v === 'string' ? { model: v } : v),
  z.strictObject({ model: modelName, weight: defInt(1, 1) }, { error: TARGET_ERROR }),
);

const aliasSchema = z.strictObject({
  strategy: z.preprocess(
    absentToUndefined,
    z.enum(['round_robin', 'weighted', 'first'], { error: 'must be one of round_robin, weighted, first' }).default('round_robin'),
  ),
  targets: z
    .array(aliasTarget, { error: (iss) => (iss.input === undefined ? 'required' : 'must be a list') })
    .min(1, { error: 'must list at least one target' }),
});

const failoverKey = z.string().superRefine((v, ctx) => {
  const r = validateModelSubject(v, `"${v}"`);
  if (!r.ok) ctx.addIssue({ code: 'custom', message: r.error });
});

const failoverCandidates = z
  .array(modelName, { error: 'must be a list of candidate models' })
  .min(1, { error: 'must list at least one candidate' });

// ---- rate limits ----------------------------------------------------------------------------

/** One limit, as written in YAML or in a JSON env value. */
const limitSchema = z
  .strictObject(
    {
      period: z.preprocess(
        absentToUndefined,
        z
          .enum(PERIOD_NAMES, { error: 'must be one of minute, hour, day, concurrent (use period_seconds for a custom window)' })
          .optional(),
      ),
      period_seconds: optInt(1, MAX_PERIOD_SECONDS),
      max_requests: optInt(1, MAX_CAP),
      max_tokens: optInt(1, MAX_CAP),
      /** User-path limits only: each direct child of the path gets a counter of its own with these caps. */
      per_child: z.preprocess(coerceBool, z.boolean({ error: 'must be a boolean (true/false/yes/no/on/off/1/0)' }).optional()),
    },
    { error: 'expected a mapping such as { period: minute, max_requests: 100 }' },
  )
  .superRefine((v, ctx) => {
    if (v.period !== undefined && v.period_seconds !== undefined) {
      ctx.addIssue({ code: 'custom', message: 'set either period or period_seconds, not both' });
      return;
    }
    if (v.period === undefined && v.period_seconds === undefined) {
      ctx.addIssue({ code: 'custom', message: 'period or period_seconds is required' });
      return;
    }
    if (v.period === 'concurrent') {
      if (v.max_requests === undefined) {
        ctx.addIssue({ code: 'custom', path: ['max_requests'], message: 'required for a concurrent limit' });
      }
      if (v.max_tokens !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['max_tokens'], message: 'not allowed on a concurrent limit' });
      }
    } else if (v.max_requests === undefined && v.max_tokens === undefined) {
      ctx.addIssue({ code: 'custom', message: 'a windowed limit needs max_requests and/or max_tokens' });
    }
  });

export type LimitConfig = z.output<typeof limitSchema>;

/** Seconds of a limit's window; 0 for a concurrency limit. */
export function limitPeriodSeconds(limit: LimitConfig): number {
  return limit.period !== undefined ? PERIOD_SECONDS[limit.period] : (limit.period_seconds ?? 0);
}

export const limitsSchema = z.array(limitSchema, {
  error: (iss) => (iss.input === undefined ? 'required' : 'must be a list of limits'),
});

export const PER_CHILD_ONLY_USER_PATHS = 'only user-path limits can be per_child (providers and models have no children)';

/** Limits of a provider or a model: no per_child. */
export const targetLimitsSchema = limitsSchema.superRefine((limits, ctx) => {
  limits.forEach((limit, i) => {
    if (limit.per_child === true) ctx.addIssue({ code: 'custom', path: [i, 'per_child'], message: PER_CHILD_ONLY_USER_PATHS });
  });
});

// Unlike other strings, an empty path is meaningful: it normalises to the root `/`.
const userPathSchema = z.preprocess(
  (v) => (typeof v === 'number' ? String(v) : v),
  str().transform((v, ctx) => {
    const r = normalizeUserPath(v, `"${v}"`);
    if (r.ok) return r.value;
    ctx.addIssue({ code: 'custom', message: r.error });
    return z.NEVER;
  }),
);

/** `redis://` or `rediss://` (TLS), with optional credentials and database number. */
function redisUrl(v: string, ctx: z.RefinementCtx): string {
  let url: URL | undefined;
  try {
    url = new URL(v);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'redis:' && url.protocol !== 'rediss:') || url.hostname === '') {
    ctx.addIssue({ code: 'custom', message: `must be a redis:// or rediss:// URL (got "${v}")` });
    return z.NEVER;
  }
  return v;
}

/**
 * Where the counters of several replicas meet: gateways sharing one Redis and one prefix share every counter. Every Redis key is the prefix in
 * braces (a Redis Cluster hash tag) followed by the rule, so the braces may not appear in it.
 */
const redisSchema = z.strictObject({
  url: z.preprocess(coerceString, nonEmptyStr().transform(redisUrl).default('redis://127.0.0.1:6379')),
  prefix: z.preprocess(
    coerceString,
    nonEmptyStr()
      .regex(/^[^{}\s]+$/, { error: 'must not contain braces or whitespace' })
      .default('floodgate:'),
  ),
  /** A replica that dies holding concurrency slots frees them within this time. */
  lease_seconds: defInt(30, 1, 3600),
  /** The longest an admission waits for Redis before on_error decides. */
  timeout_ms: defInt(250, 1, 60_000),
  on_error: z.preprocess(
    absentToUndefined,
    z.enum(['local', 'allow', 'deny'], { error: 'must be one of local, allow, deny' }).default('local'),
  ),
});

/**
 * Waiting for capacity instead of a 429 at once: how long a request waits by default (0: not at
 * all) and at most, how many may wait in one gateway, and how much of each cap lower priorities
 * leave to higher ones.
 */
const queueSchema = z.strictObject({
  default_wait_seconds: defNumber(0, 0, 3600),
  max_wait_seconds: defNumber(30, 0, 3600),
  max_depth: defInt(10_000, 1, 10_000_000),
  headroom: section(
    z
      .strictObject({
        normal: defNumber(0, 0, 0.9),
        low: defNumber(0, 0, 0.9),
      })
      .prefault({}),
  ),
});

/**
 * Token reservations: admission reserves each request's estimated tokens on its token windows,
 * settled to what it used when it ends, so token caps hold under concurrency.
 */
const rateLimitReservationsSchema = z.strictObject({
  enabled: defBool(false),
  /** The completion tokens reserved for a request that sets no max_tokens (or a dialect's variant). */
  default_completion_tokens: defInt(256, 1, 10_000_000),
});

const rateLimitsSchema = z.strictObject({
  enabled: defBool(true),
  reservations: section(rateLimitReservationsSchema.prefault({})),
  /** Where the counters live: this process's memory, or Redis shared by every replica. */
  backend: z.preprocess(
    absentToUndefined,
    z.enum(['memory', 'redis'], { error: 'must be one of memory, redis' }).default('memory'),
  ),
  redis: section(redisSchema.prefault({})),
  queue: section(queueSchema.prefault({})),
  /** Most children a per-child rule keeps counters for (idle ones are dropped first). */
  max_children: defInt(100_000, 1, 100_000_000),
  /** Save the in-memory request and token windows to storage, so a restart keeps them (memory backend). */
  persist_counters: defBool(false),
  user_paths: section(z.array(z.strictObject({ path: userPathSchema, limits: limitsSchema })).default([])),
  providers: section(
    z
      .array(
        z.strictObject({
          name: z.preprocess(
            coerceString,
            str().transform((v, ctx) => {
              const r = validateProviderSubject(v, `"${v}"`);
              if (r.ok) return r.value;
              ctx.addIssue({ code: 'custom', message: r.error });
              return z.NEVER;
            }),
          ),
          limits: targetLimitsSchema,
        }),
      )
      .default([]),
  ),
  models: section(z.array(z.strictObject({ model: modelName, limits: targetLimitsSchema })).default([])),
});

// ---- pricing and budgets --------------------------------------------------------------------

const PRICE_ERROR = `must be a number of US dollars per million tokens, from 0 to ${MAX_PRICE_PER_MTOK}`;
const pricePerMtok = () => z.preprocess(coerceNumber, z.number({ error: PRICE_ERROR }).min(0, { error: PRICE_ERROR }).max(MAX_PRICE_PER_MTOK, { error: PRICE_ERROR }));

/** `pricing."<provider>/<model>"`: an operator's price, which wins over the price table. */
const priceSchema = z.strictObject(
  {
    input_per_mtok: pricePerMtok(),
    output_per_mtok: pricePerMtok(),
    // Absent: cached prompt tokens cost the input price.
    cached_input_per_mtok: pricePerMtok().optional(),
  },
  { error: 'expected a mapping such as { input_per_mtok: 0.15, output_per_mtok: 0.6 }' },
);

const pricingKey = z.string().superRefine((v, ctx) => {
  const r = validateModelSubject(v, `"${v}"`);
  if (!r.ok) ctx.addIssue({ code: 'custom', message: r.error });
  else if (!v.includes('/')) ctx.addIssue({ code: 'custom', message: `"${v}" must be "<provider>/<model>"` });
});

const MAX_USD_ERROR = `must be a number of US dollars greater than 0 and at most ${MAX_USD}`;

/** One budget limit, as written in YAML or in a JSON env value. */
const budgetLimitSchema = z
  .strictObject(
    {
      period: z.preprocess(
        absentToUndefined,
        z.enum(BUDGET_PERIOD_NAMES, { error: 'must be one of day, week, month (use period_seconds for a custom window)' }).optional(),
      ),
      period_seconds: optInt(1, MAX_PERIOD_SECONDS),
      max_usd: z.preprocess(
        coerceNumber,
        z.number({ error: (iss) => (iss.input === undefined ? 'required' : MAX_USD_ERROR) }).gt(0, { error: MAX_USD_ERROR }).max(MAX_USD, { error: MAX_USD_ERROR }),
      ),
    },
    { error: 'expected a mapping such as { period: month, max_usd: 200 }' },
  )
  .superRefine((v, ctx) => {
    if (v.period !== undefined && v.period_seconds !== undefined) {
      ctx.addIssue({ code: 'custom', message: 'set either period or period_seconds, not both' });
    } else if (v.period === undefined && v.period_seconds === undefined) {
      ctx.addIssue({ code: 'custom', message: 'period or period_seconds is required' });
    }
  });

export type BudgetLimitConfig = z.output<typeof budgetLimitSchema>;

/** The period label of a budget limit (`day`, `week`, `month` or `<n>s`). */
export function budgetLimitPeriod(limit: BudgetLimitConfig): string {
  return limit.period ?? periodFromSeconds(limit.period_seconds ?? 0);
}

export const budgetLimitsSchema = z.array(budgetLimitSchema, {
  error: (iss) => (iss.input === undefined ? 'required' : 'must be a list of budget limits'),
});

const budgetsSchema = z.strictObject({
  enabled: defBool(true),
  /** How often spend is re-read from storage (what other replicas spent becomes visible). */
  refresh_seconds: defInt(5, 1, 3600),
  /** Dollar reservations: admission reserves each request's estimated cost on its budgets, settled to its actual cost. */
  reservations: section(z.strictObject({ enabled: defBool(false) }).prefault({})),
  user_paths: section(z.array(z.strictObject({ path: userPathSchema, limits: budgetLimitsSchema })).default([])),
});

// ---- the file -------------------------------------------------------------------------------

export const configSchema = z.strictObject(
  {
    server: section(serverSchema.prefault({})),
    storage: section(storageSchema.prefault({})),
    usage: section(usageSchema.prefault({})),
    logging: section(loggingSchema.prefault({})),
    files: section(filesSchema.prefault({})),
    cache: section(cacheSchema.prefault({})),
    providers: section(z.record(providerName, providerSchema).default({})),
    aliases: section(z.record(aliasName, aliasSchema).default({})),
    failover: section(z.record(failoverKey, failoverCandidates).default({})),
    rate_limits: section(rateLimitsSchema.prefault({})),
    pricing: section(z.record(pricingKey, priceSchema).default({})),
    budgets: section(budgetsSchema.prefault({})),
  },
  { error: 'the configuration file must be a YAML mapping' },
);

/** The resolved configuration: YAML field names, every default filled in, body_limit in bytes. */
export type GatewayConfig = z.output<typeof configSchema>;
export type RateLimitsConfig = GatewayConfig['rate_limits'];

