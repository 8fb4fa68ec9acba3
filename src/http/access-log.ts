/**
 * One log line per request: with `logging.access` every request's (the access log), without it
 * the failed ones' only (status 400 and up). The line is written once the request is over: its
 * answer sent (or its client gone) and, for a model request, its usage recorded, so it carries
 * the tokens and cost. Each failover attempt gets a line of its own as it happens. The same end
 * feeds the request duration and first-byte histograms.
 */
import type { Readable, Writable } from 'node:stream';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { QUEUE_WAIT_HEADER, type RequestTrace } from '../admission/core.ts';
import type { GatewayError } from '../errors/gateway-error.ts';
import { UNMATCHED_ENDPOINT, type GatewayMetrics } from '../metrics/index.ts';
import type { Usage } from '../providers/types.ts';
import type { Target } from '../routing/types.ts';
import type { UsageRecord } from '../storage/usage/types.ts';

export type CacheOutcome = 'hit' | 'miss' | 'bypass';

declare module 'fastify' {
  interface FastifyRequest {
    /** What the request's log line will say; filled by the routes and the admission core as it goes. */
    logLine: RequestLogLine;
  }
}

export interface RequestLogOptions {
  /** `logging.access`: a line for every request, not only the failed ones. */
  readonly access: boolean;
  readonly metrics: GatewayMetrics;
}

/**
 * Gives every request its RequestLogLine. Registered before authentication, so a request refused
 * there has one too. Answers how to give one to a request that no hook sees (one the router
 * refused: fastify's framework errors).
 */
export function registerRequestLog(app: FastifyInstance, options: RequestLogOptions): (request: FastifyRequest, reply: FastifyReply) => void {
  app.decorateRequest('logLine', null as unknown as RequestLogLine);
  app.addHook('onRequest', (request, reply, done) => {
    lineOf(request, reply, options);
    done();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    lineOf(request, reply, options).sending(payload);
    done(null, payload);
  });
  return (request, reply) => void lineOf(request, reply, options);
}

/** The request's line, made on first use. */
function lineOf(request: FastifyRequest, reply: FastifyReply, options: RequestLogOptions): RequestLogLine {
  let line = request.logLine as RequestLogLine | null;
  if (line === null) request.logLine = line = new RequestLogLine(request, reply, options);
  return line;
}

/** Notes the error text a failed request is answered with (its line says it). */
export function noteFailure(reply: FastifyReply, message: string): void {
  (reply.request.logLine as RequestLogLine | null)?.failed(message);
}

/**
 * What one request's line says. The routes set what they know (`model`, `cache`, the usage),
 * the admission core reports each upstream attempt and failover (RequestTrace), and the line is
 * written when the last of its holds is released: the response's end holds it from the start,
 * and a route that records usage after its answer holds it until then (`hold`).
 */
export class RequestLogLine implements RequestTrace {
  /** The model the request asked for; null when it named none. */
  model: string | null = null;
  /** How the response cache met the request; null when it was not cacheable. */
  cache: CacheOutcome | null = null;
  /** Upstream calls made. */
  attempts = 0;
  /** The provider and model of its last upstream call; null before any. */
  provider: string | null = null;
  executedModel: string | null = null;
  /** The status its outcome had when the HTTP status cannot say it (a stream broken after its headers, a realtime session). */
  status: number | undefined;
  /** How long it waited for capacity, when its answer's headers do not say (a realtime session). */
  waitMs: number | undefined;
  #promptTokens: number | null = null;
  #completionTokens: number | null = null;
  #costUsd: number | null = null;
  #error: string | undefined;
  #firstByteMs: number | undefined;
  #endedMs: number | undefined;
  #finished = false;
  #holds = 1;
  readonly #request: FastifyRequest;
  readonly #reply: FastifyReply;
  readonly #options: RequestLogOptions;

  constructor(request: FastifyRequest, reply: FastifyReply, options: RequestLogOptions) {
    this.#request = request;
    this.#reply = reply;
    this.#options = options;
    const res = reply.raw;
    // 'close' comes whichever way the response ends: sent in full, or cut (the client gone).
    res.once('close', () => {
      this.#endedMs = reply.elapsedTime;
      this.#finished = res.writableFinished;
      this.#release();
    });
  }

  /** Keeps the line from being written until the returned function is called (idempotent). */
  hold(): () => void {
    this.#holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#release();
    };
  }

  attempt(target: Target): void {
    this.attempted(target.provider.name, target.model);
  }

  /** An upstream call to `provider` for `model` (a passthrough's, which has no Target). */
  attempted(provider: string, model: string): void {
    this.attempts++;
    this.provider = provider;
    this.executedModel = model;
  }

  failedOver(from: Target, to: Target, failure: GatewayError): void {
    this.#request.log.info({
      request_id: this.#request.id,
      user_path: this.#request.identity?.userPath ?? null,
      model: this.model,
      from: from.id,
      to: to.id,
      status: failure.status,
      error: failure.message,
    }, 'upstream attempt failed: failing over');
  }

  /**
   * The request's usage, and its record as the usage recorder priced it (undefined when usage is
   * not recorded). A realtime session reports each of its responses: they add up.
   */
  used(usage: Usage | undefined, record: UsageRecord | undefined): void {
    if (usage !== undefined) {
      this.#promptTokens = (this.#promptTokens ?? 0) + usage.promptTokens;
      this.#completionTokens = (this.#completionTokens ?? 0) + usage.completionTokens;
    }
    if (record !== undefined) this.#costUsd = (this.#costUsd ?? 0) + record.costUsd;
  }

  /** The error text the request failed with (an upstream's, a refusal's, a broken stream's). */
  failed(message: string): void {
    this.#error = message;
  }

  /** The answer's body is about to be sent: its first byte now, or with a stream's first chunk. */
  sending(payload: unknown): void {
    if (this.#firstByteMs !== undefined) return;
    if (!isStream(payload)) {
      this.#firstByteMs = this.#reply.elapsedTime;
      return;
    }
    onFirstChunk(payload, this.#reply.raw, () => this.firstByte());
  }

  /** The answer's first byte is being written (by a route writing the response itself). */
  firstByte(): void {
    this.#firstByteMs ??= this.#reply.elapsedTime;
  }

  #release(): void {
    if (--this.#holds > 0) return;
    const reply = this.#reply;
    const endpoint = this.#request.routeOptions.url;
    const durationMs = this.#endedMs ?? reply.elapsedTime;
    this.#options.metrics.requestEnded(endpoint, durationMs / 1000, this.#firstByteMs === undefined ? undefined : this.#firstByteMs / 1000);
    // A response cut before its end was not received: 499, as the usage record says.
    const status = this.status ?? (this.#finished ? reply.statusCode : CLIENT_GONE);
    const failed = status >= 400;
    if (!failed && !this.#options.access) return;
    const identity = this.#request.identity as FastifyRequest['identity'] | null;
    const line = {
      request_id: this.#request.id,
      user_path: identity?.userPath ?? null,
      key_id: identity?.keyId ?? null,
      method: this.#request.method,
      endpoint: endpoint ?? UNMATCHED_ENDPOINT,
      model: this.model,
      provider: this.provider,
      executed_model: this.executedModel,
      status,
      duration_ms: roundMs(durationMs),
      ttfb_ms: this.#firstByteMs === undefined ? null : roundMs(this.#firstByteMs),
      prompt_tokens: this.#promptTokens,
      completion_tokens: this.#completionTokens,
      cost_usd: this.#costUsd,
      wait_ms: this.waitMs ?? headerMs(reply.getHeader(QUEUE_WAIT_HEADER)),
      cache: this.cache,
      attempts: this.attempts,
      ...(failed && { error: this.#error ?? null }),
    };
    const log: FastifyBaseLogger = this.#request.log;
    if (!failed) log.info(line, 'request');
    else if (status >= 500) log.warn(line, 'request failed');
    else log.info(line, 'request failed');
  }
}

/** The status of a request whose client left before its answer was complete (nginx's). */
const CLIENT_GONE = 499;

function roundMs(ms: number): number {
  return Math.round(ms * 10) / 10;
}

function headerMs(value: unknown): number {
  const ms = typeof value === 'string' ? Number(value) : typeof value === 'number' ? value : 0;
  return Number.isFinite(ms) ? ms : 0;
}

function isStream(payload: unknown): payload is Readable {
  return payload !== null && typeof payload === 'object' && typeof (payload as Readable).pipe === 'function' && typeof (payload as Readable).on === 'function';
}

/**
 * Calls `fn` when `stream` hands its first chunk to `res`, once: a listener for the first chunk
 * only, added when the stream is piped to the response (a 'data' listener added before would
 * start the stream flowing before the pipe, and the chunks it emitted then would be lost).
 */
function onFirstChunk(stream: Readable, res: Writable, fn: () => void): void {
  const piped = (source: Readable): void => {
    if (source !== stream) return;
    res.off('pipe', piped);
    stream.once('data', fn);
  };
  res.on('pipe', piped);
}
