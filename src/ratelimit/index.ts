/** Public surface of the rate-limit engine. */
export * from './types.ts';
export * from './normalize.ts';
export type { BreachedLimit } from './rules.ts';
export { canonicalKey, childCounterKey, counterKeyOf, ruleIdentity } from './rules.ts';
export type { RateLimitHeaderData, RateLimitTriple } from './headers.ts';
export type { RuleStatus, UserPathUsage } from './status.ts';
export type {
  AdmitOutcome,
  ChildReading,
  ChildrenFull,
  CounterAdmission,
  CounterHandle,
  CounterReading,
  CounterRow,
  CounterRule,
  CounterStore,
  LearnedCheck,
  MaybePromise,
  SharedSpendAnswer,
  SlotLease,
  SpendBudget,
  SpendClaim,
  StoreUnavailable,
} from './store.ts';
export { concurrencyRow, CounterStoreUnavailableError, rowMatters, windowedRow } from './store.ts';
export { retryAfterSeconds, slidingEstimate, windowStart } from './window.ts';
export type {
  AdmissionPreview,
  AdmissionRefusal,
  AdmissionResult,
  AdmissionTarget,
  AdmissionTicket,
  AdmitOptions,
  RateLimiterOptions,
  SpendRefusal,
  StatusOptions,
} from './limiter.ts';
export { RateLimiter } from './limiter.ts';
export type { LearnedCause, LearnedDimension, LearnedHandle, LearnedReading, LearnedRecord, LearnedSettings, LearnedUpdate, LearnedVerdict } from './learned.ts';
export { CAUSE_CODES, CAUSES, combineUpdates, learnedKey, LINGER_MS, mergeLearned, saturationOf, updateFrom, verdictOf } from './learned.ts';
