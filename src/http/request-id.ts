import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply } from 'fastify';

const REQUEST_ID_HEADER = 'x-request-id';
/** A caller's request id is kept when it is a plain token: it goes into log lines and headers. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The id of a request (fastify's `genReqId`): the caller's when it is sane, a new one otherwise. */
export function requestId(request: IncomingMessage): string {
  const given = request.headers[REQUEST_ID_HEADER];
  return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID();
}

/** Names the request in its answer's headers: the id its log lines carry. */
export function nameRequest(reply: FastifyReply): void {
  reply.header(REQUEST_ID_HEADER, reply.request.id);
}
