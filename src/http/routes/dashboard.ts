import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';

/**
 * Where web/dashboard/build.ts writes the built dashboard: `dist/dashboard` at the repository
 * root, which is three levels up from this file whether it runs from src/ or from a build in dist/.
 */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../../dist/dashboard/', import.meta.url));

/**
 * The page is public (it holds no data; every call it makes needs the master key), so it must not
 * be framed, must load nothing from elsewhere and must talk to this gateway only.
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Floodgate dashboard not built</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; line-height: 1.5">
<h1>Dashboard not built</h1>
<p>This gateway has no built dashboard: it was installed without its development dependencies
(<code>npm ci --omit=dev</code>), which hold the build tools.</p>
<p>Run <code>npm ci</code> and then <code>npm run build:dashboard</code> (or simply <code>npm start</code>,
which builds it when needed), then reload this page. The gateway itself works without it.</p>
</body></html>
`;

/**
 * `GET /dashboard` (and `/dashboard/`): the operator dashboard's page; its assets under
 * `/dashboard/assets/`. Register it in the public access family: the page needs no key, the admin
 * API it calls does. Until the dashboard is built, the page says how to build it (503).
 */
export function registerDashboard(app: FastifyInstance, dir: string = DASHBOARD_DIR): void {
  if (!existsSync(join(dir, 'index.html'))) app.log.warn('dashboard not built: run `npm run build:dashboard` to serve /dashboard');
  app.addHook('onRequest', async (_request, reply) => {
    reply.headers(SECURITY_HEADERS);
  });
  void app.register(fastifyStatic, {
    root: join(dir, 'assets'),
    prefix: '/dashboard/assets/',
    index: false,
    dotfiles: 'ignore',
    // Asset names carry a content hash: a new build gets new names, so they never go stale.
    maxAge: '365d',
    immutable: true,
    // Our own warning above says what to do when the directory is missing.
    suppressWarning: true,
  });
  const page = (_request: unknown, reply: FastifyReply) => {
    if (!existsSync(join(dir, 'index.html'))) return reply.code(503).type('text/html; charset=utf-8').send(NOT_BUILT_PAGE);
    // The page names the current build's assets: always revalidate it.
    return reply.header('cache-control', 'no-cache').sendFile('index.html', dir, { maxAge: 0, immutable: false, cacheControl: false });
  };
  app.get('/dashboard', page);
  app.get('/dashboard/', page);
}
