/**
 * Provider capacity learned from the upstream (CONTRACT §12): each (provider, model) keeps one small
 * record of what its last answers said — the provider's own request and token limits, what remained
 * of them and when they reset, and a cooldown after a refusal — and is saturated, exactly like a
 * breached provider or model rule, while
 *
 * - its remaining requests (or tokens) are at or below the provider's `learned.reserve` and their
 *   reset has not passed, or
 * - it refused (a 429, or a 503 saying when to retry) and the wait it asked for (else the
 *   provider's `learned.cooldown_seconds`) has not passed.
 *
 * The record lives in the counter store beside the rules' counters, so that an admission reads it
 * in the same atomic step (and, with Redis, the same round trip) as its rules. The rules of the
 * merge below are the store contract: the memory store runs these functions, and the Redis script
 * (src/counters/redis/scripts.ts) does the same arithmetic on the server's clock. All times are
 * epoch milliseconds.
 */
import type { Capacity, CapacityDimension } from '../shared/capacity.ts';

/** A provider instance's `learned` settings; a provider with learning off has none. */
export interface LearnedSettings {
  /** At or below this many remaining requests (or tokens) the target is saturated until the reset. */
  readonly reserve: number;
  /** How long a 429 without a retry-after (or a spent limit without a reset) saturates the target, in ms. */
  readonly cooldownMs: number;
}

/** Opaque handle of one (provider, model)'s record in a counter store, obtained once per match set. */
export interface LearnedHandle {
  /** `learned`, the provider and the model, NUL-separated: what a waiting request waits on. */
  readonly key: string;
  readonly provider: string;
  readonly model: string;
}

/** The learned-state key of a (provider, model). */
export function learnedKey(provider: string, model: string): string {
  return ['learned', provider, model].join('\u0000');
}

/** Why a target is saturated. The codes are the Redis script's. */
export type LearnedCause = 'cooldown' | 'requests' | 'tokens';
export const CAUSE_CODES: Readonly<Record<LearnedCause, number>> = { cooldown: 1, requests: 2, tokens: 3 };
export const CAUSES: readonly (LearnedCause | undefined)[] = [undefined, 'cooldown', 'requests', 'tokens'];

/** One dimension as learned: absolute reset time. */
export interface LearnedDimension {
  readonly limit: number | undefined;
  readonly remaining: number;
  readonly resetAtMs: number | undefined;
}

/** What one answer (or several, combined) teaches, on the clock of whoever learned it (`atMs`). */
export interface LearnedUpdate {
  readonly requests: LearnedDimension | undefined;
  readonly tokens: LearnedDimension | undefined;
  /** The refusal's cooldown ends then; undefined when the answer was no refusal. */
  readonly cooldownUntilMs: number | undefined;
  /** The provider refused (a 429, or a 503 with a retry-after). */
  readonly throttled: boolean;
  /** The provider's `learned.reserve`, which the saturation is judged against. */
  readonly reserve: number;
  /** When the answer arrived, on the learner's clock. */
  readonly atMs: number;
}

/** The record of one (provider, model) as a store keeps it. */
export interface LearnedRecord {
  readonly requests: LearnedDimension | undefined;
  readonly tokens: LearnedDimension | undefined;
  readonly cooldownUntilMs: number | undefined;
  /** When the provider last refused. */
  readonly throttledAtMs: number | undefined;
  readonly updatedAtMs: number;
  /** Until when the target is saturated (0: it is not); fixed when the record is written. */
  readonly saturatedUntilMs: number;
  readonly cause: LearnedCause | undefined;
  /** When a store drops the record: its last reset or cooldown end, and never before LINGER_MS after its last write. */
  readonly expiresAtMs: number;
}

/** A record is kept at least this long after its last write, so that it can be shown (and when the provider last refused). */
export const LINGER_MS = 60_000;

/** An admission's verdict on a saturated target: until when, why, and the store's clock. */
export interface LearnedVerdict {
  readonly untilMs: number;
  readonly cause: LearnedCause;
  readonly nowMs: number;
}

/** The records a store holds, read at `nowMs` on its clock. */
export interface LearnedReading {
  readonly nowMs: number;
  readonly records: ReadonlyArray<{ readonly provider: string; readonly model: string; readonly record: LearnedRecord }>;
}

/**
 * What an answer teaches, for a provider with these settings, at `atMs`: the reported dimensions
 * with absolute resets (a spent dimension without a reset cools down instead), and a refusal's
 * cooldown (its retry-after, else the provider's cooldown). Undefined when there is nothing to learn.
 * `atMs` is when the gateway learns it (a buffered answer once read), a moment after the upstream
 * said it: resets and cooldowns end a little late, never early.
 */
export function updateFrom(capacity: Capacity, settings: LearnedSettings, atMs: number): LearnedUpdate | undefined {
  const requests = dimensionFrom(capacity.requests, settings, atMs);
  const tokens = dimensionFrom(capacity.tokens, settings, atMs);
  const cooldownMs = capacity.throttled ? (capacity.retryAfterMs ?? settings.cooldownMs) : undefined;
  if (requests === undefined && tokens === undefined && cooldownMs === undefined) return undefined;
  return { requests, tokens, cooldownUntilMs: cooldownMs === undefined ? undefined : atMs + cooldownMs, throttled: capacity.throttled, reserve: settings.reserve, atMs };
}

function dimensionFrom(dimension: CapacityDimension | undefined, settings: LearnedSettings, atMs: number): LearnedDimension | undefined {
  if (dimension === undefined) return undefined;
  const { limit, remaining, resetInMs } = dimension;
  if (resetInMs !== undefined) return { limit, remaining, resetAtMs: atMs + resetInMs };
  // Spent, with no word on when it comes back: wait as after a bare 429.
  return { limit, remaining, resetAtMs: remaining <= settings.reserve ? atMs + settings.cooldownMs : undefined };
}

/** Until when an update alone saturates its target, and why; undefined when it does not (the enter/leave log). */
export function saturationOf(update: LearnedUpdate): { untilMs: number; cause: LearnedCause } | undefined {
  const { untilMs, cause } = saturated(update.cooldownUntilMs, update.requests, update.tokens, update.reserve, update.atMs);
  return cause === undefined ? undefined : { untilMs, cause };
}

/**
 * Two updates as one (a write coalescing the answers of a burst): a dimension the later one reports
 * replaces the earlier's, the cooldowns' later end wins, a refusal in either is a refusal.
 */
export function combineUpdates(earlier: LearnedUpdate, later: LearnedUpdate): LearnedUpdate {
  return {
    requests: later.requests ?? earlier.requests,
    tokens: later.tokens ?? earlier.tokens,
    cooldownUntilMs: latest(earlier.cooldownUntilMs, later.cooldownUntilMs),
    throttled: earlier.throttled || later.throttled,
    reserve: later.reserve,
    atMs: later.atMs,
  };
}

/**
 * The record after `update`, written at `nowMs` (the store's clock; the update's times are on it
 * too). `old` is the stored record, or undefined when there is none (or it expired). A reported
 * dimension replaces the stored one (its limit kept when the answer left it out); a cooldown only
 * ever lengthens; the saturation is judged now, against the update's reserve.
 */
export function mergeLearned(old: LearnedRecord | undefined, update: LearnedUpdate, nowMs: number): LearnedRecord {
  const requests = mergeDimension(old?.requests, update.requests);
  const tokens = mergeDimension(old?.tokens, update.tokens);
  const cooldownUntilMs = latest(old?.cooldownUntilMs, update.cooldownUntilMs);
  const { untilMs, cause } = saturated(cooldownUntilMs, requests, tokens, update.reserve, nowMs);
  const expiresAtMs = Math.max(nowMs + LINGER_MS, untilMs, requests?.resetAtMs ?? 0, tokens?.resetAtMs ?? 0, cooldownUntilMs ?? 0);
  return {
    requests,
    tokens,
    cooldownUntilMs,
    throttledAtMs: update.throttled ? nowMs : old?.throttledAtMs,
    updatedAtMs: nowMs,
    saturatedUntilMs: untilMs,
    cause,
    expiresAtMs,
  };
}

function mergeDimension(old: LearnedDimension | undefined, reported: LearnedDimension | undefined): LearnedDimension | undefined {
  if (reported === undefined) return old;
  if (reported.limit !== undefined || old?.limit === undefined) return reported;
  return { ...reported, limit: old.limit };
}

/**
 * The latest moment the target is saturated until, and why: a running cooldown, a dimension at or
 * below the reserve before its reset. On a tie the earlier cause in that order is named.
 */
function saturated(cooldownUntilMs: number | undefined, requests: LearnedDimension | undefined, tokens: LearnedDimension | undefined, reserve: number, nowMs: number): { untilMs: number; cause: LearnedCause | undefined } {
  let untilMs = 0;
  let cause: LearnedCause | undefined;
  if (cooldownUntilMs !== undefined && cooldownUntilMs > nowMs) {
    untilMs = cooldownUntilMs;
    cause = 'cooldown';
  }
  for (const [dimension, name] of [[requests, 'requests'], [tokens, 'tokens']] as const) {
    const resetAtMs = dimension?.resetAtMs;
    if (dimension === undefined || resetAtMs === undefined || dimension.remaining > reserve || resetAtMs <= nowMs || resetAtMs <= untilMs) continue;
    untilMs = resetAtMs;
    cause = name;
  }
  return { untilMs, cause };
}

function latest(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.max(a, b);
}

/** A record's verdict at `nowMs`: saturated until when and why, or undefined. */
export function verdictOf(record: LearnedRecord | undefined, nowMs: number): LearnedVerdict | undefined {
  if (record === undefined || record.saturatedUntilMs <= nowMs || record.cause === undefined) return undefined;
  return { untilMs: record.saturatedUntilMs, cause: record.cause, nowMs };
}
