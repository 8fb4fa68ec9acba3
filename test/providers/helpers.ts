import type { ProviderResult } from '../../src/providers/types.ts';
import { SseParser } from '../../src/providers/sse.ts';
import { Cancellation } from '../../src/providers/cancellation.ts';

export async function bodyOf(result: ProviderResult): Promise<Buffer> {
  if (Buffer.isBuffer(result.body)) return result.body;
  const chunks: Buffer[] = [];
  for await (const c of result.body) chunks.push(c);
  return Buffer.concat(chunks);
}

export async function jsonOf(result: ProviderResult): Promise<Record<string, unknown>> {
  return JSON.parse((await bodyOf(result)).toString('utf8')) as Record<string, unknown>;
}

/** The data payloads of an SSE body (`[DONE]` kept as the string). */
export function sseData(text: string): Array<Record<string, unknown> | string> {
  const p = new SseParser();
  return [...p.push(text), ...p.end()]
    .filter((e) => e.data !== undefined)
    .map((e) => (e.data === '[DONE]' ? '[DONE]' : (JSON.parse(e.data as string) as Record<string, unknown>)));
}

export function sseEvents(text: string): Array<{ event: string | undefined; data: Record<string, unknown> }> {
  const p = new SseParser();
  return [...p.push(text), ...p.end()]
    .filter((e) => e.data !== undefined && e.data !== '[DONE]')
    .map((e) => ({ event: e.event, data: JSON.parse(e.data as string) as Record<string, unknown> }));
}

export function streamOf(result: ProviderResult): AsyncIterable<Buffer> {
  if (Buffer.isBuffer(result.body)) throw new Error('expected a streamed body');
  return result.body;
}

export function never(): Cancellation {
  return new Cancellation();
}

export async function waitFor(cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
