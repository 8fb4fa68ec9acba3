import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { GatewayError } from '../errors/gateway-error.ts';
import { UpstreamUnavailableError } from '../providers/types.ts';

/**
 * Waits until a stream has its first bytes (or its end) before anything is sent, so a stream
 * that breaks at once can still fail over. Nothing is read: the stream is sent as it is.
 */
export async function primeStream(body: Readable, provider: string): Promise<void> {
  if (body.errored) throw streamFailure(body.errored, provider);
  if (body.readableLength > 0) return;
  try {
    await once(body, 'readable');
  } catch (err) {
    throw streamFailure(err, provider);
  }
}

function streamFailure(err: unknown, provider: string): GatewayError {
  if (err instanceof GatewayError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const status = err instanceof UpstreamUnavailableError ? err.status : 502;
  return new GatewayError({ status, type: 'provider_error', message: `provider ${provider} stream failed before its first byte: ${message}`, code: 'upstream_unavailable' });
}
