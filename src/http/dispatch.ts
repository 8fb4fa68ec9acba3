import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { cacheKey, cacheMode, type CacheMode } from '../cache/response-cache.ts';
import { Cancellation } from '../providers/cancellation.ts';
import { readBody } from '../providers/results.ts';
import type { ProviderCall, ProviderResult } from '../providers/types.ts';
import { asGatewayError, upstreamError } from '../errors/from-provider.ts';
import type { AdmissionRefusal, AdmissionResult, AdmissionTarget, AdmissionTicket, AdmitOptions } from '../ratelimit/index.ts';
import type { Route, Target } from '../routing/resolver.ts';
import { accountCompleted } from './accounting.ts';
import { checkBudget } from './budget-admission.ts';
import type { HttpServices } from './context.ts';
import type { Cuttable } from './in-flight.ts';
import { GatewayError, notFound, type ErrorDialect } from './errors.ts';
import { rateLimitHeaders, rateLimitedError } from './rate-limit-headers.ts';
import { encodeFormForModel, type ModelRequest } from './requests.ts';
import { primeStream, sendResult } from './respond.ts';
import { RelayedStream, chargedUsage } from '../tokens/estimate.ts';

// routes/passthrough.ts imports it from here.
export { asGatewayError } from '../errors/from-provider.ts';

const CACHEABLE = new Set(['chat', 'responses', 'embeddings']);
/** Streams whose usage is estimated when they end before reporting it (text; speech is audio). */
const ESTIMATED_STREAMS = new Set(['chat', 'responses', 'messages']);
const CACHE_HEADER = 'x-floodgate-cache';
const NO_SLOTS: AdmitOptions = Object.freeze({ holdSlot: false });

/**
 * The path of one model request after validation: cache lookup, then for each target in the
 * route's order: admission, upstream call, and on a retryable failure the next failover
 * candidate; finally the answer, usage and token accounting.
 */
export async function dispatch(
  request: FastifyRequest,
  reply: FastifyReply,
  services: HttpServices,
  modelRequest: ModelRequest,
  dialect: ErrorDialect,
): Promise<void> {
  const identity = request.identity;
  const cached = lookupCache(request, reply, services, modelRequest);
  if (cached === 'served') return;
  // Resolved after the cache lookup: a hit takes no alias turn.
  const route = services.resolver.resolve(modelRequest.model);
  if (!route) throw notFound(`model "${modelRequest.model}" not found`, 'model_not_found');

  const startedAt = services.now();
  const end = new ResponseEnd(reply.raw);
  // Tracked until its usage is recorded: shutdown waits for that before storage closes.
  const untrack = services.inFlight.track(end);
  try {
    const outcome = await execute(end, services, route, modelRequest, identity.userPath);
    const { result, target } = outcome;
    let headers = outcome.headers;
    if (cached !== undefined) {
      headers = { ...headers, [CACHE_HEADER]: cached.mode === 'bypass' ? 'bypass' : 'miss' };
      if (cached.mode !== 'bypass' && result.status === 200 && Buffer.isBuffer(result.body)) {
        services.cache!.set(cached.key, { status: 200, headers: result.headers, body: result.body, provider: target.provider.name, model: target.model });
      }
    }
    // A text stream keeps what it relays, in case it ends before its usage report.
    const relayed = modelRequest.stream && ESTIMATED_STREAMS.has(modelRequest.endpoint) && result.status < 400 && !Buffer.isBuffer(result.body) ? new RelayedStream() : undefined;
    let status = result.status;
    let broken = false;
    try {
      await sendResult(reply, result, dialect, headers, relayed);
    } catch (err) {
      broken = true;
      status = err instanceof GatewayError ? err.status : 502;
      request.log.warn({ err, provider: target.provider.name }, 'upstream stream failed');
    }
    const { usage, estimated } = await chargedUsage({ model: target.model, request: modelRequest.json, reported: result.usage(), relayed, cut: end.cancel.cancelled || broken });
    accountCompleted(services, identity, {
      provider: target.provider.name,
      model: target.model,
      endpoint: modelRequest.endpoint,
      usage,
      status: end.cancel.cancelled && status < 400 ? 499 : status,
      startedAt,
      cached: false,
      requestId: request.id,
      estimated,
    });
  } finally {
    untrack();
  }
}

interface Outcome {
  result: ProviderResult;
  target: Target;
  /** The rate-limit headers of the admission. */
  headers: Record<string, string> | undefined;
}

/**
 * Tries the route's targets. A target saturated by the gateway's own provider or model rules
 * is skipped without being called; a target that fails upstream (429, 5xx, timeout, connection
 * error, or a stream that breaks before its first byte) passes the request to the next failover
 * candidate. User-path rules are counted once, with the first admitted attempt; provider and
 * model windows and slots are taken for every attempt and released when the attempt ends.
 */
async function execute(
  end: ResponseEnd,
  services: HttpServices,
  route: Route,
  modelRequest: ModelRequest,
  userPath: string,
): Promise<Outcome> {
  const cancel = end.cancel;
  const limiter = services.limiter;
  const primaryCount = route.primary.length;
  const total = primaryCount + route.failover.length;
  // After an upstream failure only failover candidates remain, never an alias's other targets.
  const nextAfterFailure = (i: number): number => Math.max(i + 1, primaryCount);
  let ticket: AdmissionTicket | undefined;
  let headers: Record<string, string> | undefined;
  const refusals: Array<{ target: Target; refusal: AdmissionRefusal }> = [];
  let failure: GatewayError | undefined;
  let budgetChecked = false;

  let i = 0;
  while (i < total) {
    const target = i < primaryCount ? route.primary[i]! : route.failover[i - primaryCount]!;
    let attempt: AdmissionTicket | undefined;
    if (limiter !== undefined) {
      const first = ticket === undefined;
      let admission = limiter.admit(
        first ? { userPath, provider: target.provider.name, model: target.model } : { provider: target.provider.name, model: target.model },
      );
      if (admission instanceof Promise) admission = await admission;
      services.metrics.admission(admission, first ? userPath : undefined, target.provider.name, target.model);
      if (!admission.ok) {
        if (admission.userPathBreached) throw rateLimitedError(admission);
        refusals.push({ target, refusal: admission });
        i++;
        continue;
      }
      if (admission.holdsSlots) end.hold(admission);
      if (first) {
        ticket = admission;
        headers = rateLimitHeaders(admission.headers);
      } else {
        attempt = admission;
      }
    }
    // Budgets after the rate limits, once per request.
    if (!budgetChecked) {
      checkBudget(services, userPath);
      budgetChecked = true;
    }

    const canFailOver = nextAfterFailure(i) < total;
    try {
      let result = await services.metrics.upstream(target.provider.name, () => callTarget(target, modelRequest, cancel));
      if (canFailOver && isRetryable(result.status)) {
        failure = await asFailure(result);
      } else {
        // Streams fail over only before their first byte reached the client: wait for it here.
        if (!Buffer.isBuffer(result.body) && result.status < 400 && canFailOver) await primeStream(result.body, target.provider.name);
        return { result, target, headers };
      }
    } catch (err) {
      if (!canFailOver || cancel.cancelled || !(err instanceof GatewayError && err.status >= 500)) {
        endAttempt(ticket, attempt);
        throw err;
      }
      failure = err;
    }
    endAttempt(ticket, attempt);
    i = nextAfterFailure(i);
  }
  // Tried and failed upstream beats saturated: the client learns what actually happened.
  if (failure !== undefined) throw failure;
  throw allSaturated(route, refusals);
}

/** The provider and model slots of a finished attempt go back; the user-path slot stays with the request. */
function endAttempt(ticket: AdmissionTicket | undefined, attempt: AdmissionTicket | undefined): void {
  if (attempt !== undefined) attempt.release();
  else ticket?.releaseTargetSlots();
}

/**
 * Every candidate is saturated: the client sees the 429 of the route's first target (the original
 * one), with the Retry-After of whichever candidate frees up first.
 */
function allSaturated(route: Route, refusals: ReadonlyArray<{ target: Target; refusal: AdmissionRefusal }>): GatewayError {
  const original = refusals.find((r) => r.target === route.first) ?? refusals[0];
  if (original === undefined) return new GatewayError({ status: 503, type: 'provider_error', message: `no target available for model "${route.requested}"`, code: 'no_target_available' });
  let retryAfterSeconds = original.refusal.retryAfterSeconds;
  for (const { refusal } of refusals) retryAfterSeconds = Math.min(retryAfterSeconds, refusal.retryAfterSeconds);
  const triple = original.refusal.headers;
  const headers = triple === undefined ? undefined : {
    requests: triple.requests && { ...triple.requests, reset: retryAfterSeconds },
    tokens: triple.tokens && { ...triple.tokens, reset: retryAfterSeconds },
  };
  return rateLimitedError({ message: original.refusal.message, retryAfterSeconds, headers });
}

function isRetryable(status: number): boolean {
  return status === 429 || status >= 500;
}

/** A failed attempt as the error the client would see, its body read so the connection returns to the pool. */
async function asFailure(result: ProviderResult): Promise<GatewayError> {
  return upstreamError(result.status, await readBody(result.body), result.headers);
}

interface CacheLookup {
  key: string;
  mode: CacheMode;
}

/**
 * Cache hits are served before any rate-limit check and count nothing; the usage record marks
 * them. Returns 'served' for a hit, the key to store under for a miss, undefined when not cacheable.
 */
function lookupCache(
  request: FastifyRequest,
  reply: FastifyReply,
  services: HttpServices,
  modelRequest: ModelRequest,
): CacheLookup | 'served' | undefined {
  const cache = services.cache;
  if (cache === undefined || modelRequest.stream || !modelRequest.json || !CACHEABLE.has(modelRequest.endpoint)) return undefined;
  const cacheModel = services.resolver.cacheModelOf(modelRequest.model);
  if (cacheModel === undefined) return undefined; // unknown model: resolve() answers the 404
  const mode = cacheMode(request.headers['cache-control']);
  const scope = services.options.cacheShared ? null : request.identity.userPath;
  const key = cacheKey(modelRequest.endpoint, cacheModel, modelRequest.json, scope);
  const hit = mode === 'use' ? cache.get(key) : undefined;
  services.metrics.cacheLookup(mode, hit !== undefined);
  if (hit === undefined) return { key, mode };
  const startedAt = services.now();
  void reply.code(hit.status).headers(hit.headers).header(CACHE_HEADER, 'hit').send(hit.body);
  accountCompleted(services, request.identity, {
    provider: hit.provider,
    model: hit.model,
    endpoint: modelRequest.endpoint,
    usage: undefined,
    status: hit.status,
    startedAt,
    cached: true,
    requestId: request.id,
  });
  return 'served';
}

export async function callTarget(target: Target, modelRequest: ModelRequest, cancel: Cancellation): Promise<ProviderResult> {
  const call: ProviderCall = { endpoint: modelRequest.endpoint, model: target.model, stream: modelRequest.stream, cancel };
  if (modelRequest.json) {
    if (modelRequest.json.model === target.model) {
      call.json = modelRequest.json;
      call.jsonBytes = modelRequest.jsonBytes;
    } else {
      call.json = { ...modelRequest.json, model: target.model };
    }
  } else if (modelRequest.form) {
    const encoded = await encodeFormForModel(modelRequest.form, target.model);
    call.raw = encoded.body;
    call.contentType = encoded.contentType;
  }
  if (modelRequest.headers) call.headers = modelRequest.headers;
  try {
    return await target.provider.call(call);
  } catch (err) {
    throw asGatewayError(err, target.provider.name);
  }
}

/**
 * Checks and counts every matching rule in one step; a breach is thrown as the 429. With `end`,
 * the request takes its concurrency slots and holds them until the response ends; without, it
 * takes none (a batch submission). A promise only when the counter store answers later.
 */
type RateLimitHeaders = Record<string, string>;

export function admit(services: HttpServices, target: AdmissionTarget, end?: ResponseEnd): RateLimitHeaders | undefined | Promise<RateLimitHeaders | undefined> {
  const limiter = services.limiter;
  if (limiter === undefined) return undefined;
  const admission = limiter.admit(target, end === undefined ? NO_SLOTS : undefined);
  if (admission instanceof Promise) return admission.then((result) => admitted(services, target, result, end));
  return admitted(services, target, admission, end);
}

function admitted(services: HttpServices, target: AdmissionTarget, admission: AdmissionResult, end: ResponseEnd | undefined): RateLimitHeaders | undefined {
  services.metrics.admission(admission, target.userPath, target.provider, target.model);
  if (!admission.ok) throw rateLimitedError(admission);
  if (admission.holdsSlots) end?.hold(admission);
  return rateLimitHeaders(admission.headers);
}

/**
 * The end of a response, whichever way it comes: fully sent, client gone, or an error answer.
 * One 'close' listener per request cancels the upstream call when the client left before its
 * answer was complete, and releases the concurrency slots the request holds, whatever happened
 * in between.
 */
export class ResponseEnd implements Cuttable {
  readonly cancel = new Cancellation();
  /** The request's own ticket; failover attempts add theirs to `more`. */
  private held: AdmissionTicket | undefined;
  private more: AdmissionTicket[] | undefined;
  private ended = false;

  constructor(raw: ServerResponse) {
    // `on`, not `once`: a response closes once and is then dropped, so nothing is left to remove.
    raw.on('close', () => {
      this.ended = true;
      if (!raw.writableFinished) this.cancel.cancel();
      this.held?.release();
      const more = this.more;
      if (more !== undefined) for (const ticket of more) ticket.release();
    });
  }

  cut(reason: Error): void {
    this.cancel.cancel(reason);
  }

  /** Releases the ticket's slots when the response ends (at once if it already has). Releasing is idempotent. */
  hold(ticket: AdmissionTicket): void {
    if (this.ended) ticket.release();
    else if (this.held === undefined) this.held = ticket;
    else (this.more ??= []).push(ticket);
  }
}
