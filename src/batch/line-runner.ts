import type { Cancellation } from '../providers/cancellation.ts';
import type { Target } from '../routing/types.ts';
import { readBody } from '../providers/results.ts';
import type { Endpoint, ProviderResult, Usage } from '../providers/types.ts';
import type { BatchRecord } from '../storage/batch-files/types.ts';
import type { BatchLine } from './jsonl.ts';

export interface LineOutcome {
  customId: string;
  status: number;
  body: unknown;
  usage: Usage | undefined;
  latencyMs: number;
  /** False for a line refused before it ran (nothing was sent upstream). */
  ran: boolean;
}

/** The answer of a line that must not run. */
export interface LineRefusal {
  status: number;
  body: unknown;
}

/**
 * Runs a batch's lines one by one through the provider's `call`, in the background, for
 * providers whose batch ability is `lines`. `shouldStop` is checked between lines (cancel,
 * shutdown); `refuse` before each line runs (a reached budget): a refused line is answered with
 * its refusal, and the next line is checked again.
 */
export async function runLines(
  target: Target,
  endpoint: Endpoint,
  lines: readonly BatchLine[],
  cancel: Cancellation,
  now: () => number,
  observe: (result: ProviderResult) => void,
  onLine: (outcome: LineOutcome) => Promise<void>,
  shouldStop: () => boolean,
  refuse: () => LineRefusal | undefined = () => undefined,
): Promise<void> {
  for (const line of lines) {
    if (shouldStop() || cancel.cancelled) return;
    const refusal = refuse();
    if (refusal !== undefined) {
      await onLine({ customId: line.customId, ...refusal, usage: undefined, latencyMs: 0, ran: false });
      continue;
    }
    const started = now();
    let status = 500;
    let body: unknown = { error: { type: 'provider_error', message: 'request failed', param: null, code: null } };
    let usage: LineOutcome['usage'];
    try {
      const result = await target.provider.call({ endpoint, model: target.model, json: { ...line.body, model: target.model }, stream: false, cancel });
      observe(result);
      const buf = await readBody(result.body);
      status = result.status;
      try {
        body = JSON.parse(buf.toString('utf8'));
      } catch {
        body = buf.toString('utf8');
      }
      usage = result.usage();
    } catch (err) {
      body = { error: { type: 'provider_error', message: err instanceof Error ? err.message : String(err), param: null, code: null } };
    }
    await onLine({ customId: line.customId, status, body, usage, latencyMs: now() - started, ran: true });
  }
}

/** One line of an output or error file, in OpenAI's batch output format (failed lines go to the error file). */
export function outputLine(batch: BatchRecord, index: number, outcome: LineOutcome): string {
  return JSON.stringify({
    id: `batch_${lineRequestId(batch, index)}`,
    custom_id: outcome.customId,
    response: { status_code: outcome.status, request_id: lineRequestId(batch, index), body: outcome.body },
    error: null,
  });
}

/** The `request_id` of a batch's line in its output (also its usage record's request id). */
export function lineRequestId(batch: BatchRecord, index: number): string {
  return `req_${batch.id.slice('batch_'.length)}_${index}`;
}
