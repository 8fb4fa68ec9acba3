import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { UpstreamUnavailableError, type ProviderResult } from '../providers/types.ts';
import { readBody } from '../providers/results.ts';
import type { RelayedStream } from '../tokens/estimate.ts';
import { upstreamError } from '../errors/from-provider.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { errorBody, type ErrorDialect } from './errors.ts';
import { noteFailure } from './access-log.ts';
import { nameRequest } from './request-id.ts';

/**
 * Sends a provider's answer: the answer's status and headers, then `extraHeaders` (rate-limit and
 * cache headers, which win over an upstream's own), then the body: a buffer through fastify's
 * reply, a stream written as it arrives (writeStream). An upstream error answer is
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
  const sse = (result.headers['content-type'] ?? '').includes('text/event-stream');
  const failure = await writeStream(reply, result.body, sse, relayed);
  if (failure !== undefined) throw failure;
}

/**
 * Writes a stream answer to the response itself, the reply hijacked (fastify still runs the
 * onResponse hooks when the response finishes): the headers set on the reply and the request's
 * id, then each chunk as it arrives, paused while the socket is full. Once the headers are out a
 * failure cannot change the status: an SSE client is told in-band, with a last
 * `data: {"error": ...}` event; any other stream is cut. When the client leaves, the stream (and
 * with it its upstream call) is destroyed.
 *
 * Resolves when the stream closes (its last chunk written, or destroyed) with its failure, if it
 * failed before the client left (a failure that only follows the client leaving, its upstream
 * call cancelled, is nobody's to report).
 */
function writeStream(reply: FastifyReply, body: Readable, sse: boolean, relayed: RelayedStream | undefined): Promise<unknown> {
  const res = reply.raw;
  const line = reply.request.logLine;
  reply.hijack();
  nameRequest(reply);
  res.writeHead(reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders);
  let failure: unknown;
  let started = false;
  // The chunks (and the end) written in one turn of the event loop go out in one write: an
  // upstream's last chunk and its end usually arrive together, and the response's end would
  // otherwise be a write of its own. The socket is corked, not the response: a corked response
  // holds its chunks back and its end() would send the last-chunk marker before them.
  const socket = res.socket;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    socket?.uncork();
  };
  body.on('data', (chunk: Buffer) => {
    if (!started) {
      started = true;
      line.firstByte();
    }
    relayed?.add(chunk);
    if (!corked && socket !== null) {
      corked = true;
      socket.cork();
      setImmediate(uncork);
    }
    if (!res.write(chunk)) body.pause();
  });
  res.on('drain', () => body.resume());
  body.on('end', () => res.end());
  body.on('error', (err) => {
    if (res.destroyed) return;
    failure = err;
    if (sse) res.end(`data: ${errorBody(streamError(err), 'openai')}\n\n`);
    else res.destroy();
  });
  res.on('close', () => body.destroy());
  return new Promise((resolve) => body.on('close', () => resolve(failure)));
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
