/**
 * Bodies of the rate-limit admin API (`/admin/rate-limits`). The shapes are zod's; what a value means
 * (user-path normalisation, subject rules, periods, caps) is the engine's, called from the
 * transforms so the admin API, the configuration and the engine agree on one definition.
 */
import { z } from 'zod';
import type { RuleWrite } from '../../admin/rate-limit-rules.ts';
import { MAX_CAP, MAX_PERIOD_SECONDS, SCOPES, normalizeSubject, parsePeriod, parsePeriodSeconds, validateLimits, validatePerChild, type RuleKey, type Scope } from '../../ratelimit/index.ts';
import { checked, leadingField, refuse, valueOf } from './checks.ts';

const text = () => z.string({ error: 'must be a string' });

/** Who a rule is about: `user_path`, or `scope` and `subject`. */
const subjectFields = {
  user_path: text().optional(),
  scope: z.enum(SCOPES, { error: `must be one of ${SCOPES.join(', ')}` }).optional(),
  subject: text().optional(),
};

/**
 * Numbers the engine checks to be whole (with its own messages); the OpenAPI document says so.
 * `maximum` is the largest value the engine takes.
 */
const wholeNumber = (minimum: number, maximum: number, description: string) =>
  z.number({ error: 'must be a number' }).meta({ type: 'integer', minimum, maximum, description });

/** Which window: a named period (a numeric string means seconds) or `period_seconds`. */
const periodFields = {
  period: z
    .union([z.string(), z.number()], { error: 'must be a period name (minute, hour, day, concurrent) or a number of seconds' })
    .optional()
    .meta({ description: 'minute, hour, day or concurrent; a number means seconds.' }),
  period_seconds: wholeNumber(1, MAX_PERIOD_SECONDS, 'A custom window of this many seconds, aligned to the Unix epoch.').optional(),
};

type SubjectFields = { user_path?: string | undefined; scope?: Scope | undefined; subject?: string | undefined };
type PeriodFields = { period?: string | number | undefined; period_seconds?: number | undefined };

/** `user_path` is shorthand for scope user_path; scope provider/model needs `subject` and rejects `user_path`. */
function ruleSubject(body: SubjectFields): Pick<RuleKey, 'scope' | 'subject'> {
  if (body.user_path !== undefined) {
    if (body.scope !== undefined && body.scope !== 'user_path') refuse(['user_path'], `user_path: not allowed with scope "${body.scope}"; use subject`);
    if (body.subject !== undefined) refuse(['subject'], 'subject: not allowed together with user_path');
    return { scope: 'user_path', subject: valueOf(normalizeSubject('user_path', body.user_path, 'user_path'), ['user_path']) };
  }
  if (body.scope === undefined) refuse(['scope'], 'scope: required (or user_path for a user-path rule)');
  if (body.subject === undefined) refuse(['subject'], 'subject: required when scope is given');
  return { scope: body.scope, subject: valueOf(normalizeSubject(body.scope, body.subject, 'subject'), ['subject']) };
}

/** Exactly one of `period` or `period_seconds`, in seconds; `prefix` is where the pair sits, for the messages. */
function periodSeconds(pair: PeriodFields, prefix: string): number {
  const { period: named, period_seconds: seconds } = pair;
  if (named !== undefined && seconds !== undefined) refuse(['period'], `${prefix}period: give either period or period_seconds, not both`);
  if (named !== undefined) return valueOf(parsePeriod(named, `${prefix}period`), ['period']);
  if (seconds !== undefined) return valueOf(parsePeriodSeconds(seconds, `${prefix}period_seconds`), ['period_seconds']);
  return refuse(['period'], `${prefix}period: required (minute, hour, day, concurrent) or ${prefix}period_seconds`);
}

/** `{"period": "minute"}` or `{"period_seconds": 300}`, as seconds. */
const limitKey = z
  .strictObject(periodFields, { error: 'must be an object with period or period_seconds' })
  .transform(checked((pair) => periodSeconds(pair, 'limit_key.')));

const cap = wholeNumber(1, MAX_CAP, 'A cap; null or absent: none.').nullable().optional();

/** User-path rules only: each direct child of the path counts on a counter of its own (its path itself keeps the rule's own). */
const perChild = z
  .boolean({ error: 'must be true or false' })
  .nullable()
  .optional()
  .meta({ description: 'User-path rules only: each direct child of the path gets its own counter with these caps. A change moves the rule (its counters restart).' });

/** `PUT /admin/rate-limits`: creates a rule or replaces its caps. */
export const putRateLimitBody = z
  .strictObject({ ...subjectFields, limit_key: limitKey, max_requests: cap, max_tokens: cap, per_child: perChild })
  .transform(checked((body): RuleWrite => {
    const key = { ...ruleSubject(body), periodSeconds: body.limit_key };
    // The caps' bounds and which caps a concurrent or windowed rule needs; each message begins with the cap it is about.
    const limits = validateLimits(key.periodSeconds, body.max_requests, body.max_tokens);
    if (!limits.ok) refuse([leadingField(limits.error) ?? 'max_requests'], limits.error);
    const children = valueOf(validatePerChild(key.scope, body.per_child), ['per_child']);
    return { ...key, maxRequests: limits.value.maxRequests, maxTokens: limits.value.maxTokens, ...(children && { perChild: true }) };
  }));

const CHILDREN_LIMIT_ERROR = 'must be an integer from 0 to 1000';

/** `GET /admin/rate-limits?expand=children&children_limit=N` */
export const listRateLimitsQuery = z.strictObject({
  expand: z
    .enum(['children'], { error: 'must be children' })
    .optional()
    .meta({ description: '`children`: after each per-child rule, one record per active child, `user_path` set to the child; the rule\'s own record then carries `active_children`.' }),
  children_limit: z
    .string({ error: CHILDREN_LIMIT_ERROR })
    .regex(/^\d{1,4}$/, { error: CHILDREN_LIMIT_ERROR })
    .transform(Number)
    .pipe(z.int().max(1000, { error: CHILDREN_LIMIT_ERROR }))
    .optional()
    .meta({ description: 'With `expand=children` only: at most this many children per rule, the busiest first (most requests counted or slots held, then most tokens). Default: every active child, by child.' }),
});

/** `DELETE /admin/rate-limits`: the rule's key. */
export const deleteRateLimitBody = z
  .strictObject({ ...subjectFields, limit_key: limitKey })
  .transform(checked((body): RuleKey => ({ ...ruleSubject(body), periodSeconds: body.limit_key })));

/**
 * `POST /admin/rate-limits/reset-one`: the rule's key, its period at the top level, or in
 * `limit_key` as PUT and DELETE take it.
 */
export const resetOneRateLimitBody = z
  .strictObject({ ...subjectFields, ...periodFields, limit_key: limitKey.optional() })
  .transform(checked((body): RuleKey => {
    if (body.limit_key !== undefined && (body.period !== undefined || body.period_seconds !== undefined)) {
      refuse(['limit_key'], 'limit_key: give either limit_key or period (period_seconds), not both');
    }
    const seconds = body.limit_key ?? periodSeconds(body, '');
    return { ...ruleSubject(body), periodSeconds: seconds };
  }));

/** `POST /admin/rate-limits/reset`: every counter, on an explicit confirmation. */
export const resetRateLimitsBody = z.strictObject({
  confirmation: z.literal('reset', { error: 'must be the word "reset" to reset every rate-limit counter' }),
});
