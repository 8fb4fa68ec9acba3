import type { Usage } from './types.ts';

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/**
 * Normalises any usage object the supported dialects produce:
 * chat/embeddings (`prompt_tokens`, `completion_tokens`, `total_tokens`),
 * Responses and Anthropic (`input_tokens`, `output_tokens`, optional `total_tokens`).
 * Anthropic's cache read/creation tokens are not part of `input_tokens`, but they are
 * tokens the request consumed, so they are counted as prompt tokens.
 */
export function normalizeUsage(u: unknown): Usage | undefined {
  if (u === null || typeof u !== 'object') return undefined;
  const o = u as Record<string, unknown>;
  const prompt = num(o.prompt_tokens);
  if (prompt !== undefined) {
    const completion = num(o.completion_tokens) ?? 0;
    return { promptTokens: prompt, completionTokens: completion, totalTokens: num(o.total_tokens) ?? prompt + completion };
  }
  const input = num(o.input_tokens);
  const output = num(o.output_tokens);
  if (input === undefined && output === undefined) {
    const total = num(o.total_tokens);
    return total === undefined ? undefined : { promptTokens: total, completionTokens: 0, totalTokens: total };
  }
  const cached = (num(o.cache_creation_input_tokens) ?? 0) + (num(o.cache_read_input_tokens) ?? 0);
  const promptTokens = (input ?? 0) + cached;
  const completionTokens = output ?? 0;
  return { promptTokens, completionTokens, totalTokens: num(o.total_tokens) ?? promptTokens + completionTokens };
}

/** Usage of a whole JSON response body (chat, responses, embeddings, messages, transcriptions). */
export function usageFromBody(body: unknown): Usage | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const o = body as Record<string, unknown>;
  if (o.usage !== undefined) return normalizeUsage(o.usage);
  // Responses API events and bodies nest the response object.
  const r = o.response;
  if (r !== null && typeof r === 'object') return normalizeUsage((r as Record<string, unknown>).usage);
  return undefined;
}

/** Parses a buffered JSON body for its usage; undefined for non-JSON or usage-less bodies. */
export function usageFromJsonBuffer(buf: Buffer): Usage | undefined {
  if (buf.length === 0) return undefined;
  try {
    return usageFromBody(JSON.parse(buf.toString('utf8')));
  } catch {
    return undefined;
  }
}

/** Rough token estimate for offline use (mock provider): about four characters a token. */
export function estimateTokens(text: string): number {
  return text.length === 0 ? 0 : Math.max(1, Math.ceil(text.length / 4));
}
