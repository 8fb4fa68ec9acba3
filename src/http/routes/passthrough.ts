import type { FastifyInstance } from 'fastify';
import type { HttpServices } from '../context.ts';
import { accountCompleted } from '../accounting.ts';
import { ResponseEnd, admit, asGatewayError } from '../dispatch.ts';
import { notFound } from '../errors.ts';
import { sendResult } from '../respond.ts';

/** `/p/{provider}/{path}`: any request forwarded to that provider's base URL with its credentials. */
export function registerPassthrough(app: FastifyInstance, services: HttpServices): void {
  app.register(async (scope) => {
    // Bodies are forwarded byte for byte whatever their type.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.all('/p/:provider/*', async (request, reply) => {
      const { provider: name } = request.params as { provider: string };
      const provider = services.resolver.provider(name);
      if (!provider) throw notFound(`provider "${name}" not found`, 'provider_not_found');
      const prefix = `/p/${name}`;
      const path = request.url.slice(request.url.indexOf(prefix) + prefix.length) || '/';
      const body = Buffer.isBuffer(request.body) ? request.body : undefined;
      const model = modelOf(body, request.headers['content-type']);
      const end = new ResponseEnd(reply.raw);
      const headers = admit(services, { userPath: request.identity.userPath, provider: provider.name, model }, end);
      const startedAt = services.now();
      let result;
      try {
        result = await provider.passthrough({
          method: request.method,
          path,
          headers: request.headers,
          body,
          cancel: end.cancel,
        });
      } catch (err) {
        throw asGatewayError(err, provider.name);
      }
      await sendResult(reply, result, 'openai', headers);
      accountCompleted(services, request.identity, {
        provider: provider.name,
        model: model ?? '',
        endpoint: 'passthrough',
        usage: result.usage(),
        status: result.status,
        startedAt,
        cached: false,
      });
      return reply;
    });
  });
}

/** A JSON body naming a model lets model rules apply to passthrough calls too. */
function modelOf(body: Buffer | undefined, contentType: string | undefined): string | undefined {
  if (body === undefined || body.length === 0 || !contentType?.includes('json')) return undefined;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'model' in parsed && typeof parsed.model === 'string' && parsed.model !== '') {
      return parsed.model;
    }
  } catch {
    // Not JSON after all: the upstream will judge the body.
  }
  return undefined;
}
