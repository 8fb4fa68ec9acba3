/**
 * What a request reserves at admission when reservations are on: the prompt tokens counted from
 * its body (see estimatePromptTokens: exact for OpenAI models, the o200k_base count for others)
 * plus the completion tokens it allows itself (`max_completion_tokens`, `max_tokens`,
 * `max_output_tokens`, times `n` choices), or the configured default when it sets none.
 */
import { isRecord } from '../shared/json.ts';
import { estimatePromptTokens } from './estimate.ts';

/** Endpoints whose answers are generated text with a completion cap (embeddings have none to allow). */
const COMPLETING = new Set(['chat', 'completions', 'responses', 'messages']);

export interface TokenEstimate {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly totalTokens: number;
}

/** The completion tokens `body` allows: the first positive whole cap among the dialects' fields, else `fallback`. */
export function allowedCompletionTokens(endpoint: string, body: unknown, fallback: number): number {
  if (!COMPLETING.has(endpoint)) return 0;
  if (!isRecord(body)) return fallback;
  const cap = positive(body.max_completion_tokens) ?? positive(body.max_tokens) ?? positive(body.max_output_tokens);
  const choices = typeof body.n === 'number' && Number.isInteger(body.n) && body.n > 1 ? body.n : 1;
  return (cap === undefined ? fallback : Math.ceil(cap)) * choices;
}

function positive(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
}

/** A request's token estimate for `model`, as admission reserves it: at once when the encoding is loaded (see count.ts). */
export function estimateRequestTokens(model: string, endpoint: string, body: unknown, defaultCompletionTokens: number): TokenEstimate | Promise<TokenEstimate> {
  const completionTokens = allowedCompletionTokens(endpoint, body, defaultCompletionTokens);
  const promptTokens = estimatePromptTokens(model, body);
  return typeof promptTokens === 'number' ? tokenEstimate(promptTokens, completionTokens) : promptTokens.then((counted) => tokenEstimate(counted, completionTokens));
}

function tokenEstimate(promptTokens: number, completionTokens: number): TokenEstimate {
  return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
}
