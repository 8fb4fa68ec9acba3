/**
 * Open mode (no MASTER_KEY) in a real browser: a page from another origin cannot use the gateway
 * (a WebSocket, which no CORS rule guards, a no-cors POST, a form post), while the dashboard the
 * gateway serves itself works as usual.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { buildDashboard } from '../../web/dashboard/build.ts';
import { launchBrowser, type Browser } from '../support/browser.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const SHOWN = { timeout: 15_000 };

/** A page on another origin that tries the gateway every way a page can without CORS's consent. */
function evilPage(gateway: string): string {
  const ws = gateway.replace('http', 'ws');
  return `<!doctype html><html><body>
<form id="post" method="POST" action="${gateway}/admin/api-keys" enctype="text/plain" target="sink">
  <input name='{"name":"planted-by-form","x":"' value='"}'>
</form>
<iframe name="sink"></iframe>
<script>
  window.outcome = new Promise((resolve) => {
    const socket = new WebSocket('${ws}/v1/realtime?model=mock-1', ['realtime']);
    socket.onopen = () => resolve('open');
    socket.onerror = () => resolve('refused');
  });
  fetch('${gateway}/admin/api-keys', { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{"name":"planted-by-fetch"}' });
  document.getElementById('post').submit();
</script>
</body></html>`;
}

describe('open mode in a browser', { timeout: 120_000 }, () => {
  let gw: TestGateway;
  let evil: Server;
  let evilUrl: string;
  let browser: Browser;
  let page: Page;

  before(async () => {
    assert.notEqual(await buildDashboard({ ifStale: true }), 'no build tool');
    gw = await startTestGateway();
    evil = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(evilPage(gw.url));
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
    browser = await launchBrowser();
    page = await browser.context.newPage();
  });
  after(async () => {
    await browser?.close();
    await new Promise((resolve) => evil?.close(resolve));
    await gw?.close();
  });

  it('a page from another origin cannot open a realtime session or create a key', async () => {
    await page.goto(evilUrl);
    assert.equal(await page.evaluate('window.outcome'), 'refused', 'the cross-origin WebSocket is refused');
    // The form post and the fetch have been answered once the frame has loaded the form's answer.
    await page.frameLocator('iframe[name=sink]').locator('body').waitFor({ state: 'attached', ...SHOWN });
    await page.waitForLoadState('networkidle');
    const keys = await gw.request('GET', '/admin/api-keys');
    assert.deepEqual(keys.json().api_keys, []);
  });

  it('the dashboard the gateway serves itself lists rules, creates a key and lists it', async () => {
    await page.goto(`${gw.url}/dashboard`);
    await page.getByRole('note').filter({ hasText: 'This gateway has no master key' }).waitFor(SHOWN);
    await page.getByText('No rules yet').waitFor(SHOWN);
    await page.getByRole('link', { name: 'API keys' }).click();
    const form = page.getByRole('form', { name: 'Create a key' });
    await form.getByLabel('Name').fill('from-the-dashboard');
    await form.getByRole('button', { name: 'Create key' }).click();
    await page.locator('#new-secret').waitFor(SHOWN);
    await page.locator('tr', { hasText: 'from-the-dashboard' }).waitFor(SHOWN);
    const keys = await gw.request('GET', '/admin/api-keys');
    assert.deepEqual(keys.json().api_keys.map((k: { name: string }) => k.name), ['from-the-dashboard']);
  });
});
