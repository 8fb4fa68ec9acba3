import type { Usage } from '../providers/types.ts';
import { isRecord } from '../shared/json.ts';

/**
 * The usage of a `response.done` server event, or undefined for any other event. Audio deltas are
 * large and frequent, so a substring check keeps them from being parsed at all.
 */
export function usageOfServerEvent(data: string): Usage | undefined {
  if (!data.includes('"response.done"')) return undefined;
  let event: unknown;
  try {
    event = JSON.parse(data);
  } catch {
    return undefined;
  }
  if (!isRecord(event) || event.type !== 'response.done' || !isRecord(event.response)) return undefined;
  const usage = event.response.usage;
  if (!isRecord(usage)) return undefined;
  const input = count(usage.input_tokens);
  const output = count(usage.output_tokens);
  const total = typeof usage.total_tokens === 'number' ? count(usage.total_tokens) : input + output;
  return { promptTokens: input, completionTokens: output, totalTokens: total };
}

/** True for a client event that starts a response (its latency is measured from here). */
export function isResponseCreate(data: string): boolean {
  return data.includes('"response.create"');
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}
