/**
 * Serving the dashboard: the page needs no key (its admin calls do), its assets are cacheable for
 * good, nothing else under the directory is reachable, and a gateway installed without the build
 * tools says how to build it instead of failing.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { registerDashboard } from '../../src/http/routes/dashboard.ts';
import { buildDashboard } from '../../web/dashboard/build.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { MASTER } from '../support/rate-limits.ts';

async function serve(dir: string): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify();
  registerDashboard(app, dir);
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url };
}

describe('dashboard files', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-dashboard-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('without a build, /dashboard says how to build it (503) and nothing breaks', async () => {
    const { app, url } = await serve(join(dir, 'missing'));
    try {
      const res = await fetch(`${url}/dashboard`);
      assert.equal(res.status, 503);
      assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
      assert.match(await res.text(), /npm run build:dashboard/);
      assert.equal((await fetch(`${url}/dashboard/assets/app.js`)).status, 404);
    } finally {
      await app.close();
    }
  });

  it('serves the page uncached, hashed assets for good, and nothing else from the directory', async () => {
    const built = join(dir, 'built');
    mkdirSync(join(built, 'assets'), { recursive: true });
    writeFileSync(join(built, 'index.html'), '<!doctype html><title>x</title>');
    writeFileSync(join(built, '.source-hash'), 'abc');
    writeFileSync(join(built, 'assets', 'app-1234.js'), 'console.log(1)');
    writeFileSync(join(built, 'assets', '.hidden'), 'secret');
    const { app, url } = await serve(built);
    try {
      for (const path of ['/dashboard', '/dashboard/']) {
        const page = await fetch(url + path);
        assert.equal(page.status, 200, path);
        assert.equal(page.headers.get('cache-control'), 'no-cache');
        assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'self'/);
        assert.match(page.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
        assert.equal(await page.text(), '<!doctype html><title>x</title>');
      }
      const asset = await fetch(`${url}/dashboard/assets/app-1234.js`);
      assert.equal(asset.status, 200);
      assert.match(asset.headers.get('content-type') ?? '', /javascript/);
      assert.match(asset.headers.get('cache-control') ?? '', /immutable/);
      for (const path of ['/dashboard/index.html', '/dashboard/.source-hash', '/dashboard/assets/.hidden', '/dashboard/assets/../index.html', '/dashboard/assets/%2e%2e/.source-hash']) {
        assert.equal((await fetch(url + path)).status, 404, path);
      }
    } finally {
      await app.close();
    }
  });
});

describe('dashboard on the gateway', () => {
  let gw: TestGateway;
  before(async () => {
    assert.notEqual(await buildDashboard({ ifStale: true }), 'no build tool');
    gw = await startTestGateway({ env: { MASTER_KEY: MASTER } });
  });
  after(async () => gw?.close());

  it('serves the page and its assets without a key, while the admin API it calls still needs the master key', async () => {
    const page = await gw.request('GET', '/dashboard');
    assert.equal(page.status, 200);
    const assets = [...page.text.matchAll(/(?:src|href)="(\/dashboard\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    assert.ok(assets.length >= 2, `the page names its script and stylesheet: ${page.text}`);
    for (const asset of assets) assert.equal((await gw.request('GET', asset)).status, 200, asset);
    assert.doesNotMatch(page.text, /https?:\/\//, 'nothing is loaded from elsewhere');
    assert.equal((await gw.request('GET', '/admin/rate-limits')).status, 401);
  });
});
