import type { FastifyInstance } from 'fastify';
import type { Endpoint } from '../../providers/types.ts';
import type { HttpServices } from '../context.ts';
import { dispatch } from '../dispatch.ts';
import { parseJsonRequest, parseTranscriptionRequest } from '../requests.ts';

const JSON_ENDPOINTS: ReadonlyArray<[string, Exclude<Endpoint, 'transcriptions'>]> = [
  ['/v1/chat/completions', 'chat'],
  ['/v1/responses', 'responses'],
  ['/v1/embeddings', 'embeddings'],
  ['/v1/audio/speech', 'speech'],
  ['/v1/messages', 'messages'],
];

export function registerModelEndpoints(app: FastifyInstance, services: HttpServices): void {
  app.register(async (scope) => {
    // The bytes are kept: a request the provider takes unchanged is forwarded as received instead
    // of serialized again. Fastify's own parser (prototype-poisoning checks, its error codes) runs
    // for anything that could hide a `__proto__` or `constructor` key and for every malformed body;
    // a body that cannot contain one (not even as a \u escape) is safe for plain JSON.parse,
    // which skips the parser's two full-text regex scans.
    const fastifyJson = scope.getDefaultJsonParser('error', 'error');
    scope.decorateRequest('jsonBytes', undefined);
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
      const bytes = body as Buffer;
      request.jsonBytes = bytes;
      const text = bytes.toString('utf8');
      if (text.length === 0 || mayHidePoisonedKey(text)) return fastifyJson(request, text, done);
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        return fastifyJson(request, text, done);
      }
      done(null, parsed);
    });
    for (const [url, endpoint] of JSON_ENDPOINTS) {
      const dialect = endpoint === 'messages' ? 'anthropic' : 'openai';
      scope.post(url, async (request, reply) => {
        const modelRequest = parseJsonRequest(endpoint, request.body, request.jsonBytes);
        if (endpoint === 'messages') modelRequest.headers = request.headers;
        await dispatch(request, reply, services, modelRequest, dialect);
        return reply;
      });
    }
  });

  app.register(async (scope) => {
    // Multipart bodies are kept as bytes; the route parses them once it knows the caller is allowed in.
    scope.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.post('/v1/audio/transcriptions', async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const modelRequest = await parseTranscriptionRequest(body, request.headers['content-type']);
      await dispatch(request, reply, services, modelRequest, 'openai');
      return reply;
    });
  });

  app.get('/v1/models', async () => {
    const data = services.resolver.listModels().map((m) => ({ id: m.id, object: 'model', created: 0, owned_by: m.ownedBy }));
    return { object: 'list', data };
  });
}

function mayHidePoisonedKey(text: string): boolean {
  return text.includes('proto') || text.includes('constructor') || text.includes('\\u');
}
