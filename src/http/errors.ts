import type { FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayError } from '../errors/gateway-error.ts';
import { noteFailure } from './access-log.ts';

/** Which wire shape an error is written in: OpenAI everywhere, Anthropic on `/v1/messages`. */
export type ErrorDialect = 'openai' | 'anthropic';

export function errorBody(err: GatewayError, dialect: ErrorDialect): string {
  if (dialect === 'anthropic') {
    return JSON.stringify({ type: 'error', error: { type: err.type, message: err.message } });
  }
  return JSON.stringify({ error: { type: err.type, message: err.message, param: err.param, code: err.code } });
}

export function sendError(reply: FastifyReply, err: GatewayError, dialect: ErrorDialect = 'openai'): FastifyReply {
  noteFailure(reply, err.message);
  if (err.headers) reply.headers(err.headers);
  return reply.code(err.status).type('application/json').send(errorBody(err, dialect));
}

/** The Anthropic route answers in the Anthropic shape; decided by the matched route, like auth. */
export function dialectOf(request: FastifyRequest): ErrorDialect {
  return request.routeOptions.url === '/v1/messages' ? 'anthropic' : 'openai';
}
