import type { FastifyInstance } from 'fastify';
import type { HttpServices } from '../context.ts';
import { asGatewayError } from '../../errors/from-provider.ts';
import { ResponseEnd } from '../dispatch.ts';
import { GatewayError, badRequest, notFound } from '../errors.ts';
import { forwardedPath } from '../passthrough-path.ts';
import { tooDeep } from '../json-body.ts';
import { MAX_JSON_DEPTH, isRecord, nestsDeeperThan } from '../../shared/json.ts';
import { sendResult } from '../respond.ts';

/**
 * The methods forwarded. Any other is refused before anything is sent: TRACE would echo the
 * provider's credentials back, and HEAD, OPTIONS and the rest serve no API call.
 */
const FORWARDED_METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
const ALLOW = [...FORWARDED_METHODS].join(', ');

/** `/p/{provider}/{path}`: a request forwarded to that provider's base URL with its credentials. */
export function registerPassthrough(app: FastifyInstance, services: HttpServices): void {
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
      const model = modelOf(body, request.headers['content-type']);
      const end = new ResponseEnd(reply.raw);
      const headers = await services.admission.admitOne(request.identity, { provider: provider.name, model }, { lifetime: end });
      const untrack = services.inFlight.track(end);
      try {
        const startedAt = services.now();
        let result;
        try {
          result = await services.metrics.upstream(provider.name, () => provider.passthrough({ method: request.method, path, headers: request.headers, body, cancel: end.cancel }));
        } catch (err) {
          throw asGatewayError(err, provider.name);
        }
        services.admission.observe({ provider: provider.name, model }, result);
        let status = result.status;
        try {
          await sendResult(reply, result, 'openai', headers);
        } catch (err) {
          status = err instanceof GatewayError ? err.status : 502;
          request.log.warn({ err, provider: provider.name }, 'upstream stream failed');
        }
        services.admission.complete(request.identity, {
          provider: provider.name,
          model: model ?? '',
          endpoint: 'passthrough',
          usage: result.usage(),
          status,
          startedAt,
          cached: false,
        });
      } finally {
        untrack();
      }
      return reply;
    });
  });
}

/** A JSON body naming a model lets model rules apply to passthrough calls too. */
function modelOf(body: Buffer | undefined, contentType: string | undefined): string | undefined {
  if (body === undefined || body.length === 0 || !contentType?.includes('json')) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined; // not JSON after all: the upstream will judge the body
  }
  // Parsed here, so bounded here like every other JSON body the gateway reads.
  if (nestsDeeperThan(parsed, MAX_JSON_DEPTH)) throw tooDeep();
  return isRecord(parsed) && typeof parsed.model === 'string' && parsed.model !== '' ? parsed.model : undefined;
}
