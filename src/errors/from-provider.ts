import { UnsupportedParameterError, UpstreamUnavailableError } from '../providers/types.ts';
import { isRecord } from '../shared/json.ts';
import { badRequest, GatewayError } from './gateway-error.ts';

/** Re-wraps an upstream error body as a gateway `provider_error`, keeping its message and code. */
export function upstreamError(status: number, body: Buffer, headers: Readonly<Record<string, string>>): GatewayError {
  let message = `upstream returned HTTP ${status}`;
  let code: string | null = null;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    const inner = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : parsed;
    if (isRecord(inner)) {
      if (typeof inner.message === 'string' && inner.message !== '') message = inner.message;
      if (typeof inner.code === 'string') code = inner.code;
      else if (typeof inner.type === 'string') code = inner.type;
    }
  } catch {
    const text = body.toString('utf8').trim();
    if (text !== '') message = `${message}: ${text.slice(0, 500)}`;
  }
  const passOn: Record<string, string> = {};
  for (const name of ['retry-after', 'retry-after-ms']) {
    const value = headers[name];
    if (value !== undefined) passOn[name] = value;
  }
  return new GatewayError({ status, type: 'provider_error', message, code, headers: passOn });
}

/** A provider call's failure as the error the client sees: unreachable, timed out, cancelled or refused. */
export function asGatewayError(err: unknown, provider: string): unknown {
  if (err instanceof UnsupportedParameterError) return badRequest(err.message, err.param, err.code);
  if (err instanceof UpstreamUnavailableError) {
    return new GatewayError({ status: err.status, type: 'provider_error', message: err.message, code: err.code ?? (err.status === 504 ? 'upstream_timeout' : 'upstream_unavailable') });
  }
  if (err instanceof Error && err.name === 'AbortError') {
    return new GatewayError({ status: 499, type: 'provider_error', message: `request to provider ${provider} was cancelled`, code: 'client_closed_request' });
  }
  return err;
}
