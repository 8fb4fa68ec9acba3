/**
 * The dashboard with reservations on, in a real browser against a real gateway: while a stream is
 * held, the token bar of its rule and the spend bar of its budget show what it reserved apart from
 * what is used, and the explain page shows the reservation a request would make.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { SHOWN, openDashboard, type DashboardSession } from '../support/dashboard.ts';
import { MASTER, USER_PATH_HEADER, chat, eventually } from '../support/rate-limits.ts';

const YAML = `pricing:
  up/gpt-x: { input_per_mtok: 0, output_per_mtok: 1000 }
rate_limits:
  reservations: { enabled: true }
  user_paths: [ { path: /r, limits: [ { period: hour, max_tokens: 1000 } ] } ]
budgets:
  reservations: { enabled: true }
  user_paths: [ { path: /r, limits: [ { period: day, max_usd: 1 } ] } ]
`;

describe('dashboard: reservations', { timeout: 180_000 }, () => {
  let session: DashboardSession;
  let page: Page;

  before(async () => {
    session = await openDashboard({ yaml: YAML });
    ({ page } = session);
  });
  after(async () => {
    await session?.close();
  });

  it('the bars show what a running request reserved apart from what is used', async () => {
    const release = session.up.holdStreamNext();
    const held = fetch(`${session.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${MASTER}`, [USER_PATH_HEADER]: '/r' },
      body: JSON.stringify(chat('up/gpt-x', 'hi', { stream: true, max_tokens: 100 })),
    });
    try {
      const res = await held;
      assert.equal(res.status, 200);
      await page.getByRole('link', { name: 'Rate limits' }).click();
      const tokens = page.locator('tr[data-rule="user_path /r hour"]').getByRole('meter', { name: /^Tokens used/ });
      await tokens.waitFor(SHOWN);
      await eventually(async () => /^0 of 1,000 used, 1\d\d reserved, 8\d\d left$/.test((await tokens.getAttribute('aria-valuetext')) ?? ''), 10_000, 'the token bar shows the reservation');
      assert.match(await page.locator('tr[data-rule="user_path /r hour"]').textContent() ?? '', /0 \/ 1,000 · 1\d\d reserved · 8\d\d left/);
      await page.getByRole('link', { name: 'Budgets' }).click();
      const spent = page.locator('tr[data-budget="/r day"]').getByRole('meter', { name: /^Spent/ });
      await spent.waitFor(SHOWN);
      await eventually(async () => /reserved/.test((await spent.getAttribute('aria-valuetext')) ?? ''), 10_000, 'the budget bar shows the reservation');
      assert.match(await spent.getAttribute('aria-valuetext') ?? '', /^\$0\.00 of \$1\.00 used, \$0\.10 reserved, \$0\.90 left$/);
      release();
      await (await held).text();
    } finally {
      release();
    }
  });

  it('the explain page shows the reservation a request would make', async () => {
    await page.getByRole('link', { name: 'Explain a request' }).click();
    await page.getByLabel('Model').fill('up/gpt-x');
    await page.getByLabel('User path').fill('/r');
    await page.getByLabel('Max tokens').fill('300');
    await page.getByRole('button', { name: 'Explain' }).click();
    const reservation = page.locator('.reservation');
    await reservation.waitFor(SHOWN);
    assert.match(await reservation.textContent() ?? '', /Would reserve 300 tokens on its token limits and \$0\.30 on its budgets until it ends/);
  });
});
