import type { Usage } from '../providers/types.ts';
import type { HttpServices, Identity } from './context.ts';

export interface Completed {
  provider: string;
  model: string;
  endpoint: string;
  usage: Usage | undefined;
  status: number;
  startedAt: number;
  cached: boolean;
  /** The request's id (fastify's `request.id`, sent back as `x-request-id`). */
  requestId: string;
  /** True when `usage` is the gateway's estimate (see src/tokens/estimate.ts). */
  estimated?: boolean;
}

/**
 * After a response completed (streams at their end): charge its tokens to every matching
 * token window and queue its usage record. Neither touches storage on this path.
 */
export function accountCompleted(services: HttpServices, identity: Identity, done: Completed): void {
  const usage = done.usage;
  if (usage !== undefined && !done.cached && services.limiter !== undefined) {
    // A shared store answers later and never rejects: nothing here waits for the charge to land.
    void services.limiter.chargeTokens({ userPath: identity.userPath, provider: done.provider, model: done.model }, usage.totalTokens);
  }
  if (!done.cached) services.metrics.tokens(done.provider, done.model, usage);
  services.usage.record({
    timestampMs: done.startedAt,
    userPath: identity.userPath,
    provider: done.provider,
    model: done.model,
    endpoint: done.endpoint,
    promptTokens: usage?.promptTokens ?? 0,
    completionTokens: usage?.completionTokens ?? 0,
    totalTokens: usage?.totalTokens ?? 0,
    cachedPromptTokens: usage?.cachedPromptTokens ?? 0,
    cached: done.cached,
    status: done.status,
    latencyMs: services.now() - done.startedAt,
    apiKeyId: identity.keyId,
    requestId: done.requestId,
    estimated: done.estimated === true,
  });
}
