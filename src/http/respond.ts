import { once } from 'node:events';
import type { FastifyReply } from 'fastify';
import { UpstreamUnavailableError, type ProviderResult } from '../providers/types.ts';
import { isRelayedBody } from '../providers/upstream.ts';
import { readBody } from '../providers/results.ts';
import { upstreamError } from '../errors/from-provider.ts';
import { GatewayError, errorBody, type ErrorDialect } from './errors.ts';

/** Header names and values in turn, `[name, value, name, value, ...]`. */
export type HeaderList = readonly string[];

/**
 * Writes a provider's answer to the client, with `extraHeaders`. Successful answers are written
 * to the socket directly (reply.hijack): buffered ones in one write, streams chunk by chunk so
 * nothing is held back. Headers set on `reply` before the call are not sent: pass them in
 * `extraHeaders`. Errors go through fastify. Resolves when the answer was fully written or the
 * client went away.
 */
export async function sendResult(
  reply: FastifyReply,
  result: ProviderResult,
  dialect: ErrorDialect,
  extraHeaders: HeaderList | undefined,
): Promise<void> {
  if (result.status >= 400) {
    const err = upstreamError(result.status, await readBody(result.body), result.headers);
    if (extraHeaders) setHeaders(reply, extraHeaders);
    await reply.code(err.status).headers(err.headers ?? {}).type('application/json').send(errorBody(err, dialect));
    return;
  }
  if (Buffer.isBuffer(result.body)) {
    // Bytes and headers are final: written by hand, like streams, rather than through fastify's
    // send pipeline (a header call per header, serializers and onSend hooks that have nothing
    // to do here).
    reply.hijack();
    reply.raw.writeHead(result.status, headerList(result.headers, extraHeaders, 'content-length', String(result.body.length)));
    reply.raw.end(result.body);
    return;
  }
  await writeStream(reply, result, extraHeaders);
}

async function writeStream(reply: FastifyReply, result: ProviderResult, extraHeaders: HeaderList | undefined): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(result.status, headerList(result.headers, extraHeaders));
  const isSse = (result.headers['content-type'] ?? '').includes('text/event-stream');
  try {
    if (isRelayedBody(result.body)) {
      // Ended by pipeTo with the last chunk: one socket write for both.
      await result.body.pipeTo(raw, { end: true });
      return;
    }
    for await (const chunk of result.body as AsyncIterable<Buffer>) {
      if (raw.destroyed) return;
      if (!raw.write(chunk)) await once(raw, 'drain');
    }
    raw.end();
  } catch (err) {
    if (raw.destroyed) return;
    if (isSse) {
      // Headers are gone already: tell an SSE client in-band, then end the stream.
      const error = err instanceof GatewayError ? err : new GatewayError({
        status: 502,
        type: 'provider_error',
        message: `upstream stream failed: ${err instanceof Error ? err.message : String(err)}`,
        code: 'stream_interrupted',
      });
      raw.end(`data: ${errorBody(error, 'openai')}\n\n`);
    } else {
      raw.destroy();
    }
    throw err;
  }
}

/**
 * The extra headers, the answer's and an optional last header (content-length) as one flat list:
 * Node's writeHead reads a list with a plain loop, an object with for-in and a has-own check per
 * header. The list is allocated once at its final size; pushes onto a copy grew it to nearly
 * twice that, and this list is built for every answer. Where both have a header (a passthrough
 * upstream's own `x-ratelimit-*`), the extra one wins.
 */
function headerList(answer: Readonly<Record<string, string>>, extra: HeaderList | undefined, lastName?: string, lastValue?: string): string[] {
  const extraLength = extra === undefined ? 0 : extra.length;
  let size = extraLength + (lastName === undefined ? 0 : 2);
  for (const name in answer) size += 2;
  const list = new Array<string>(size);
  let at = 0;
  for (; at < extraLength; at++) list[at] = extra![at]!;
  for (const name in answer) {
    if (extra !== undefined && hasName(extra, name)) continue;
    list[at++] = name;
    list[at++] = answer[name]!;
  }
  if (lastName !== undefined) {
    list[at++] = lastName;
    list[at++] = lastValue!;
  }
  // An answer header the extra list replaced leaves the list shorter than counted (rare).
  if (at < size) list.length = at;
  return list;
}

function hasName(list: HeaderList, name: string): boolean {
  for (let i = 0; i < list.length; i += 2) if (list[i] === name) return true;
  return false;
}

/** Sets a header list on a reply that fastify sends. */
export function setHeaders(reply: FastifyReply, list: HeaderList): void {
  for (let i = 0; i < list.length; i += 2) reply.header(list[i]!, list[i + 1]!);
}

/**
 * Waits for a stream's first chunk before anything is sent, so a stream that breaks at once can
 * still fail over. The returned result yields that chunk, then the rest.
 */
export async function primeStream(result: ProviderResult, provider: string): Promise<ProviderResult> {
  const iterator = (result.body as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  let first: IteratorResult<Buffer>;
  try {
    first = await iterator.next();
  } catch (err) {
    throw streamFailure(err, provider);
  }
  async function* replay(): AsyncGenerator<Buffer> {
    if (first.done) return;
    let finished = false;
    try {
      yield first.value;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
      finished = true;
    } finally {
      // A consumer that stops early (client gone) must still free the upstream connection.
      if (!finished) await iterator.return?.();
    }
  }
  return { status: result.status, headers: result.headers, body: replay(), usage: () => result.usage() };
}

function streamFailure(err: unknown, provider: string): GatewayError {
  if (err instanceof GatewayError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const status = err instanceof UpstreamUnavailableError ? err.status : 502;
  return new GatewayError({ status, type: 'provider_error', message: `provider ${provider} stream failed before its first byte: ${message}`, code: 'upstream_unavailable' });
}
