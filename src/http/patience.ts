import type { FastifyInstance, FastifyRequest } from 'fastify';
import { PRIORITIES, type Priority } from '../ratelimit/index.ts';
import { badRequest } from '../errors/gateway-error.ts';
import { WAIT_SECONDS } from './schemas/checks.ts';

export const MAX_WAIT_HEADER = 'x-floodgate-max-wait';
export const PRIORITY_HEADER = 'x-floodgate-priority';

export interface PatienceOptions {
  /** The wait of a request that does not say (rate_limits.queue.default_wait_seconds), in ms. */
  readonly defaultWaitMs: number;
  /** The longest any request waits (rate_limits.queue.max_wait_seconds), in ms. */
  readonly maxWaitMs: number;
}

/**
 * How long each request of `scope` may wait for capacity and at which priority, from its
 * `X-Floodgate-Max-Wait` and `X-Floodgate-Priority` headers: set on its identity once it is
 * authenticated. A managed key's `max_priority` caps the priority (a request asking above it is
 * served at the maximum, not refused); the master key, and open mode, may ask for any.
 */
export function registerPatience(scope: FastifyInstance, options: PatienceOptions): void {
  scope.addHook('onRequest', async (request) => {
    const identity = request.identity;
    if (identity === null || identity === undefined) return;
    const asked = priorityOf(request);
    // A larger rank is a lower priority: what was asked stands when it is not above the maximum.
    const priority = identity.maxPriority === undefined || rank(asked) >= rank(identity.maxPriority) ? asked : identity.maxPriority;
    request.identity = { ...identity, priority, maxWaitMs: Math.min(waitOf(request) ?? options.defaultWaitMs, options.maxWaitMs) };
  });
}

function header(request: FastifyRequest, name: string): string | undefined {
  const raw = request.headers[name];
  return Array.isArray(raw) ? raw[0] : raw;
}

function waitOf(request: FastifyRequest): number | undefined {
  const raw = header(request, MAX_WAIT_HEADER);
  if (raw === undefined) return undefined;
  const text = raw.trim();
  if (!WAIT_SECONDS.test(text)) throw badRequest(`${MAX_WAIT_HEADER}: must be a number of seconds >= 0 with at most 3 decimals (got "${raw}")`, MAX_WAIT_HEADER, 'invalid_max_wait');
  return Math.round(Number(text) * 1000);
}

function priorityOf(request: FastifyRequest): Priority {
  const raw = header(request, PRIORITY_HEADER);
  if (raw === undefined) return 'normal';
  const value = raw.trim().toLowerCase();
  if (!(PRIORITIES as readonly string[]).includes(value)) {
    throw badRequest(`${PRIORITY_HEADER}: must be one of ${PRIORITIES.join(', ')} (got "${raw}")`, PRIORITY_HEADER, 'invalid_priority');
  }
  return value as Priority;
}

/** 0 for high, 2 for low. */
function rank(priority: Priority): number {
  return PRIORITIES.indexOf(priority);
}
