import type { FastifyReply, FastifyRequest } from 'fastify';

/** The gateway error types of the specification. */
export type ErrorType =
  | 'provider_error'
  | 'rate_limit_error'
  | 'invalid_request_error'
  | 'authentication_error'
  | 'not_found_error';

/** Which wire shape an error is written in: OpenAI everywhere, Anthropic on `/v1/messages`. */
export type ErrorDialect = 'openai' | 'anthropic';

export interface GatewayErrorInit {
  status: number;
  type: ErrorType;
  message: string;
  param?: string | null;
  code?: string | null;
  headers?: Record<string, string>;
}

/** An error that is answered to the client as it is; anything else becomes a generic 500. */
export class GatewayError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly param: string | null;
  readonly code: string | null;
  readonly headers: Record<string, string> | undefined;
  constructor(init: GatewayErrorInit) {
    super(init.message);
    this.name = 'GatewayError';
    this.status = init.status;
    this.type = init.type;
    this.param = init.param ?? null;
    this.code = init.code ?? null;
    this.headers = init.headers;
  }
}

export const badRequest = (message: string, param: string | null = null, code: string | null = null): GatewayError =>
  new GatewayError({ status: 400, type: 'invalid_request_error', message, param, code });

export const notFound = (message: string, code: string | null = null): GatewayError =>
  new GatewayError({ status: 404, type: 'not_found_error', message, code });

export const unauthorized = (message: string): GatewayError =>
  new GatewayError({ status: 401, type: 'authentication_error', message, code: 'invalid_api_key' });

export function errorBody(err: GatewayError, dialect: ErrorDialect): string {
  if (dialect === 'anthropic') {
    return JSON.stringify({ type: 'error', error: { type: err.type, message: err.message } });
  }
  return JSON.stringify({ error: { type: err.type, message: err.message, param: err.param, code: err.code } });
}

export function sendError(reply: FastifyReply, err: GatewayError, dialect: ErrorDialect = 'openai'): FastifyReply {
  if (err.headers) reply.headers(err.headers);
  return reply.code(err.status).type('application/json').send(errorBody(err, dialect));
}

/** The Anthropic route answers in the Anthropic shape; decided by the matched route, like auth. */
export function dialectOf(request: FastifyRequest): ErrorDialect {
  return request.routeOptions.url === '/v1/messages' ? 'anthropic' : 'openai';
}
