/** Prometheus metrics of one gateway: what the HTTP layer reports, and the `/metrics` exposition. */
export { GatewayMetrics, NO_UPSTREAM_ANSWER, OTHER_MODEL, UNMATCHED_ENDPOINT, type BudgetStatusSource, type GatewayMetricsOptions, type RuleStatusSource } from './gateway-metrics.ts';
