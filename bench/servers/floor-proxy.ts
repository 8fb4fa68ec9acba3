/**
 * The floor: a minimal pass-through proxy on the same HTTP stack as Floodgate (fastify 5 +
 * undici Pool). It forwards the raw body and streams the answer back, nothing else.
 * UPSTREAM_URL=http://127.0.0.1:N node bench/servers/floor-proxy.ts  -> prints {"port":N}
 *
 * FLOOR_SEND=reply (bench/tools/compare.ts side `floor-reply`) answers the way the gateway must:
 * through fastify's reply (so hooks see the answer), a buffered answer read whole and sent, a
 * stream sent as a stream through one stage. It measures what that answer path costs on its own.
 */
import Fastify from 'fastify';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { Pool } from 'undici';

const throughReply = process.env['FLOOR_SEND'] === 'reply';
const pool = new Pool(process.env['UPSTREAM_URL']!, { keepAliveTimeout: 30_000 });
const app = Fastify({ logger: false });
// Keep the body as bytes: a proxy does not need to parse it.
app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
app.post('/v1/chat/completions', async (request, reply) => {
  const res = await pool.request({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: request.body as Buffer,
  });
  const contentType = String(res.headers['content-type'] ?? 'application/json');
  if (throughReply) {
    reply.code(res.statusCode).header('content-type', contentType);
    if (!contentType.startsWith('text/event-stream')) return reply.send(Buffer.from(await res.body.arrayBuffer()));
    const stage = new PassThrough();
    res.body.on('error', (err) => stage.destroy(err));
    stage.on('close', () => res.body.destroy());
    return reply.send(res.body.pipe(stage));
  }
  reply.hijack();
  reply.raw.writeHead(res.statusCode, { 'content-type': contentType });
  for await (const chunk of res.body) reply.raw.write(chunk);
  reply.raw.end();
});
await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as AddressInfo).port })}\n`);
// Exit through process.exit so --cpu-prof writes its profile.
process.on('SIGTERM', () => void app.close().then(() => pool.close()).finally(() => process.exit(0)));
