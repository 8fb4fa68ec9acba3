import type { ServerResponse } from 'node:http';
import { PassThrough, Transform, type Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { UpstreamUnavailableError, type ProviderResult } from '../providers/types.ts';
import { readBody } from '../providers/results.ts';
import type { RelayedStream } from '../tokens/estimate.ts';
import { upstreamError } from '../errors/from-provider.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { errorBody, type ErrorDialect } from './errors.ts';
import { noteFailure } from './access-log.ts';

/**
 * Sends a provider's answer through fastify's reply, so every hook sees it: the answer's status
 * and headers, then `extraHeaders` (rate-limit and cache headers, which win over an upstream's
 * own), then the body: a buffer as it is, a stream as it arrives. An upstream error answer is
 * re-wrapped as `provider_error` with the upstream status.
 *
 * Resolves when a buffered answer was handed to fastify, and when a stream is over (complete, or
 * the client left). A stream that failed mid-way rejects, once it is over, with its error.
 * `relayed`, when given, keeps the bytes of an SSE answer as they go to the client (an estimate
 * of its usage may need them).
 */
export async function sendResult(
  reply: FastifyReply,
  result: ProviderResult,
  dialect: ErrorDialect,
  extraHeaders: Readonly<Record<string, string>> | undefined,
  relayed?: RelayedStream,
): Promise<void> {
  if (result.status >= 400) {
    let err: GatewayError;
    try {
      err = upstreamError(result.status, await readBody(result.body), result.headers);
    } catch (readFailure) {
      // Nothing was sent yet: the client still gets a proper error answer.
      err = streamError(readFailure);
    }
    noteFailure(reply, err.message);
    if (extraHeaders) reply.headers(extraHeaders);
    await reply.code(err.status).headers(err.headers ?? {}).type('application/json').send(errorBody(err, dialect));
    return;
  }
  reply.code(result.status).headers(result.headers);
  if (extraHeaders) reply.headers(extraHeaders);
  if (Buffer.isBuffer(result.body)) {
    reply.send(result.body);
    return;
  }
  const res = reply.raw;
  const body = result.body;
  let failure: unknown;
  // A failure that only follows the client leaving (its upstream call was cancelled) is nobody's to report.
  body.on('error', (err) => {
    if (!res.destroyed) failure = err;
  });
  const sse = (result.headers['content-type'] ?? '').includes('text/event-stream');
  // Once the headers are out, a failure cannot change the status: an SSE client is told in-band;
  // any other stream is cut (fastify destroys the response when its payload fails).
  // Over when the stream closes: after its last chunk went to the response (which fastify then
  // ends), or when it was destroyed (the client left, or it failed).
  const closed = new Promise((resolve) => body.once('close', resolve));
  reply.send(sse ? endingInBand(body, res, relayed) : body);
  await closed;
  if (failure !== undefined) throw failure;
}

/** An SSE stream that, when it fails, ends with a last `data: {"error": ...}` event instead. */
function endingInBand(body: Readable, res: ServerResponse, relayed: RelayedStream | undefined): Readable {
  const out = relayed === undefined ? new PassThrough() : keeping(relayed);
  body.on('error', (err) => {
    if (res.destroyed) out.destroy();
    else out.end(`data: ${errorBody(streamError(err), 'openai')}\n\n`);
  });
  // Destroyed by fastify when the client left: the provider's stream (and its upstream) goes too.
  out.on('close', () => body.destroy());
  return body.pipe(out);
}

/** A pass-through stage that also hands every chunk to `relayed`. */
function keeping(relayed: RelayedStream): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      relayed.add(chunk);
      callback(null, chunk);
    },
  });
}

function streamError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError({
    status: 502,
    type: 'provider_error',
    message: `upstream stream failed: ${err instanceof Error ? err.message : String(err)}`,
    code: (err instanceof UpstreamUnavailableError ? err.code : undefined) ?? 'stream_interrupted',
  });
}
