import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { cacheKey, cacheMode, type CacheMode } from '../cache/response-cache.ts';
import type { Lifetime, Settlement } from '../admission/core.ts';
import { asGatewayError } from '../errors/from-provider.ts';
import { Cancellation } from '../providers/cancellation.ts';
import type { ProviderCall, ProviderResult } from '../providers/types.ts';
import type { AdmissionTicket } from '../ratelimit/index.ts';
import type { Target } from '../routing/types.ts';
import type { HttpServices } from './context.ts';
import type { Cuttable } from './in-flight.ts';
import { GatewayError, notFound } from '../errors/gateway-error.ts';
import { type ErrorDialect } from './errors.ts';
import { encodeFormForModel, type ModelRequest } from './requests.ts';
import { sendResult } from './respond.ts';
import type { RequestLogLine } from './access-log.ts';
import { RelayedStream, chargedUsage } from '../tokens/estimate.ts';

const CACHEABLE = new Set(['chat', 'responses', 'embeddings']);
/** Streams whose usage is estimated when they end before reporting it (text; speech is audio). */
const ESTIMATED_STREAMS = new Set(['chat', 'responses', 'messages']);
const CACHE_HEADER = 'x-floodgate-cache';

/** What a model request's path uses: the cache, the resolver, the admission core and the gateway's bookkeeping. */
export type DispatchServices = Pick<HttpServices, 'options' | 'resolver' | 'cache' | 'admission' | 'inFlight' | 'metrics' | 'now' | 'reservations'>;

/**
 * The path of one model request after validation: the cache lookup, then the admission core's
 * decision and upstream call (src/admission), the answer, and the request's completion.
 */
export async function dispatch(
  request: FastifyRequest,
  reply: FastifyReply,
  services: DispatchServices,
  modelRequest: ModelRequest,
  dialect: ErrorDialect,
): Promise<void> {
  const identity = request.identity;
  const line = request.logLine;
  line.model = modelRequest.model;
  const cached = lookupCache(request, reply, services, modelRequest);
  if (cached === 'served') return;
  // Resolved after the cache lookup: a hit takes no alias turn.
  const route = services.resolver.resolve(modelRequest.model);
  if (!route) throw notFound(`model "${modelRequest.model}" not found`, 'model_not_found');

  const startedAt = services.now();
  const end = new ResponseEnd(reply.raw);
  // Tracked until its usage is recorded: shutdown waits for that before storage closes.
  const untrack = services.inFlight.track(end);
  // The line waits for the usage record, which comes after the answer.
  const logged = line.hold();
  let settlement: Settlement | undefined;
  try {
    let estimate = services.reservations?.enabled === true && modelRequest.json !== undefined ? services.reservations.estimate(modelRequest.endpoint, modelRequest.model, modelRequest.json) : undefined;
    // Counted at once when the tokenizer is loaded (see count.ts): no promise to wait for.
    if (estimate instanceof Promise) estimate = await estimate;
    const dispatched = await services.admission.dispatch(identity, route, end, (target) => callTarget(target, modelRequest, end.cancel), line, estimate);
    settlement = dispatched.settlement;
    const { result, target, headers: admitted } = dispatched;
    let headers = admitted;
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
      status = brokenStream(line, err);
    }
    const { usage, estimated } = await chargedUsage({ model: target.model, request: modelRequest.json, reported: result.usage(), relayed, cut: end.cancel.cancelled || broken });
    const record = services.admission.complete(identity, {
      provider: target.provider.name,
      model: target.model,
      endpoint: modelRequest.endpoint,
      usage,
      status: end.cancel.cancelled && status < 400 ? 499 : status,
      startedAt,
      cached: false,
      requestId: request.id,
      estimated,
      settlement,
    });
    line.used(usage, record);
  } finally {
    // A settlement settles once: after complete() this does nothing; a request that ended without
    // its usage (an error on the way) used nothing it reserved.
    settlement?.settle(0);
    untrack();
    logged();
  }
}

/**
 * A stream that failed after its headers were sent: its line says so (with the status its usage
 * record carries), whatever the HTTP status sent. Answers that status.
 */
export function brokenStream(line: RequestLogLine, err: unknown): number {
  const status = err instanceof GatewayError ? err.status : 502;
  line.status = status;
  line.failed(`upstream stream failed: ${err instanceof Error ? err.message : String(err)}`);
  return status;
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
  services: DispatchServices,
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
  const line = request.logLine;
  line.cache = mode === 'bypass' ? 'bypass' : hit === undefined ? 'miss' : 'hit';
  if (hit === undefined) return { key, mode };
  line.provider = hit.provider;
  line.executedModel = hit.model;
  const startedAt = services.now();
  void reply.code(hit.status).headers(hit.headers).header(CACHE_HEADER, 'hit').send(hit.body);
  const record = services.admission.complete(request.identity, {
    provider: hit.provider,
    model: hit.model,
    endpoint: modelRequest.endpoint,
    usage: undefined,
    status: hit.status,
    startedAt,
    cached: true,
    requestId: request.id,
  });
  line.used(undefined, record);
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
 * The end of a response, whichever way it comes: fully sent, client gone, or an error answer.
 * One 'close' listener per request cancels the upstream call when the client left before its
 * answer was complete, and releases the concurrency slots the request holds, whatever happened
 * in between.
 */
export class ResponseEnd implements Cuttable, Lifetime {
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

/** Cancelled when the client goes away before its answer was complete. */
export function closedBy(reply: FastifyReply): Cancellation {
  const cancel = new Cancellation();
  const res = reply.raw;
  res.once('close', () => {
    if (!res.writableFinished) cancel.cancel();
  });
  return cancel;
}
