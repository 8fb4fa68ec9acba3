import type { FastifyInstance } from 'fastify';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../shared/json.ts';
import { badRequest } from './errors.ts';

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
    parse(request, bytes.toString('utf8'), (err, value) => {
      if (err) return done(err);
      if (nestsDeeperThan(value, MAX_JSON_DEPTH)) return done(tooDeep());
      done(null, value);
    });
  });
}

/** Deeper bodies are refused: no API the gateway serves nests this far, and serialising one could exhaust the stack. */
export function tooDeep(): Error {
  return badRequest(`request body is nested deeper than ${MAX_JSON_DEPTH} levels`, null, 'invalid_json');
}
