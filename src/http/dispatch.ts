import type { FastifyReply, FastifyRequest } from 'fastify';
import { UpstreamUnavailableError, type ProviderCall, type ProviderResult } from '../providers/types.ts';
import type { Target } from '../routing/resolver.ts';
import type { HttpServices } from './context.ts';
import { GatewayError, notFound, type ErrorDialect } from './errors.ts';
import { encodeFormForModel, type ModelRequest } from './requests.ts';
import { sendResult } from './respond.ts';
import { accountCompleted } from './accounting.ts';
import { rateLimitHeaders, rateLimitedError } from './rate-limit-headers.ts';
import type { AdmissionTarget, AdmitOptions } from '../ratelimit/index.ts';

/**
 * The path of one model request after validation: resolve the model, call the target,
 * write the answer, record usage.
 */
export async function dispatch(
  request: FastifyRequest,
  reply: FastifyReply,
  services: HttpServices,
  modelRequest: ModelRequest,
  dialect: ErrorDialect,
): Promise<void> {
  const route = services.resolver.resolve(modelRequest.model);
  if (!route) throw notFound(`model "${modelRequest.model}" not found`, 'model_not_found');
  const target = route.candidates[0]!;
  const identity = request.identity;
  const headers = admit(reply, services, { userPath: identity.userPath, provider: target.provider.name, model: target.model });
  const startedAt = services.now();
  const signal = clientGoneSignal(reply);

  const result = await callTarget(target, modelRequest, signal);
  let status = result.status;
  try {
    await sendResult(reply, result, dialect, headers);
  } catch (err) {
    status = 502;
    request.log.warn({ err, provider: target.provider.name }, 'upstream stream failed');
  }
  accountCompleted(services, identity, {
    provider: target.provider.name,
    model: target.model,
    endpoint: modelRequest.endpoint,
    usage: result.usage(),
    status: signal.aborted && status < 400 ? 499 : status,
    startedAt,
    cached: false,
  });
}

/**
 * Checks and counts every matching rule in one step; a breach is thrown as the 429. The
 * concurrency slots are held until the response was fully sent or the client went away,
 * whatever happened in between: the socket's `close` covers every path.
 */
export function admit(reply: FastifyReply, services: HttpServices, target: AdmissionTarget, options?: AdmitOptions): Record<string, string> | undefined {
  const limiter = services.limiter;
  if (limiter === undefined) return undefined;
  const admission = limiter.admit(target, options);
  if (!admission.ok) throw rateLimitedError(admission);
  if (admission.holdsSlots) reply.raw.once('close', () => admission.release());
  return rateLimitHeaders(admission.headers);
}

export async function callTarget(target: Target, modelRequest: ModelRequest, signal: AbortSignal): Promise<ProviderResult> {
  const call: ProviderCall = { endpoint: modelRequest.endpoint, model: target.model, stream: modelRequest.stream, signal };
  if (modelRequest.json) {
    call.json = modelRequest.json.model === target.model ? modelRequest.json : { ...modelRequest.json, model: target.model };
  } else if (modelRequest.form) {
    const encoded = await encodeFormForModel(modelRequest.form, target.model);
    call.raw = encoded.body;
    call.contentType = encoded.contentType;
  }
  try {
    return await target.provider.call(call);
  } catch (err) {
    throw asGatewayError(err, target.provider.name);
  }
}

export function asGatewayError(err: unknown, provider: string): unknown {
  if (err instanceof UpstreamUnavailableError) {
    return new GatewayError({ status: err.status, type: 'provider_error', message: err.message, code: err.status === 504 ? 'upstream_timeout' : 'upstream_unavailable' });
  }
  if (err instanceof Error && err.name === 'AbortError') {
    return new GatewayError({ status: 499, type: 'provider_error', message: `request to provider ${provider} was cancelled`, code: 'client_closed_request' });
  }
  return err;
}

/** Aborted when the client goes away before its answer was fully written. */
export function clientGoneSignal(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}
