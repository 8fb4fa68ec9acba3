import type { FastifyInstance } from 'fastify';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../shared/json.ts';
import { badRequest } from '../errors/gateway-error.ts';

/**
 * Every JSON body goes through fastify's own parser, which refuses `__proto__` and
 * `constructor.prototype` keys, and then through the depth limit. The bytes are kept on the
 * request: a model request the provider takes unchanged is forwarded as it was received.
 */
export function registerJsonBody(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.decorateRequest('jsonBytes', undefined);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    request.jsonBytes = bytes;
    const text = bytes.toString('utf8');
    parse(request, text, (err, value) => {
      if (err) return done(explain(err, text));
      if (nestsDeeperThan(value, MAX_JSON_DEPTH)) return done(tooDeep());
      done(null, value);
    });
  });
}

/**
 * Fastify's parser says only that the body is not valid JSON; a second look tells the client
 * which of the two it was.
 */
function explain(err: Error, text: string): Error {
  if ((err as { code?: string }).code !== 'FST_ERR_CTP_INVALID_JSON_BODY') return err;
  try {
    JSON.parse(text);
  } catch (syntax) {
    return badRequest(`malformed JSON body: ${(syntax as Error).message}`, null, 'invalid_json');
  }
  return badRequest('request body has a forbidden "__proto__" or "constructor.prototype" key', null, 'invalid_json');
}

/** Deeper bodies are refused: no API the gateway serves nests this far, and serialising one could exhaust the stack. */
export function tooDeep(): Error {
  return badRequest(`request body is nested deeper than ${MAX_JSON_DEPTH} levels`, null, 'invalid_json');
}
