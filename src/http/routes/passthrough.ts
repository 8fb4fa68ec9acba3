import type { FastifyInstance } from 'fastify';
import type { HttpServices } from '../context.ts';
import { asGatewayError, clientGoneSignal } from '../dispatch.ts';
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
      const startedAt = services.now();
      const signal = clientGoneSignal(reply);
      let result;
      try {
        result = await provider.passthrough({
          method: request.method,
          path,
          headers: request.headers,
          body: Buffer.isBuffer(request.body) ? request.body : undefined,
          signal,
        });
      } catch (err) {
        throw asGatewayError(err, provider.name);
      }
      await sendResult(reply, result, 'openai', undefined);
      const usage = result.usage();
      services.usage.record({
        timestamp: new Date(startedAt),
        userPath: request.identity.userPath,
        provider: provider.name,
        model: '',
        endpoint: 'passthrough',
        promptTokens: usage?.promptTokens ?? 0,
        completionTokens: usage?.completionTokens ?? 0,
        totalTokens: usage?.totalTokens ?? 0,
        cached: false,
        status: result.status,
        latencyMs: services.now() - startedAt,
        apiKeyId: request.identity.keyId,
      });
      return reply;
    });
  });
}
