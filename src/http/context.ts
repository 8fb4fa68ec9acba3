import type { FastifyBaseLogger } from 'fastify';
import type { AdmissionCore } from '../admission/core.ts';
import type { ReservationEstimator } from '../admission/reservations.ts';
import type { BatchService } from '../batch/service.ts';
import type { BudgetManager } from '../admin/budgets.ts';
import type { RuleManager } from '../admin/rate-limit-rules.ts';
import type { BudgetTracker } from '../budgets/tracker.ts';
import type { KeyRing } from '../auth/keys.ts';
import type { ResponseCache } from '../cache/response-cache.ts';
import type { GatewayHealth } from '../health/readiness.ts';
import type { GatewayMetrics } from '../metrics/index.ts';
import type { Priority, RateLimiter } from '../ratelimit/index.ts';
import type { Resolver } from '../routing/resolver.ts';
import type { Storage } from '../storage/types.ts';
import type { UsageRecorder } from '../usage/recorder.ts';
import type { RefusalLog } from '../usage/refusals.ts';
import type { InFlightRequests } from './in-flight.ts';
import type { PatienceOptions } from './patience.ts';

/**
 * What the HTTP layer needs from the rest of the gateway; built once in app.ts. Each route takes
 * only the part it uses (a `Pick` of this), so its signature says what it depends on.
 */
export interface HttpServices {
  options: HttpOptions;
  resolver: Resolver;
  keys: KeyRing;
  storage: Storage;
  usage: UsageRecorder;
  /** Requests refused with a 429, counted for the usage view. */
  refusals: RefusalLog;
  /** The decision of every admitted request (rate limits, budgets, targets, failover) and its completion. */
  admission: AdmissionCore;
  /** What a request reserves at admission (rate_limits.reservations, budgets.reservations). */
  reservations?: ReservationEstimator | undefined;
  /** Files and batches (`/v1/files`, `/v1/batches`). */
  batches: BatchService;
  /** Absent when rate limits are disabled (RATE_LIMITS_ENABLED=false). */
  limiter: RateLimiter | undefined;
  rules: RuleManager | undefined;
  /** Absent when budgets are disabled (BUDGETS_ENABLED=false). */
  budgets: BudgetTracker | undefined;
  budgetManager: BudgetManager | undefined;
  /** Absent when the response cache is disabled. */
  cache: ResponseCache | undefined;
  /** Model requests being answered; shutdown waits for them. */
  inFlight: InFlightRequests;
  /** Prometheus metrics (`GET /metrics`). */
  metrics: GatewayMetrics;
  now(): number;
  /** Liveness and readiness (`GET /health`, `GET /ready`), and whether the gateway drains for a shutdown. */
  health: GatewayHealth;
}

export interface HttpOptions {
  masterKey: string | undefined;
  /** Lower-case header name carrying the caller's user path. */
  userPathHeader: string;
  bodyLimitBytes: number;
  /** The connection bounds (`server.*_timeout_seconds`, `server.max_connections`). */
  connections: ConnectionLimits;
  /** Whether user paths share response-cache entries (`cache.response.shared`). */
  cacheShared: boolean;
  /** How long requests may wait for capacity (rate_limits.queue). */
  patience: PatienceOptions;
  logger: FastifyBaseLogger;
  /** `logging.access`: a log line for every request, not only the failed ones. */
  accessLog: boolean;
}

export interface ConnectionLimits {
  /** From a connection's opening (or a request's first byte) to the end of the request's headers. */
  headersTimeoutMs: number;
  /** From a request's first byte to the end of its body. */
  requestTimeoutMs: number;
  /** Idle time allowed between two requests on a keep-alive connection. */
  keepAliveTimeoutMs: number;
  maxConnections: number;
}

/** Who is calling, settled by the auth hook before any route runs. */
export interface Identity {
  userPath: string;
  /** Managed key id, or null for the master key / open mode. */
  keyId: string | null;
  isMaster: boolean;
  /** The highest priority the caller's managed key may ask for; undefined: any. */
  maxPriority?: Priority | undefined;
  /** The request's priority (X-Floodgate-Priority, capped by the key's max_priority); model routes only. */
  priority?: Priority | undefined;
  /** How long the request may wait for capacity, in ms (X-Floodgate-Max-Wait or the default, capped); model routes only. */
  maxWaitMs?: number | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    identity: Identity;
    /** A JSON body's bytes as received (see json-body.ts). */
    jsonBytes: Buffer | undefined;
  }
}
