/**
 * Targets saturated by learned capacity, between gateways: the batch script publishes every write
 * that leaves a target saturated or ends its saturation (see scripts.ts), and each gateway keeps
 * what it heard, so that an admission no rule governs is judged without a round trip. Pub/sub
 * delivers at most once: a gateway that missed a message calls the target, and learns from its
 * answer.
 */
import type { Redis } from 'ioredis';
import { CAUSES, type LearnedCause } from '../../ratelimit/index.ts';

export interface HeardSaturation {
  /** The target's key in Redis. */
  readonly redisKey: string;
  /** How long it lasts from now, in ms; 0: it is over. */
  readonly forMs: number;
  readonly cause: LearnedCause | undefined;
}

/** Listens on the channel; calls `heard` with each well-formed message. */
export function listenForSaturations(subscriber: Redis, channel: string, heard: (saturation: HeardSaturation) => void): void {
  subscriber.on('message', (from: string, text: string) => {
    if (from !== channel) return;
    const saturation = parseSaturation(text);
    if (saturation !== undefined) heard(saturation);
  });
}

/** `<key>\n<ms>\n<cause>`; the key may hold anything, the two numbers end the message. */
export function parseSaturation(text: string): HeardSaturation | undefined {
  const last = text.lastIndexOf('\n');
  const middle = last <= 0 ? -1 : text.lastIndexOf('\n', last - 1);
  if (middle <= 0) return undefined;
  const forText = text.slice(middle + 1, last);
  const codeText = text.slice(last + 1);
  if (!/^\d{1,15}$/.test(forText) || !/^\d$/.test(codeText)) return undefined;
  const forMs = Number(forText);
  const code = Number(codeText);
  if (code >= CAUSES.length) return undefined;
  return { redisKey: text.slice(0, middle), forMs, cause: CAUSES[code] };
}
