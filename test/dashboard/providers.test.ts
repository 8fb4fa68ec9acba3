/**
 * The dashboard's Providers page in a real browser (Debian's chromium via playwright-core) against a
 * real gateway in front of fake upstreams that report their rate limits: nothing learned at first,
 * then each model with its remaining requests and tokens against the provider's own limits, resets
 * counting down, a refusal's cooldown with the model routed around, and when it last refused. With
 * UPDATE_SCREENSHOTS=1 it also writes the screenshot shown in docs/dashboard.md.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Locator, Page } from 'playwright-core';
import { buildDashboard } from '../../web/dashboard/build.ts';
import { launchBrowser, type Browser } from '../support/browser.ts';
import { openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { MASTER, chat } from '../support/rate-limits.ts';

const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1';
const SCREENSHOT_DIR = fileURLToPath(new URL('../../docs/screenshots/', import.meta.url));
/** Ceiling for what the page shows after a poll (every 2 s). */
const SHOWN = { timeout: 15_000 };

function row(page: Page, target: string): Locator {
  return page.locator(`tr[data-target="${target}"]`);
}

describe('dashboard: providers', { timeout: 120_000 }, () => {
  let openai: FakeUpstream;
  let backup: FakeUpstream;
  let gw: TestGateway;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  const send = async (model: string): Promise<number> =>
    (await gw.request('POST', '/v1/chat/completions', { body: chat(model, 'hi'), headers: { authorization: `Bearer ${MASTER}` } })).status;

  before(async () => {
    assert.notEqual(await buildDashboard({ ifStale: true }), 'no build tool');
    openai = await startFakeUpstream({ name: 'openai' });
    backup = await startFakeUpstream({ name: 'backup' });
    gw = await startTestGateway({
      yaml: 'providers:\n' + openaiProvider('openai', openai.url, ['gpt-4o', 'gpt-4o-mini']) + openaiProvider('backup', backup.url, ['gpt-4o'])
        + 'failover:\n  openai/gpt-4o: [backup/gpt-4o]\n',
      env: { MASTER_KEY: MASTER },
    });
    browser = await launchBrowser();
    page = await browser.context.newPage();
    page.on('pageerror', (err) => pageErrors.push(err.message));
    await page.goto(`${gw.url}/dashboard`);
    await page.getByLabel('Master key').fill(MASTER);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Dashboard' }).waitFor(SHOWN);
  });
  after(async () => {
    await browser?.close();
    await gw?.close();
    await Promise.all([openai?.close(), backup?.close()]);
    assert.deepEqual(pageErrors, [], 'no script error on any page');
  });

  it('says when nothing was learned yet', async () => {
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Providers' }).click();
    await page.getByRole('heading', { name: 'Providers', exact: true }).waitFor(SHOWN);
    await page.getByText('Nothing learned yet').waitFor(SHOWN);
  });

  it("shows each model's remaining requests and tokens against the provider's limits, with their resets counting down", async () => {
    openai.setAnswerHeaders({
      'x-ratelimit-limit-requests': '500', 'x-ratelimit-remaining-requests': '120', 'x-ratelimit-reset-requests': '1m30s',
      'x-ratelimit-limit-tokens': '30000', 'x-ratelimit-remaining-tokens': '27000', 'x-ratelimit-reset-tokens': '40s',
    }, 'gpt-4o-mini');
    assert.equal(await send('openai/gpt-4o-mini'), 200);
    const mini = row(page, 'openai/gpt-4o-mini');
    await mini.waitFor(SHOWN);
    await mini.getByRole('meter', { name: 'Requests remaining, openai/gpt-4o-mini' }).waitFor(SHOWN);
    assert.equal(await mini.getByRole('meter', { name: 'Requests remaining, openai/gpt-4o-mini' }).getAttribute('aria-valuetext'), '380 of 500 used, 120 left');
    assert.equal(await mini.getByRole('meter', { name: 'Tokens remaining, openai/gpt-4o-mini' }).getAttribute('aria-valuetext'), '3,000 of 30,000 used, 27,000 left');
    const resets = await mini.locator('td.countdown').allTextContents();
    assert.match(resets[0]!, /^1:(2\d|30)$/, `requests reset in about 1:30: ${resets[0]}`);
    assert.match(resets[1]!, /^(3\d|40)s$/, `tokens reset in about 40s: ${resets[1]}`);
    assert.match(await mini.locator('td.status').textContent() ?? '', /has capacity/);
    assert.equal((await mini.locator('td').last().textContent())?.trim(), '—', 'never refused');
  });

  it('shows a model its provider refused as routed around, with its cooldown and when it refused', async () => {
    openai.failNext(1, { status: 429, headers: { 'retry-after': '45' } });
    assert.equal(await send('openai/gpt-4o'), 200, 'served by the failover target');
    const refused = row(page, 'openai/gpt-4o');
    await refused.waitFor(SHOWN);
    const status = await refused.locator('td.status').textContent() ?? '';
    assert.match(status, /routed around · cooling down after a refusal · (4\d|45)s/);
    assert.match(await refused.locator('td').last().textContent() ?? '', /^\d\d:\d\d:\d\d UTC \(\d+s ago\)$/);
    assert.equal(await send('openai/gpt-4o'), 200);
    assert.equal(openai.callCount('/v1/chat/completions'), 2, 'the refusing model was not called again');
    if (SCREENSHOTS) {
      await page.evaluate('Promise.all(document.getAnimations().map((a) => a.finished))');
      await page.screenshot({ path: join(SCREENSHOT_DIR, 'providers.png'), fullPage: true });
    }
  });
});
