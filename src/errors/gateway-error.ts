/** The gateway error types of the specification. */
export type ErrorType =
  | 'provider_error'
  | 'rate_limit_error'
  | 'invalid_request_error'
  | 'authentication_error'
  | 'not_found_error';

export interface GatewayErrorInit {
  status: number;
  type: ErrorType;
  message: string;
  param?: string | null;
  code?: string | null;
  headers?: Record<string, string>;
}

/**
 * An error that is answered to the client as it is; anything else becomes a generic 500. It lives
 * outside `http/` so that the services behind the routes (batches, realtime) can refuse a request
 * with the status and code the client must see, without depending on the HTTP layer.
 */
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

/** 400 `unsupported_endpoint` for a provider that lacks the ability a request needs. */
export const unsupportedByProvider = (what: string, provider: { name: string; type: string }, param: string | null): GatewayError =>
  badRequest(`${what} are not supported by provider ${provider.name} (type ${provider.type})`, param, 'unsupported_endpoint');
