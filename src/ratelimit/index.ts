/** Public surface of the rate-limit engine. */
export * from './types.ts';
export * from './normalize.ts';
export type { BreachedLimit } from './rules.ts';
export { canonicalKey, messageSubject, ruleIdentity } from './rules.ts';
export type { RateLimitHeaderData, RateLimitTriple } from './headers.ts';
export type { RuleStatus, UserPathUsage } from './status.ts';
export type { CounterHandle, CounterRule, CounterStore } from './store.ts';
export { CounterSnapshot, MemoryCounterStore } from './store.ts';
export { retryAfterSeconds, slidingEstimate, windowStart } from './window.ts';
export type {
  AdmissionRefusal,
  AdmissionResult,
  AdmissionTarget,
  AdmissionTicket,
  AdmitOptions,
  ProbeResult,
  RateLimiterOptions,
} from './limiter.ts';
export { RateLimiter } from './limiter.ts';
