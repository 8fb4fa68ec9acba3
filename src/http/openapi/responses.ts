/**
 * Response bodies as the OpenAPI document shows them. These schemas validate nothing: the
 * handlers build their answers from the engine's and storage's own types, and the type checks
 * at the bottom keep the documented shapes in step with those types.
 */
import { z } from 'zod';
import type { ErrorType } from '../../errors/gateway-error.ts';
import type { BudgetStatus } from '../../budgets/types.ts';
import type { RuleStatus, UserPathUsage } from '../../ratelimit/index.ts';
import { PRIORITIES, SCOPES } from '../../ratelimit/index.ts';
import { EXPLAIN_ENDPOINTS } from '../schemas/admin-explain.ts';

const ERROR_TYPES = ['provider_error', 'rate_limit_error', 'invalid_request_error', 'authentication_error', 'not_found_error'] as const satisfies readonly ErrorType[];

/** The gateway error record: what every error answer carries. */
export const errorRecord = z.object({
  type: z.enum(ERROR_TYPES),
  message: z.string().meta({ description: 'What went wrong; a validation message names the field.' }),
  param: z.string().nullable().meta({ description: 'The offending field, when there is one.' }),
  code: z.string().nullable().meta({ description: 'A stable code, e.g. rate_limit_exceeded, budget_exceeded, feature_unavailable, rule_managed_by_config.' }),
});
export const errorBody = z.object({ error: errorRecord }).meta({ description: 'Every error on OpenAI-dialect and admin routes.' });
export const anthropicErrorBody = z
  .object({ type: z.literal('error'), error: z.object({ type: z.string(), message: z.string() }) })
  .meta({ description: 'Errors of /v1/messages, in the Anthropic shape.' });

const timestamp = z.string().meta({ description: 'RFC 3339 UTC, e.g. 2025-01-01T00:00:00Z.' });

/** One rule with its live counters; every counter field is present on every rule (0 where it does not apply). */
export const ruleStatusRecord = z.object({
  scope: z.enum(SCOPES),
  subject: z.string(),
  user_path: z.string().meta({ description: 'The subject of a user_path rule (on a child\'s record of a per-child rule, the child\'s path); empty for provider and model rules.' }),
  source: z.enum(['manual', 'config']),
  period_label: z.string().meta({ description: 'minute, hour, day, concurrent, or <n>s for a custom window.' }),
  period_seconds: z.int().meta({ description: '0 for a concurrent rule.' }),
  max_requests: z.int().optional(),
  max_tokens: z.int().optional(),
  per_child: z.literal(true).optional().meta({ description: 'Present on per-child rules and their children\'s records.' }),
  active_children: z.int().optional().meta({ description: 'On a per-child rule\'s own record with expand=children: how many of its children are active.' }),
  requests_used: z.int().meta({ description: 'The sliding estimate of the window (the slot count on a concurrent rule).' }),
  requests_remaining: z.int().optional().meta({ description: 'max(max_requests - requests_used, 0); absent without max_requests.' }),
  tokens_used: z.int(),
  tokens_reserved: z.int().optional().meta({ description: 'With rate_limits.reservations on, on rules with a token cap: the tokens running requests reserved at admission (not in tokens_used; tokens_remaining counts them as used).' }),
  tokens_remaining: z.int().optional().meta({ description: 'max(max_tokens - tokens_used - tokens_reserved, 0); absent without max_tokens.' }),
  in_flight: z.int().meta({ description: 'Live concurrency slots; 0 on a windowed rule.' }),
  window_start: timestamp.optional().meta({ description: 'The current fixed window; absent on a concurrent rule.' }),
  window_end: timestamp.optional(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const rateLimitList = z.object({
  rate_limits: z.array(ruleStatusRecord).meta({ description: 'Sorted by scope, subject, period_seconds.' }),
  server_time: z.string().meta({ description: 'RFC 3339 UTC with milliseconds.' }),
});

/** One budget with its spend in the current period. */
export const budgetStatusRecord = z.object({
  user_path: z.string().meta({ description: 'The budget covers this path and everything below it.' }),
  source: z.enum(['manual', 'config']),
  period_label: z.string().meta({ description: 'day, week, month, or <n>s for a custom window.' }),
  period_seconds: z.int().meta({ description: 'The length of the current period (a month\'s varies).' }),
  max_usd: z.number(),
  spent_usd: z.number().meta({ description: 'Spend in the current period, from the usage records.' }),
  reserved_usd: z.number().optional().meta({ description: 'With budgets.reservations on: the estimated cost of the requests running now, reserved at admission (not in spent_usd); with Redis counters, those of every replica.' }),
  remaining_usd: z.number().meta({ description: 'max(max_usd - spent_usd - reserved_usd, 0).' }),
  period_start: timestamp,
  period_end: timestamp,
  created_at: timestamp,
  updated_at: timestamp,
});

export const budgetList = z.object({
  budgets: z.array(budgetStatusRecord).meta({ description: 'Sorted by user path, then period length.' }),
  server_time: z.string().meta({ description: 'RFC 3339 UTC with milliseconds.' }),
});

export const statusOk = z.object({ status: z.literal('ok') });

export const health = z.object({
  status: z.enum(['ok', 'degraded']),
  rate_limits: z.string().optional().meta({ description: 'Why the gateway is degraded, e.g. "redis unreachable".' }),
});

export const readiness = z.object({
  status: z.enum(['ready', 'draining', 'unavailable']),
  degraded: z.string().optional().meta({ description: 'Ready, but degraded: why (e.g. "redis unreachable" while counting locally).' }),
  reason: z.string().optional().meta({ description: 'Why the gateway is unavailable: "storage unreachable: …", or "redis unreachable" with on_error deny.' }),
});

export const apiKeyRecord = z.object({
  id: z.string(),
  name: z.string(),
  user_path: z.string().nullable().meta({ description: 'The user path the key is bound to; null: the user-path header decides.' }),
  max_priority: z.enum(PRIORITIES).meta({ description: 'The highest priority the key\'s requests are served at.' }),
  created_at: timestamp,
});
export const apiKeyCreated = apiKeyRecord.extend({ key: z.string().meta({ description: 'The secret, shown once.' }) });
export const apiKeyList = z.object({ api_keys: z.array(apiKeyRecord) });
export const apiKeyDeleted = z.object({ id: z.string(), deleted: z.literal(true) });

export const modelList = z.object({
  object: z.literal('list'),
  data: z.array(z.object({ id: z.string(), object: z.literal('model'), created: z.int(), owned_by: z.string() })),
});

// A model endpoint's answer is the provider's, in the endpoint's wire shape (translated when the
// provider speaks another dialect): the fields below are what the gateway guarantees and reads;
// the provider's other fields pass through.
const openAiUsage = z.looseObject({
  prompt_tokens: z.int(),
  completion_tokens: z.int(),
  total_tokens: z.int(),
  prompt_tokens_details: z.looseObject({ cached_tokens: z.int().optional() }).optional(),
});

/** `POST /v1/chat/completions` (not streamed). */
export const chatCompletion = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.int().meta({ description: 'Unix seconds.' }),
  model: z.string().meta({ description: 'The model that answered, as the provider names it.' }),
  choices: z.array(
    z.looseObject({
      index: z.int(),
      message: z.looseObject({
        role: z.literal('assistant'),
        content: z.string().nullable(),
        tool_calls: z.array(z.looseObject({ id: z.string(), type: z.string(), function: z.looseObject({ name: z.string(), arguments: z.string() }) })).optional(),
      }),
      finish_reason: z.string().nullable().meta({ description: 'stop, length, tool_calls, content_filter, ...' }),
    }),
  ),
  usage: openAiUsage.optional(),
});

/** `POST /v1/responses` (not streamed). */
export const responseObject = z.looseObject({
  id: z.string(),
  object: z.literal('response'),
  created_at: z.int(),
  model: z.string(),
  status: z.string().meta({ description: 'completed, incomplete, failed, ...' }),
  output: z.array(z.looseObject({ type: z.string().meta({ description: 'message, function_call, reasoning, ...' }) })),
  usage: z.looseObject({ input_tokens: z.int(), output_tokens: z.int(), total_tokens: z.int() }).optional(),
});

/** `POST /v1/embeddings`. */
export const embeddingList = z.looseObject({
  object: z.literal('list'),
  data: z.array(
    z.looseObject({
      object: z.literal('embedding'),
      index: z.int(),
      embedding: z.union([z.array(z.number()), z.string()]).meta({ description: 'Numbers, or base64 with encoding_format: base64.' }),
    }),
  ),
  model: z.string(),
  usage: z.looseObject({ prompt_tokens: z.int(), total_tokens: z.int() }),
});

/** `POST /v1/audio/transcriptions` (the json and verbose_json formats; text, srt and vtt answer text/plain). */
export const transcription = z.looseObject({ text: z.string() });

/** `POST /v1/messages` (not streamed), in the Anthropic shape. */
export const anthropicMessage = z.looseObject({
  id: z.string(),
  type: z.literal('message'),
  role: z.literal('assistant'),
  model: z.string(),
  content: z.array(z.looseObject({ type: z.string().meta({ description: 'text, tool_use, thinking, ...' }), text: z.string().optional() })),
  stop_reason: z.string().nullable().meta({ description: 'end_turn, max_tokens, stop_sequence, tool_use, ...' }),
  usage: z.looseObject({ input_tokens: z.int(), output_tokens: z.int(), cache_read_input_tokens: z.int().optional() }),
});

/** `POST /v1/audio/speech`: the audio's bytes. */
export const audio = z.string().meta({ contentMediaType: 'audio/*', description: 'The audio, in the requested response_format (mp3 by default).' });

const usageRow = {
  requests: z.int(),
  prompt_tokens: z.int(),
  completion_tokens: z.int(),
  total_tokens: z.int(),
  cached_prompt_tokens: z.int().meta({ description: 'Prompt tokens the provider served from its prompt cache.' }),
  cost_usd: z.number().meta({ description: 'What the requests cost in US dollars (0 for models without a price).' }),
  cached_requests: z.int(),
  estimated_requests: z.int().meta({ description: 'Requests whose token counts the gateway estimated: streams that ended before their provider reported usage.' }),
};
export const userPathUsage = ruleStatusRecord.extend({
  requests_usage_ratio: z.number().optional(),
  tokens_usage_ratio: z.number().optional(),
  resets_in_seconds: z.int().optional(),
  exhausted: z.boolean().meta({ description: 'Whether this rule would refuse a request now.' }),
});
export const usageSummary = z.object({
  user_path: z.string(),
  from: timestamp,
  to: timestamp,
  totals: z.object(usageRow),
  by_model: z.array(z.object({ provider: z.string(), model: z.string(), ...usageRow })),
  rate_limits: z.array(userPathUsage).meta({ description: 'The user-path rules governing the caller, with their live counters.' }),
  budgets: z.array(budgetStatusRecord).meta({ description: 'The budgets governing the caller, with their spend.' }),
});

export const usageBuckets = z.object({
  buckets: z
    .array(
      z.object({
        start: timestamp.meta({ description: 'Start of the UTC hour or day.' }),
        key: z.string().meta({ description: 'The user path as recorded, provider/model, or the provider.' }),
        requests: z.int(),
        prompt_tokens: z.int(),
        completion_tokens: z.int(),
        cost_usd: z.number().meta({ description: 'What the requests cost in US dollars (docs/budgets.md).' }),
        cache_hits: z.int().meta({ description: 'Requests answered from the response cache.' }),
        refused: z.int().meta({
          description: 'Requests refused with a 429 by a rate limit or a budget (grouped by the user path refused, or the provider/model it asked for; counted in memory and written at most once a minute).',
        }),
      }),
    )
    .meta({ description: 'One entry per bucket and group with records or refusals, by start then key.' }),
});

const breachRecord = z.object({
  scope: z.enum(SCOPES),
  subject: z.string(),
  period_label: z.string(),
  retry_after_seconds: z.int().meta({ description: 'The Retry-After the 429 would carry.' }),
  message: z.string().meta({ description: 'The 429\'s message.' }),
});
export const explanation = z.object({
  model: z.string(),
  user_path: z.string(),
  endpoint: z.enum(EXPLAIN_ENDPOINTS),
  priority: z.enum(PRIORITIES),
  decision: z.enum(['admitted', 'refused']),
  wait: z
    .object({
      would_wait: z.boolean().meta({ description: 'A refused request with this wait (max_wait, else the default) would wait for capacity rather than get its 429 at once.' }),
      at_most_seconds: z.number().meta({ description: 'How long it would wait at most (its whole wait); 0 when it would not wait.' }),
    })
    .meta({ description: 'Waiting for capacity (docs/rate-limits.md, "Waiting for capacity").' }),
  target: z.object({ provider: z.string(), model: z.string() }).optional().meta({ description: 'Where an admitted request would be sent.' }),
  targets: z.array(
    z.object({
      provider: z.string(),
      model: z.string(),
      failover: z.boolean(),
      has_capacity: z.boolean().meta({ description: 'Whether its own provider and model rules, and its learned capacity, would admit a request.' }),
      learned: z.boolean().meta({ description: 'Whether what was learned from the provider\'s answers saturates it now (docs/rate-limits.md, "Capacity learned from the providers").' }),
      learned_reset_at: timestamp.optional().meta({ description: 'With learned: when its learned saturation ends (the reset or cooldown end).' }),
      breach: breachRecord.optional(),
    }),
  ),
  reservation: z
    .object({
      tokens: z.int().meta({ description: 'The tokens it would reserve on every matching token window (0 with rate_limits.reservations off).' }),
      cost_usd: z.number().optional().meta({ description: 'With budgets.reservations on and a target: the dollars it would reserve on the budgets.' }),
    })
    .optional()
    .meta({ description: 'With reservations on, for model endpoints: the estimate a request would reserve (no prompt: the completion it allows, max_tokens or the default).' }),
  rules: z.array(ruleStatusRecord).meta({ description: 'Every rule that would apply, with its live counters.' }),
  budgets: z.array(budgetStatusRecord).meta({ description: 'The budgets governing the user path, with their spend (checked after the rules).' }),
  breach: breachRecord.optional().meta({ description: 'The refusal a request would get (a reached budget is a user_path breach).' }),
});

const learnedCount = z.int().nullable();
export const learnedCapacity = z.object({
  providers: z
    .array(
      z.object({
        provider: z.string(),
        model: z.string(),
        requests_limit: learnedCount.meta({ description: 'The provider\'s own request limit, as its last answer said.' }),
        requests_remaining: learnedCount,
        requests_reset_at: timestamp.nullable(),
        tokens_limit: learnedCount.meta({ description: 'Its own token limit (Anthropic: the tightest of its token limits).' }),
        tokens_remaining: learnedCount,
        tokens_reset_at: timestamp.nullable(),
        cooldown_until: timestamp.nullable().meta({ description: 'The end of the cooldown after its last refusal (its retry-after, else learned.cooldown_seconds).' }),
        saturated: z.boolean().meta({ description: 'Whether it is routed around now.' }),
        saturated_until: timestamp.nullable(),
        cause: z.enum(['cooldown', 'requests', 'tokens']).nullable().meta({ description: 'Why it is saturated: a refusal\'s cooldown, or its request or token limit at or below the reserve.' }),
        throttled_at: timestamp.nullable().meta({ description: 'When it last refused (429, or 503 with a retry-after).' }),
        updated_at: timestamp,
      }),
    )
    .meta({ description: 'Every (provider, model) something was learned of, by provider then model.' }),
  server_time: timestamp,
});

export const queueStatus = z.object({
  waiting: z.int().meta({ description: 'Requests waiting for capacity in this gateway.' }),
  by_priority: z.object({ high: z.int(), normal: z.int(), low: z.int() }),
  rules: z
    .array(z.object({ scope: z.enum(SCOPES), subject: z.string(), period_label: z.string(), waiting: z.int() }))
    .meta({ description: 'The rules requests wait on (a request refused on several targets waits on each of their rules).' }),
});

export const fileObject = z.object({
  id: z.string(),
  object: z.literal('file'),
  bytes: z.int(),
  created_at: z.int(),
  expires_at: z.int().nullable().meta({ description: 'When the file expires (Unix seconds): it is then removed and answers 404.' }),
  filename: z.string(),
  purpose: z.literal('batch'),
  status: z.string(),
});

export const fileDeleted = z.object({ id: z.string(), object: z.literal('file'), deleted: z.literal(true) });

export const batchObject = z.looseObject({
  id: z.string(),
  object: z.literal('batch'),
  endpoint: z.string(),
  input_file_id: z.string(),
  completion_window: z.string(),
  status: z.string(),
  output_file_id: z.string().nullable(),
  error_file_id: z.string().nullable(),
  created_at: z.int(),
  request_counts: z.object({ total: z.int(), completed: z.int(), failed: z.int() }),
  metadata: z.record(z.string(), z.string()).nullable(),
});
export const batchList = z.object({
  object: z.literal('list'),
  data: z.array(batchObject),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});

// The documented records accept every record the engine writes: a field added or retyped there fails the typecheck here.
type Documents<Written, Schema extends z.ZodType> = Written extends z.input<Schema> ? true : false;
type Holds<Check extends true> = Check;
export type RecordsInStep = Holds<
  Documents<RuleStatus, typeof ruleStatusRecord> & Documents<UserPathUsage, typeof userPathUsage> & Documents<BudgetStatus, typeof budgetStatusRecord>
>;
