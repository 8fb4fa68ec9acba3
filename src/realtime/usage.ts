import type { Usage } from '../providers/types.ts';
import { isRecord } from '../shared/json.ts';
import { sumCounts, tokenCount } from '../shared/values.ts';

/**
 * The usage of a `response.done` server event, or undefined for any other event. Audio deltas are
 * large and frequent, so a substring check keeps them from being parsed at all.
 */
export function usageOfServerEvent(data: string): Usage | undefined {
  if (!data.includes('"response.done"')) return undefined;
  const event = parseObject(data);
  if (event?.type !== 'response.done' || !isRecord(event.response)) return undefined;
  const usage = event.response.usage;
  if (!isRecord(usage)) return undefined;
  const input = tokenCount(usage.input_tokens) ?? 0;
  const output = tokenCount(usage.output_tokens) ?? 0;
  return { promptTokens: input, completionTokens: output, totalTokens: tokenCount(usage.total_tokens) ?? sumCounts(input, output) };
}

/** True for a client event that may be a `response.create` (a substring test; clientEventOf tells). */
export function isResponseCreate(data: string): boolean {
  return data.includes('"response.create"');
}

/** The type and `event_id` of a client event, or undefined when it is not a JSON object. */
export function clientEventOf(data: string): { type: unknown; eventId: string | null } | undefined {
  const event = parseObject(data);
  if (event === undefined) return undefined;
  return { type: event.type, eventId: typeof event.event_id === 'string' ? event.event_id : null };
}

/** For a `response.created` server event, the id of the response it started; else undefined. */
export function responseCreatedOf(data: string): { responseId: string } | undefined {
  if (!data.includes('"response.created"')) return undefined;
  const event = parseObject(data);
  if (event?.type !== 'response.created' || !isRecord(event.response) || typeof event.response.id !== 'string') return undefined;
  return { responseId: event.response.id };
}

function parseObject(data: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return isRecord(value) ? value : undefined;
  } catch {
    return undefined;
  }
}
