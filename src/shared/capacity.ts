/**
 * What one upstream answer says about the provider's own rate limits, in a form that names no
 * provider: the providers read it from their answers (src/providers/capacity.ts) and the
 * rate-limit engine learns from it (src/ratelimit/learned.ts). Times are relative to the moment
 * the answer arrived, so that whoever learns from it applies its own clock.
 */

/** One dimension of a provider's limit (requests, or tokens) as an answer reported it. */
export interface CapacityDimension {
  /** The provider's own cap, when the answer said it. */
  readonly limit: number | undefined;
  /** What is left of it. */
  readonly remaining: number;
  /** In how many milliseconds it is replenished; undefined when the answer did not say. */
  readonly resetInMs: number | undefined;
}

export interface Capacity {
  readonly requests: CapacityDimension | undefined;
  readonly tokens: CapacityDimension | undefined;
  /** The provider refused for capacity: a 429, or a 503 that says when to retry. */
  readonly throttled: boolean;
  /** How long the provider asked the caller to wait (`retry-after-ms`, `retry-after`) on a 429 or 503. */
  readonly retryAfterMs: number | undefined;
  /** Names of rate-limit headers whose values could not be read: ignored, and counted. */
  readonly malformed: readonly string[];
}
