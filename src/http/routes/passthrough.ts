import type { FastifyInstance } from 'fastify';
import type { HttpServices } from '../context.ts';
import { asGatewayError } from '../../errors/from-provider.ts';
import { ResponseEnd, brokenStream } from '../dispatch.ts';
import { GatewayError, badRequest, notFound } from '../../errors/gateway-error.ts';
import { forwardedPath } from '../passthrough-path.ts';
import { tooDeep } from '../json-body.ts';
import { MAX_JSON_DEPTH, isRecord, nestsDeeperThan } from '../../shared/json.ts';
import { sendResult } from '../respond.ts';
import { RelayedStream, chargedUsage } from '../../tokens/estimate.ts';

/**
 * The methods forwarded. Any other is refused before anything is sent: TRACE would echo the
 * provider's credentials back, and HEAD, OPTIONS and the rest serve no API call.
 */
const FORWARDED_METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
const ALLOW = [...FORWARDED_METHODS].join(', ');

/** `/p/{provider}/{path}`: a request forwarded to that provider's base URL with its credentials. */
export function registerPassthrough(app: FastifyInstance, services: Pick<HttpServices, 'resolver' | 'admission' | 'inFlight' | 'metrics' | 'now' | 'reservations'>): void {
  app.register(async (scope) => {
    // Bodies are forwarded byte for byte whatever their type.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.all('/p/:provider/*', async (request, reply) => {
      if (!FORWARDED_METHODS.has(request.method)) {
        throw new GatewayError({
          status: 405, type: 'invalid_request_error', message: `method ${request.method} is not forwarded: passthrough takes ${ALLOW}`, code: 'method_not_allowed', headers: { allow: ALLOW },
        });
      }
      // Both parts as the router decoded them: the raw URL can spell the same route differently.
      const { provider: name, '*': rest } = request.params as { provider: string; '*': string };
      const provider = services.resolver.provider(name);
      if (!provider) throw notFound(`provider "${name}" not found`, 'provider_not_found');
      const forwarded = forwardedPath(rest);
      if (!forwarded.ok) throw badRequest(forwarded.error, 'path', 'invalid_passthrough_path');
      const queryAt = request.url.indexOf('?');
      const path = queryAt === -1 ? forwarded.path : forwarded.path + request.url.slice(queryAt);
      const body = Buffer.isBuffer(request.body) ? request.body : undefined;
      const { model, json } = await readModel(body, request.headers['content-type']);
      const line = request.logLine;
      line.model = model ?? null;
      const end = new ResponseEnd(reply.raw);
      // With reservations on, a JSON body reserves its prompt and the completion it allows.
      const reservations = services.reservations;
      let estimated = reservations?.enabled === true && json !== undefined && model !== undefined ? reservations.estimate('chat', model, json) : undefined;
      if (estimated instanceof Promise) estimated = await estimated;
      const estimate = estimated && { tokens: estimated.tokens, costUsd: estimated.costUsd && estimated.costUsd({ provider, model: model! }) };
      const { headers, settlement } = await services.admission.admitOneReserving(request.identity, { provider: provider.name, model }, { lifetime: end, estimate });
      const untrack = services.inFlight.track(end);
      // The line waits for the usage record, which comes after the answer.
      const logged = line.hold();
      try {
        const startedAt = services.now();
        let result;
        line.attempted(provider.name, model ?? '');
        try {
          result = await services.metrics.upstream(provider.name, () => provider.passthrough({ method: request.method, path, headers: request.headers, body, cancel: end.cancel }));
        } catch (err) {
          throw asGatewayError(err, provider.name);
        }
        services.admission.observe({ provider: provider.name, model }, result);
        // An SSE answer keeps what it relays, in case it ends before its usage report.
        const relayed = result.status < 400 && (result.headers['content-type'] ?? '').includes('text/event-stream') ? new RelayedStream() : undefined;
        let status = result.status;
        let broken = false;
        try {
          await sendResult(reply, result, 'openai', headers, relayed);
        } catch (err) {
          broken = true;
          status = brokenStream(line, err);
        }
        // Without a model in the request (a GET, a body without one), the answer's names it.
        const executed = model ?? result.model?.() ?? '';
        line.executedModel = executed;
        const { usage, estimated } = await chargedUsage({ model: executed, request: json, reported: result.usage(), relayed, cut: end.cancel.cancelled || broken });
        const record = services.admission.complete(request.identity, {
          provider: provider.name,
          model: executed,
          endpoint: 'passthrough',
          usage,
          status,
          startedAt,
          cached: false,
          requestId: request.id,
          estimated,
          settlement,
        });
        line.used(usage, record);
      } finally {
        // A settlement settles once: after complete() this does nothing; a request that ended
        // without its usage (an error on the way) used nothing it reserved.
        settlement?.settle(0);
        untrack();
        logged();
      }
      return reply;
    });
  });
}

/**
 * The model a passthrough body names, whatever its declared content type (a JSON body sent as
 * text/plain still names it), so that model rules and prices apply: a JSON object's `model`, a
 * form's `model` field (multipart or URL-encoded). Also the JSON object, for usage estimates.
 */
async function readModel(body: Buffer | undefined, contentType: string | undefined): Promise<{ model?: string; json?: Record<string, unknown> }> {
  if (body === undefined || body.length === 0) return {};
  const json = jsonObjectOf(body);
  if (json !== undefined) return { model: modelName(json.model), json };
  const type = contentType?.toLowerCase() ?? '';
  if (type.startsWith('multipart/form-data')) {
    try {
      const form = await new Request('http://gateway.invalid/', { method: 'POST', body, headers: { 'content-type': contentType! } }).formData();
      return { model: modelName(form.get('model')) };
    } catch {
      return {}; // not a well-formed form: the upstream will judge the body
    }
  }
  if (type.startsWith('application/x-www-form-urlencoded')) return { model: modelName(new URLSearchParams(body.toString('utf8')).get('model')) };
  return {};
}

/** The body as a JSON object when it is one (its first non-blank character is `{`). */
function jsonObjectOf(body: Buffer): Record<string, unknown> | undefined {
  let first = 0;
  while (first < body.length && (body[first] === 0x20 || body[first] === 0x0a || body[first] === 0x0d || body[first] === 0x09)) first++;
  if (body[first] !== 0x7b) return undefined; // '{'
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined; // not JSON after all: the upstream will judge the body
  }
  // Parsed here, so bounded here like every other JSON body the gateway reads.
  if (nestsDeeperThan(parsed, MAX_JSON_DEPTH)) throw tooDeep();
  return isRecord(parsed) ? parsed : undefined;
}

function modelName(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
