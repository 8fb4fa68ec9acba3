/**
 * Waiting for capacity in the dashboard, in a real browser (Debian's chromium via playwright-core)
 * against a real gateway whose provider takes one request at a time: the Queue page shows a request
 * held waiting, by priority and by rule, and the explain box says a refused request would wait.
 * With UPDATE_SCREENSHOTS=1 it also writes the screenshot of the Queue page in docs/dashboard.md.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { SHOWN, openDashboard, screenshot, type DashboardSession } from '../support/dashboard.ts';
import type { FakeUpstream } from '../support/fake-upstream.ts';
import type { TestGateway } from '../support/gateway.ts';
import { MASTER, USER_PATH_HEADER, admin, chat, eventually, heldRequest } from '../support/rate-limits.ts';

const CONFIG = `
rate_limits:
  providers: [ { name: up, limits: [ { period: concurrent, max_requests: 1 } ] } ]
`;

describe('dashboard: waiting for capacity', { timeout: 180_000 }, () => {
  let session: DashboardSession;
  let up: FakeUpstream;
  let gw: TestGateway;
  let page: Page;

  /** A chat request that may wait 20 s, at `priority`. */
  const waiting = (userPath: string, priority: string): Promise<Response> =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${MASTER}`, [USER_PATH_HEADER]: userPath, 'x-floodgate-max-wait': '20', 'x-floodgate-priority': priority },
      body: JSON.stringify(chat('up/gpt-x', 'let me in')),
    });

  before(async () => {
    session = await openDashboard({ yaml: CONFIG });
    ({ up, gw, page } = session);
  });
  after(async () => {
    await session?.close();
  });

  it('shows requests held waiting by priority and by the rule they wait on, and the queue empty once they are served', async () => {
    await page.getByRole('link', { name: 'Queue' }).click();
    await page.getByText('No request is waiting on any rule.').waitFor(SHOWN);
    assert.match(await page.locator('.queue-total').textContent() ?? '', /^0 requests waiting/);

    const held = await heldRequest(gw, up, '/team/hold');
    const answers = [waiting('/team/a', 'high'), waiting('/team/b', 'low'), waiting('/team/c', 'low')];
    await eventually(async () => (await admin(gw, 'GET', '/admin/queue')).json().waiting === 3, 5000, 'three requests wait');

    const rule = page.locator('tr[data-queue-rule="provider up concurrent"]');
    await rule.waitFor(SHOWN);
    assert.deepEqual(await rule.locator('td, th').allTextContents(), ['Provider', 'up', 'concurrent', '3']);
    assert.match(await page.locator('.queue-total').textContent() ?? '', /^3 requests waiting/);
    const byPriority = await page.locator('tr[data-priority]').evaluateAll((rows) => rows.map((r) => [r.getAttribute('data-priority'), r.querySelector('td')?.textContent]));
    assert.deepEqual(byPriority, [['high', '1'], ['normal', '0'], ['low', '2']]);
    await screenshot(page, 'queue');

    held.release();
    await (await held.response).text();
    for (const answer of answers) assert.equal((await answer).status, 200);
    await page.getByText('No request is waiting on any rule.').waitFor(SHOWN);
    assert.match(await page.locator('.queue-total').textContent() ?? '', /^0 requests waiting/);
  });

  it('explains that a refused request would wait, and for how long at most, or that it would not', async () => {
    const held = await heldRequest(gw, up, '/team/hold');
    try {
      await page.getByRole('link', { name: 'Explain a request' }).click();
      const form = page.getByRole('form', { name: 'Request to explain' });
      await form.getByLabel('Model').fill('up/gpt-x');
      await form.getByLabel('User path').fill('/team/a');
      await form.getByLabel('Priority').selectOption('low');
      await form.getByLabel('Max wait (seconds)').fill('7.5');
      await form.getByRole('button', { name: 'Explain' }).click();
      await page.locator('.breach', { hasText: 'rate limit exceeded for provider up: concurrent request limit of 1 reached' }).waitFor(SHOWN);
      assert.match(await page.locator('.decision').textContent() ?? '', /Refused \(429\).*low priority/);
      assert.match(await page.locator('.wait').textContent() ?? '', /^Would wait for capacity, at most 7\.5 s/);

      await form.getByLabel('Max wait (seconds)').fill('0');
      await form.getByRole('button', { name: 'Explain' }).click();
      await page.locator('.wait', { hasText: 'Would not wait' }).waitFor(SHOWN);

      await form.getByLabel('Max wait (seconds)').fill('soon');
      await form.getByRole('button', { name: 'Explain' }).click();
      await page.locator('#explain-max-wait-error').filter({ hasText: 'max_wait' }).waitFor(SHOWN);
    } finally {
      held.release();
      await (await held.response).text();
    }
  });
});
