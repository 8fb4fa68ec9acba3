/**
 * Normalisation and validation shared by the engine, the config parser and the admin
 * API. Every function returns a Result whose error names the offending field, so each
 * caller can surface it unchanged (400 message, config error, ...).
 */
import { normalizeUserPath } from '../user-path/user-path.ts';
import { fail, ok, SCOPES } from './types.ts';
import type { Result, RuleDefinition, RuleSource, Scope } from './types.ts';

export const NAMED_PERIODS: Readonly<Record<string, number>> = {
  minute: 60,
  hour: 3600,
  day: 86400,
  concurrent: 0,
};

/** 366 days: longer windows are not rate limits (budgets cover spend over months). */
export const MAX_PERIOD_SECONDS = 31_622_400;
/** The largest integer a JSON number carries exactly. */
export const MAX_CAP = Number.MAX_SAFE_INTEGER;

// Control characters can't travel in an HTTP header and would let two different
// strings collide with the engine's internal key separators, so they are refused.
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
const WHITESPACE = /\s/;

/** A provider instance name: non-empty, no `/`, no whitespace (surrounding whitespace is trimmed). */
export function validateProviderSubject(raw: unknown, field = 'subject'): Result<string> {
  if (typeof raw !== 'string') return fail(`${field} must be a string`);
  const name = raw.trim();
  if (name === '') return fail(`${field} must not be empty`);
  if (name.includes('/') || WHITESPACE.test(name) || CONTROL_CHARS.test(name)) {
    return fail(`${field} must be a provider name without '/' or whitespace`);
  }
  return ok(name);
}

/** A model subject: `<provider>/<model>` or a bare `<model>`; non-empty, must not begin or end with `/`. */
export function validateModelSubject(raw: unknown, field = 'subject'): Result<string> {
  if (typeof raw !== 'string') return fail(`${field} must be a string`);
  const model = raw.trim();
  if (model === '') return fail(`${field} must not be empty`);
  if (model.startsWith('/') || model.endsWith('/')) return fail(`${field} must not begin or end with '/'`);
  if (CONTROL_CHARS.test(model)) return fail(`${field} must not contain control characters`);
  return ok(model);
}

export function parseScope(raw: unknown, field = 'scope'): Result<Scope> {
  if (typeof raw === 'string' && (SCOPES as readonly string[]).includes(raw)) return ok(raw as Scope);
  return fail(`${field} must be one of ${SCOPES.join(', ')}`);
}

/** Normalise a subject for its scope (user paths are canonicalised, others validated and trimmed). */
export function normalizeSubject(scope: Scope, raw: unknown, field = 'subject'): Result<string> {
  switch (scope) {
    case 'user_path':
      return normalizeUserPath(raw, field);
    case 'provider':
      return validateProviderSubject(raw, field);
    case 'model':
      return validateModelSubject(raw, field);
  }
}

/**
 * A period as a number of seconds: `minute` 60, `hour` 3600, `day` 86400,
 * `concurrent` 0, or a positive integer number of seconds (a numeric string means
 * seconds, so `"300"` is a 300 s window).
 */
export function parsePeriod(raw: unknown, field = 'period'): Result<number> {
  if (typeof raw === 'string') {
    const text = raw.trim().toLowerCase();
    const named = NAMED_PERIODS[text];
    if (named !== undefined) return ok(named);
    if (/^\d+$/.test(text)) return parsePeriodSeconds(Number(text), field);
  } else if (typeof raw === 'number') {
    return parsePeriodSeconds(raw, field);
  }
  return fail(`${field} must be one of minute, hour, day, concurrent, or a number of seconds from 1 to ${MAX_PERIOD_SECONDS}`);
}

/** A custom window length: 1 s to 366 days (0/concurrency is only expressible by name). */
export function parsePeriodSeconds(raw: unknown, field = 'period_seconds'): Result<number> {
  if (typeof raw === 'number' && Number.isInteger(raw) && raw >= 1 && raw <= MAX_PERIOD_SECONDS) return ok(raw);
  return fail(`${field} must be an integer from 1 to ${MAX_PERIOD_SECONDS} (366 days)`);
}

/**
 * Resolve the `period` / `period_seconds` pair used by YAML items and admin payloads.
 * One of the two is required; when both are present they must agree.
 */
export function resolvePeriod(period: unknown, periodSeconds: unknown, fieldPrefix = ''): Result<number> {
  const hasPeriod = period !== undefined && period !== null;
  const hasSeconds = periodSeconds !== undefined && periodSeconds !== null;
  if (!hasPeriod && !hasSeconds) return fail(`${fieldPrefix}period or ${fieldPrefix}period_seconds is required`);
  const fromSeconds = hasSeconds ? parsePeriodSeconds(periodSeconds, `${fieldPrefix}period_seconds`) : undefined;
  if (!hasPeriod) return fromSeconds as Result<number>;
  const fromPeriod = parsePeriod(period, `${fieldPrefix}period`);
  if (!fromPeriod.ok || fromSeconds === undefined) return fromPeriod;
  if (!fromSeconds.ok) return fromSeconds;
  if (fromSeconds.value !== fromPeriod.value) {
    return fail(`${fieldPrefix}period and ${fieldPrefix}period_seconds disagree`);
  }
  return fromPeriod;
}

/** Display label of a period: `minute`, `hour`, `day`, `concurrent`, otherwise `<n>s`. */
export function periodLabel(periodSeconds: number): string {
  switch (periodSeconds) {
    case 0:
      return 'concurrent';
    case 60:
      return 'minute';
    case 3600:
      return 'hour';
    case 86400:
      return 'day';
    default:
      return `${periodSeconds}s`;
  }
}

/** A cap is absent (undefined/null) or an integer from 1 to 2^53 - 1. */
export function validateCap(raw: unknown, field: string): Result<number | undefined> {
  if (raw === undefined || raw === null) return ok(undefined);
  if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= 1) return ok(raw);
  return fail(`${field} must be an integer from 1 to ${MAX_CAP}`);
}

export interface RuleLimits {
  readonly maxRequests?: number | undefined;
  readonly maxTokens?: number | undefined;
}

/**
 * Caps are integers >= 1; a concurrent rule needs max_requests and may not have
 * max_tokens; a windowed rule needs at least one cap.
 */
export function validateLimits(periodSeconds: number, maxRequests: unknown, maxTokens: unknown): Result<RuleLimits> {
  const requests = validateCap(maxRequests, 'max_requests');
  if (!requests.ok) return requests;
  const tokens = validateCap(maxTokens, 'max_tokens');
  if (!tokens.ok) return tokens;
  if (periodSeconds === 0) {
    if (requests.value === undefined) return fail('max_requests is required for a concurrent rule');
    if (tokens.value !== undefined) return fail('max_tokens is not allowed for a concurrent rule');
  } else if (requests.value === undefined && tokens.value === undefined) {
    return fail('max_requests or max_tokens is required');
  }
  return ok({ maxRequests: requests.value, maxTokens: tokens.value });
}

/** `per_child` is a boolean (absent or null: false), and only user-path rules have children. */
export function validatePerChild(scope: Scope, raw: unknown, field = 'per_child'): Result<boolean> {
  if (raw === undefined || raw === null || raw === false) return ok(false);
  if (raw !== true) return fail(`${field} must be true or false`);
  if (scope !== 'user_path') return fail(`${field} is only for user-path rules (a ${scope} rule has no children)`);
  return ok(true);
}

export interface RuleInput {
  readonly scope: unknown;
  readonly subject: unknown;
  /** Already resolved with parsePeriod/resolvePeriod. */
  readonly periodSeconds: number;
  readonly maxRequests?: unknown;
  readonly maxTokens?: unknown;
  /** `true` for a per-child rule (user-path rules only); absent, null or false otherwise. */
  readonly perChild?: unknown;
  readonly source: RuleSource;
  readonly createdAt: Date;
  readonly updatedAt?: Date;
}

/** Validate and normalise everything about a rule; the one-stop check for config and admin input. */
export function buildRule(input: RuleInput): Result<RuleDefinition> {
  const scope = parseScope(input.scope);
  if (!scope.ok) return scope;
  const subject = normalizeSubject(scope.value, input.subject, scope.value === 'user_path' ? 'user_path' : 'subject');
  if (!subject.ok) return subject;
  if (input.periodSeconds !== 0) {
    const period = parsePeriodSeconds(input.periodSeconds);
    if (!period.ok) return period;
  }
  const limits = validateLimits(input.periodSeconds, input.maxRequests, input.maxTokens);
  if (!limits.ok) return limits;
  const perChild = validatePerChild(scope.value, input.perChild);
  if (!perChild.ok) return perChild;
  return ok({
    scope: scope.value,
    subject: subject.value,
    periodSeconds: input.periodSeconds,
    maxRequests: limits.value.maxRequests,
    maxTokens: limits.value.maxTokens,
    ...(perChild.value && { perChild: true as const }),
    source: input.source,
    createdAt: input.createdAt,
    updatedAt: input.updatedAt ?? input.createdAt,
  });
}
