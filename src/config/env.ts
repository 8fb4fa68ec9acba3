/**
 * Environment overrides (env wins over the file) and the rate-limit env seeds
 * (`SET_RATE_LIMIT_*`, `SET_PROVIDER_RATE_LIMIT_*`). Every error names the variable.
 *
 * An empty override variable (`HOST=`) counts as unset: container tooling often passes empty
 * strings for variables it does not define, and an empty host or port is never intended.
 */
import type { Env } from './interpolate.ts';
import { formatIssues } from './issues.ts';
import { validateProviderSubject } from '../ratelimit/normalize.ts';
import { normalizeUserPath } from '../user-path/user-path.ts';
import type { z } from 'zod';
import { budgetLimitsSchema, limitsSchema, PER_CHILD_ONLY_USER_PATHS, type BudgetLimitConfig, type LimitConfig, type PeriodName } from './schema.ts';
import { parseBoolean } from '../shared/config-fields.ts';

type Kind = 'string' | 'boolean' | 'port' | 'storage_type' | 'header' | 'postgres_url' | 'rate_limits_backend' | 'redis_url' | 'redis_on_error' | 'milliseconds';

interface Override {
  variable: string;
  path: readonly string[];
  kind: Kind;
}

const ENV_OVERRIDES: readonly Override[] = [
  { variable: 'HOST', path: ['server', 'host'], kind: 'string' },
  { variable: 'PORT', path: ['server', 'port'], kind: 'port' },
  { variable: 'MASTER_KEY', path: ['server', 'master_key'], kind: 'string' },
  { variable: 'USER_PATH_HEADER', path: ['server', 'user_path_header'], kind: 'header' },
  // Validated by the schema, which names the key.
  { variable: 'SHUTDOWN_GRACE_SECONDS', path: ['server', 'shutdown_grace_seconds'], kind: 'string' },
  { variable: 'STORAGE_TYPE', path: ['storage', 'type'], kind: 'storage_type' },
  { variable: 'SQLITE_PATH', path: ['storage', 'sqlite', 'path'], kind: 'string' },
  { variable: 'POSTGRES_URL', path: ['storage', 'postgres', 'url'], kind: 'postgres_url' },
  { variable: 'USAGE_ENABLED', path: ['usage', 'enabled'], kind: 'boolean' },
  { variable: 'ACCESS_LOG', path: ['logging', 'access'], kind: 'boolean' },
  { variable: 'RATE_LIMITS_ENABLED', path: ['rate_limits', 'enabled'], kind: 'boolean' },
  { variable: 'BUDGETS_ENABLED', path: ['budgets', 'enabled'], kind: 'boolean' },
  { variable: 'RATE_LIMITS_RESERVATIONS', path: ['rate_limits', 'reservations', 'enabled'], kind: 'boolean' },
  { variable: 'BUDGETS_RESERVATIONS', path: ['budgets', 'reservations', 'enabled'], kind: 'boolean' },
  // Validated by the schema, which names the key.
  { variable: 'BUDGETS_REFRESH_SECONDS', path: ['budgets', 'refresh_seconds'], kind: 'string' },
  { variable: 'RATE_LIMITS_BACKEND', path: ['rate_limits', 'backend'], kind: 'rate_limits_backend' },
  { variable: 'REDIS_URL', path: ['rate_limits', 'redis', 'url'], kind: 'redis_url' },
  { variable: 'RATE_LIMITS_REDIS_PREFIX', path: ['rate_limits', 'redis', 'prefix'], kind: 'string' },
  { variable: 'RATE_LIMITS_REDIS_TIMEOUT_MS', path: ['rate_limits', 'redis', 'timeout_ms'], kind: 'milliseconds' },
  { variable: 'RATE_LIMITS_REDIS_ON_ERROR', path: ['rate_limits', 'redis', 'on_error'], kind: 'redis_on_error' },
  // Validated by the schema, which names the key.
  { variable: 'RATE_LIMITS_QUEUE_MAX_WAIT_SECONDS', path: ['rate_limits', 'queue', 'max_wait_seconds'], kind: 'string' },
];

/** Parses a port: an integer 0..65535; undefined when malformed. */
export function parsePort(raw: string | number): number | undefined {
  const n = typeof raw === 'number' ? raw : /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
  return Number.isInteger(n) && n >= 0 && n <= 65535 ? n : undefined;
}

function parseOverride(o: Override, raw: string): { value: unknown } | { error: string } {
  const v = raw.trim();
  switch (o.kind) {
    case 'string':
      return { value: v };
    case 'boolean': {
      const b = parseBoolean(v);
      return b === undefined
        ? { error: `${o.variable}: must be a boolean (true/false, 1/0, yes/no, on/off), got "${raw}"` }
        : { value: b };
    }
    case 'port': {
      const p = parsePort(v);
      return p === undefined ? { error: `${o.variable}: must be an integer 0..65535, got "${raw}"` } : { value: p };
    }
    case 'storage_type': {
      const t = v.toLowerCase();
      return t === 'sqlite' || t === 'postgres'
        ? { value: t }
        : { error: `${o.variable}: must be one of sqlite, postgres, got "${raw}"` };
    }
    case 'header':
      return /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(v)
        ? { value: v }
        : { error: `${o.variable}: must be a valid HTTP header name, got "${raw}"` };
    case 'postgres_url':
      return /^postgres(ql)?:\/\//.test(v)
        ? { value: v }
        : { error: `${o.variable}: must be a postgres:// or postgresql:// URL` };
    case 'rate_limits_backend':
      return oneOf(o.variable, raw, ['memory', 'redis']);
    case 'redis_on_error':
      return oneOf(o.variable, raw, ['local', 'allow', 'deny']);
    case 'redis_url':
      return /^rediss?:\/\/[^/]/.test(v)
        ? { value: v }
        : { error: `${o.variable}: must be a redis:// or rediss:// URL` };
    case 'milliseconds': {
      const n = /^\d+$/.test(v) ? Number(v) : NaN;
      return Number.isSafeInteger(n) && n >= 1 && n <= 60_000
        ? { value: n }
        : { error: `${o.variable}: must be an integer 1..60000 (milliseconds), got "${raw}"` };
    }
  }
}

function oneOf(variable: string, raw: string, values: readonly string[]): { value: string } | { error: string } {
  const v = raw.trim().toLowerCase();
  return values.includes(v) ? { value: v } : { error: `${variable}: must be one of ${values.join(', ')}, got "${raw}"` };
}

/**
 * Writes environment overrides into the parsed (pre-validation) tree, so overridden values go
 * through the same schema and cross-checks as file values. Returns the variables applied and the
 * key paths they set.
 */
export function applyEnvOverrides(
  tree: Record<string, unknown>,
  env: Env,
): { errors: string[]; applied: Array<{ variable: string; path: readonly string[] }> } {
  const errors: string[] = [];
  const applied: Array<{ variable: string; path: readonly string[] }> = [];
  for (const o of ENV_OVERRIDES) {
    const raw = env[o.variable];
    if (raw === undefined || raw.trim() === '') continue;
    const parsed = parseOverride(o, raw);
    if ('error' in parsed) {
      errors.push(parsed.error);
      continue;
    }
    if (setIn(tree, o.path, parsed.value)) applied.push({ variable: o.variable, path: o.path });
  }
  return { errors, applied };
}

/** Sets a nested value, creating absent sections; leaves malformed sections for the schema to report. */
function setIn(tree: Record<string, unknown>, path: readonly string[], value: unknown): boolean {
  let node = tree;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (next === undefined || next === null) node[key] = {};
    else if (typeof next !== 'object' || Array.isArray(next)) return false;
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1] as string] = value;
  return true;
}

// ---- rate-limit seeds -----------------------------------------------------------------------

const USER_PATH_PREFIX = 'SET_RATE_LIMIT_';
const PROVIDER_PREFIX = 'SET_PROVIDER_RATE_LIMIT_';

export interface EnvRuleEntry {
  /** The variable that declared it, e.g. `SET_RATE_LIMIT_TEAM__ALICE`. */
  variable: string;
  /** Normalised user path, or provider name. */
  subject: string;
  limits: LimitConfig[];
}

const COMPACT: Record<string, { period: PeriodName; cap: 'max_requests' | 'max_tokens' }> = {
  rpm: { period: 'minute', cap: 'max_requests' },
  tpm: { period: 'minute', cap: 'max_tokens' },
  rph: { period: 'hour', cap: 'max_requests' },
  tph: { period: 'hour', cap: 'max_tokens' },
  rpd: { period: 'day', cap: 'max_requests' },
  tpd: { period: 'day', cap: 'max_tokens' },
  concurrent: { period: 'concurrent', cap: 'max_requests' },
};
const COMPACT_NAMES = Object.keys(COMPACT).join(', ');

/** `SET_RATE_LIMIT_<SUFFIX>` suffix → user path: lowercased, `__` separates segments, `_` stays. */
function userPathFromSuffix(suffix: string): { ok: true; value: string } | { ok: false; error: string } {
  const raw = suffix.toLowerCase().split('__').join('/');
  return normalizeUserPath(raw, `user path "${raw}"`);
}

/** `SET_PROVIDER_RATE_LIMIT_<NAME>` suffix → provider name: `_` → `-`, lowercased. */
function providerFromSuffix(suffix: string): string {
  return suffix.replaceAll('_', '-').toLowerCase();
}

/**
 * Parses a limit value: compact `rpm=100,tpm=50000,concurrent=10` (items for one period merge into
 * one rule) or a JSON array of limit objects validated exactly like YAML limits.
 */
function parseLimitValue(variable: string, raw: string): { limits: LimitConfig[]; errors: string[] } {
  const value = raw.trim();
  if (value === '') {
    return { limits: [], errors: [`${variable}: empty value (expected e.g. rpm=100,tpm=50000 or a JSON array of limits)`] };
  }
  if (value.startsWith('[') || value.startsWith('{')) return parseJsonLimits(variable, value);
  return parseCompactLimits(variable, value);
}

function parseJsonLimits(variable: string, value: string): { limits: LimitConfig[]; errors: string[] } {
  return parseJsonArray(variable, value, limitsSchema, '[{"period_seconds":300,"max_requests":10}]');
}

/** A JSON array of limit objects, validated by `schema` exactly like the YAML list. */
function parseJsonArray<T>(variable: string, value: string, schema: z.ZodType<T[]>, example: string): { limits: T[]; errors: string[] } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (err) {
    return { limits: [], errors: [`${variable}: invalid JSON: ${(err as Error).message}`] };
  }
  if (!Array.isArray(parsed)) {
    return { limits: [], errors: [`${variable}: expected a JSON array of limits, e.g. ${example}`] };
  }
  const result = schema.safeParse(parsed);
  if (!result.success) return { limits: [], errors: formatIssues(result.error.issues, { prefix: [variable] }) };
  return { limits: result.data, errors: [] };
}

function parseCompactLimits(variable: string, value: string): { limits: LimitConfig[]; errors: string[] } {
  const errors: string[] = [];
  const seen = new Set<string>();
  const byPeriod = new Map<PeriodName, LimitConfig>();
  for (const rawItem of value.split(',')) {
    const item = rawItem.trim();
    const eq = item.indexOf('=');
    if (eq === -1) {
      errors.push(
        item === ''
          ? `${variable}: empty item (expected name=value pairs separated by commas, e.g. rpm=100,tpm=50000)`
          : `${variable}: malformed item "${item}" (expected name=value, e.g. rpm=100)`,
      );
      continue;
    }
    const name = item.slice(0, eq).trim().toLowerCase();
    const num = item.slice(eq + 1).trim();
    const spec = COMPACT[name];
    if (spec === undefined) {
      errors.push(`${variable}: unknown limit name "${name}" (expected ${COMPACT_NAMES})`);
      continue;
    }
    if (seen.has(name)) {
      errors.push(`${variable}: duplicate limit name "${name}"`);
      continue;
    }
    seen.add(name);
    if (!/^\d+$/.test(num) || Number(num) < 1 || !Number.isSafeInteger(Number(num))) {
      errors.push(`${variable}: ${name} must be an integer >= 1, got "${num}"`);
      continue;
    }
    const rule = byPeriod.get(spec.period) ?? { period: spec.period };
    rule[spec.cap] = Number(num);
    byPeriod.set(spec.period, rule);
  }
  return errors.length > 0 ? { limits: [], errors } : { limits: [...byPeriod.values()], errors };
}

/** Reads every rate-limit seed variable, sorted by name so results are deterministic. */
export function parseRateLimitEnv(env: Env): {
  userPaths: EnvRuleEntry[];
  providers: EnvRuleEntry[];
  errors: string[];
} {
  const userPaths: EnvRuleEntry[] = [];
  const providers: EnvRuleEntry[] = [];
  const errors: string[] = [];
  for (const variable of Object.keys(env).sort()) {
    const raw = env[variable];
    if (raw === undefined) continue;
    if (variable.startsWith(USER_PATH_PREFIX)) {
      const subject = userPathFromSuffix(variable.slice(USER_PATH_PREFIX.length));
      if (!subject.ok) {
        errors.push(`${variable}: ${subject.error}`);
        continue;
      }
      const parsed = parseLimitValue(variable, raw);
      errors.push(...parsed.errors);
      if (parsed.errors.length === 0) userPaths.push({ variable, subject: subject.value, limits: parsed.limits });
    } else if (variable.startsWith(PROVIDER_PREFIX)) {
      const subject = providerFromSuffix(variable.slice(PROVIDER_PREFIX.length));
      const checked = validateProviderSubject(subject, 'provider name');
      if (!checked.ok) {
        errors.push(`${variable}: ${checked.error}`);
        continue;
      }
      const parsed = parseLimitValue(variable, raw);
      parsed.limits.forEach((limit, i) => {
        if (limit.per_child === true) parsed.errors.push(`${variable}[${i}].per_child: ${PER_CHILD_ONLY_USER_PATHS}`);
      });
      errors.push(...parsed.errors);
      if (parsed.errors.length === 0) providers.push({ variable, subject, limits: parsed.limits });
    }
  }
  return { userPaths, providers, errors };
}

// ---- budget seeds ---------------------------------------------------------------------------

const BUDGET_PREFIX = 'SET_BUDGET_';
const BUDGET_NAMES = ['day', 'week', 'month'] as const;

export interface EnvBudgetEntry {
  /** The variable that declared it, e.g. `SET_BUDGET_TEAM__ALICE`. */
  variable: string;
  /** Normalised user path. */
  userPath: string;
  limits: BudgetLimitConfig[];
}

/**
 * Reads every `SET_BUDGET_<SUFFIX>` variable (suffix → user path as for `SET_RATE_LIMIT_*`),
 * sorted by name. Values: compact `day=10,week=50,month=200` (dollars) or a JSON array of budget
 * limit objects validated exactly like YAML limits.
 */
export function parseBudgetEnv(env: Env): { userPaths: EnvBudgetEntry[]; errors: string[] } {
  const userPaths: EnvBudgetEntry[] = [];
  const errors: string[] = [];
  for (const variable of Object.keys(env).sort()) {
    const raw = env[variable];
    if (raw === undefined || !variable.startsWith(BUDGET_PREFIX)) continue;
    const path = userPathFromSuffix(variable.slice(BUDGET_PREFIX.length));
    if (!path.ok) {
      errors.push(`${variable}: ${path.error}`);
      continue;
    }
    const value = raw.trim();
    const parsed =
      value === ''
        ? { limits: [], errors: [`${variable}: empty value (expected e.g. day=10,month=200 or a JSON array of budget limits)`] }
        : value.startsWith('[') || value.startsWith('{')
          ? parseJsonArray(variable, value, budgetLimitsSchema, '[{"period_seconds":3600,"max_usd":5}]')
          : parseCompactBudgets(variable, value);
    errors.push(...parsed.errors);
    if (parsed.errors.length === 0) userPaths.push({ variable, userPath: path.value, limits: parsed.limits });
  }
  return { userPaths, errors };
}

function parseCompactBudgets(variable: string, value: string): { limits: BudgetLimitConfig[]; errors: string[] } {
  const errors: string[] = [];
  const limits = new Map<string, BudgetLimitConfig>();
  for (const rawItem of value.split(',')) {
    const item = rawItem.trim();
    const eq = item.indexOf('=');
    if (eq === -1) {
      errors.push(`${variable}: malformed item "${item}" (expected name=dollars separated by commas, e.g. day=10,month=200)`);
      continue;
    }
    const name = item.slice(0, eq).trim().toLowerCase();
    const amount = item.slice(eq + 1).trim();
    const period = BUDGET_NAMES.find((n) => n === name);
    if (period === undefined) {
      errors.push(`${variable}: unknown budget period "${name}" (expected ${BUDGET_NAMES.join(', ')}; use a JSON array for period_seconds)`);
      continue;
    }
    if (limits.has(period)) {
      errors.push(`${variable}: duplicate budget period "${period}"`);
      continue;
    }
    const result = budgetLimitsSchema.safeParse([{ period, max_usd: /^\d+(\.\d+)?$/.test(amount) ? Number(amount) : amount }]);
    if (!result.success) {
      errors.push(`${variable}: ${period} ${result.error.issues[0]?.message ?? 'is invalid'}, got "${amount}"`);
      continue;
    }
    limits.set(period, result.data[0]!);
  }
  return errors.length > 0 ? { limits: [], errors } : { limits: [...limits.values()], errors };
}
