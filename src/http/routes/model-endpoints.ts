import type { FastifyInstance } from 'fastify';
import type { Endpoint } from '../../providers/types.ts';
import { dispatch, type DispatchServices } from '../dispatch.ts';
import { parseJsonRequest, parseTranscriptionRequest } from '../requests.ts';

const JSON_ENDPOINTS: ReadonlyArray<[string, Exclude<Endpoint, 'transcriptions'>]> = [
  ['/v1/chat/completions', 'chat'],
  ['/v1/responses', 'responses'],
  ['/v1/embeddings', 'embeddings'],
  ['/v1/audio/speech', 'speech'],
  ['/v1/messages', 'messages'],
];

export function registerModelEndpoints(app: FastifyInstance, services: DispatchServices): void {
  for (const [url, endpoint] of JSON_ENDPOINTS) {
    const dialect = endpoint === 'messages' ? 'anthropic' : 'openai';
    app.post(url, async (request, reply) => {
      const modelRequest = parseJsonRequest(endpoint, request.body, request.jsonBytes);
      if (endpoint === 'messages') modelRequest.headers = request.headers;
      await dispatch(request, reply, services, modelRequest, dialect);
      return reply;
    });
  }

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
