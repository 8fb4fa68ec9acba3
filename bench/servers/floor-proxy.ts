/**
 * The floor: a minimal pass-through proxy on the same HTTP stack as Floodgate (fastify 5 +
 * undici Pool). It forwards the raw body and streams the answer back, nothing else.
 * UPSTREAM_URL=http://127.0.0.1:N node bench/servers/floor-proxy.ts  -> prints {"port":N}
 */
import Fastify from 'fastify';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

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
  reply.hijack();
  const headers: Record<string, string> = { 'content-type': String(res.headers['content-type'] ?? 'application/json') };
  reply.raw.writeHead(res.statusCode, headers);
  for await (const chunk of res.body) reply.raw.write(chunk);
  reply.raw.end();
});
await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as AddressInfo).port })}\n`);
// Exit through process.exit so --cpu-prof writes its profile.
process.on('SIGTERM', () => void app.close().then(() => pool.close()).finally(() => process.exit(0)));
