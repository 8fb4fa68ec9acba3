/**
 * The dashboard's Budgets page in a real browser (Debian's chromium via playwright-core) against a
 * real gateway: budgets with their spend, a config budget read-only, create, a 400 beside its
 * field, edit a cap, delete after confirming, and the page with budgets disabled. With
 * UPDATE_SCREENSHOTS=1 it also writes the screenshot shown in docs/dashboard.md.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { SCREENSHOTS, SHOWN, openDashboard, screenshot, signIn, type DashboardSession } from '../support/dashboard.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { MASTER, USER_PATH_HEADER, chat } from '../support/rate-limits.ts';

/** `up/gpt-x` at $1000 per million tokens: a 'hi' request (2 tokens) costs $0.002. */
const PRICING = 'pricing:\n  up/gpt-x: { input_per_mtok: 1000, output_per_mtok: 1000 }\n';

function budgetRow(page: Page, budget: string): Locator {
  return page.locator(`tr[data-budget="${budget}"]`);
}

interface Budget {
  user_path: string;
  period_label: string;
  max_usd: number;
  spent_usd: number;
}

describe('dashboard: budgets', { timeout: 180_000 }, () => {
  // The gateway's clock stands still in the middle of a month, so the countdown is known.
  const frozen = Date.parse('2030-01-15T12:00:00.000Z');
  let session: DashboardSession;
  let gw: TestGateway;
  let page: Page;

  const send = async (userPath: string): Promise<number> => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat('up/gpt-x', 'hi'), headers: { authorization: `Bearer ${MASTER}`, [USER_PATH_HEADER]: userPath } });
    return res.status;
  };
  const budgets = async (): Promise<Budget[]> => (await gw.request('GET', '/admin/budgets', { headers: { authorization: `Bearer ${MASTER}` } })).json().budgets;

  before(async () => {
    session = await openDashboard({ yaml: PRICING, env: { SET_BUDGET_RESEARCH: 'month=200' }, now: () => frozen });
    ({ gw, page } = session);
  });
  after(async () => {
    await session?.close();
  });

  it('lists the budgets, a config budget read-only with its source', async () => {
    const nav = await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link').allTextContents();
    assert.deepEqual(nav, ['Rate limits', 'Queue', 'Explain a request', 'Providers', 'Budgets', 'API keys', 'Usage']);
    await page.getByRole('link', { name: 'Budgets' }).click();
    const row = budgetRow(page, '/research month');
    await row.waitFor(SHOWN);
    assert.match(await row.textContent() ?? '', /config · read-only/);
    assert.match(await row.textContent() ?? '', /\$0\.00 \/ \$200\.00 · \$200\.00 left/);
    assert.match(await row.textContent() ?? '', /2030-01-01 → 2030-02-01/);
    // 16 days and 12 hours to the month's end on the gateway's clock, less the moments since it answered.
    assert.match(await row.locator('.countdown').textContent() ?? '', /^16d 1[12]h$/);
    assert.match(await row.locator('.badge.config').getAttribute('title') ?? '', /SET_BUDGET_\* variables/, 'the badge says where it is declared');
    for (const action of ['Edit cap of', 'Delete']) {
      const button = row.getByRole('button', { name: new RegExp(`^${action}`) });
      assert.equal(await button.isDisabled(), true, `${action} is disabled`);
      assert.equal(await button.getAttribute('title'), 'Declared in the configuration: change it there', `${action} says why`);
    }
  });

  it('creates a budget, then shows its spend moving with traffic', async () => {
    const form = page.getByRole('form', { name: 'Create a budget' });
    await form.getByLabel('User path').fill('/team');
    await form.getByLabel('Period').selectOption('week');
    await form.getByLabel('Cap (US dollars)').fill('0.004');
    await form.getByRole('button', { name: 'Create budget' }).click();
    const row = budgetRow(page, '/team week');
    await row.waitFor(SHOWN);
    assert.match(await row.textContent() ?? '', /manual/);
    // The same actions, labelled the same, as on the rate-limits page.
    assert.deepEqual(await row.getByRole('button').allTextContents(), ['Edit', 'Delete']);
    assert.equal(await row.getByRole('button', { name: /^Edit cap of/ }).isEnabled(), true);

    assert.equal(await send('/team/a'), 200);
    await row.locator('[role=meter][aria-valuenow="0.002"]').waitFor(SHOWN);
    assert.match(await row.textContent() ?? '', /\$0\.002 \/ \$0\.004 · \$0\.002 left/);
    assert.equal(await send('/team/b'), 200);
    assert.equal(await send('/team/c'), 429, 'the budget is reached');
    await row.locator('[role=meter][aria-valuenow="0.004"]').waitFor(SHOWN);
    assert.equal(await row.locator('.bar.full').count(), 1, 'the bar says it is full');
    if (SCREENSHOTS) {
      // The bar grows with a CSS transition: shown at its end.
      await page.evaluate('Promise.all(document.getAnimations().map((a) => a.finished))');
      await screenshot(page, 'budgets');
    }
  });

  it('shows the API\'s 400 beside the field it names', async () => {
    const form = page.getByRole('form', { name: 'Create a budget' });
    await form.getByLabel('User path').fill('/team/y');
    await form.getByLabel('Period').selectOption('custom');
    await form.getByLabel('Window (seconds)').fill('99999999');
    await form.getByLabel('Cap (US dollars)').fill('5');
    await form.getByRole('button', { name: 'Create budget' }).click();
    await page.locator('#budget-period-seconds-error').filter({ hasText: /period_seconds/ }).waitFor(SHOWN);
    assert.equal(await form.getByLabel('Window (seconds)').getAttribute('aria-invalid'), 'true');

    await form.getByLabel('Period').selectOption('day');
    await form.getByLabel('Cap (US dollars)').fill('0');
    await form.getByRole('button', { name: 'Create budget' }).click();
    await page.locator('#budget-max-usd-error').filter({ hasText: /max_usd must be a number of US dollars greater than 0/ }).waitFor(SHOWN);
    assert.match(await form.getByLabel('Cap (US dollars)').getAttribute('aria-describedby') ?? '', /budget-max-usd-error/);
    assert.equal((await budgets()).some((b) => b.user_path === '/team/y'), false, 'nothing was created');
  });

  it('edits a cap and keeps the spend', async () => {
    await budgetRow(page, '/team week').getByRole('button', { name: /^Edit cap of/ }).click();
    const dialog = page.getByRole('dialog', { name: 'Edit cap' });
    await dialog.getByLabel('Cap (US dollars)').fill('1');
    await dialog.getByRole('button', { name: 'Save cap' }).click();
    await budgetRow(page, '/team week').filter({ hasText: '$0.004 / $1.00' }).waitFor(SHOWN);
    assert.equal(await send('/team/c'), 200, 'admitted again under the new cap');
  });

  it('shows what each consumer cost on the usage page', async () => {
    await page.getByRole('link', { name: 'Usage' }).click();
    // The gateway's (frozen) day, not the browser's.
    await page.getByLabel('To').fill('2030-01-15');
    await page.getByLabel('From').fill('2030-01-15');
    await page.locator('tr[data-consumer="/team/a"]').waitFor(SHOWN);
    // Cells: requests, prompt, completion, total tokens, cost, cache hits, refused.
    assert.deepEqual(await page.locator('tr[data-consumer="/team/a"] td').allTextContents(), ['1', '1', '1', '2', '$0.002', '0', '0']);
    // /team/c met the reached budget: a refusal, and its request the one admitted after the cap was raised.
    assert.deepEqual(await page.locator('tr[data-consumer="/team/c"] td').allTextContents().then((cells) => [cells[0], cells[6]]), ['1', '1']);
    await page.getByRole('link', { name: 'Budgets' }).click();
    await budgetRow(page, '/team week').waitFor(SHOWN);
  });

  it('deletes a budget after confirming', async () => {
    await budgetRow(page, '/team week').getByRole('button', { name: /^Delete/ }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete budget' });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached', ...SHOWN });
    assert.equal(await budgetRow(page, '/team week').count(), 1, 'cancel keeps it');
    await budgetRow(page, '/team week').getByRole('button', { name: /^Delete/ }).click();
    await page.getByRole('dialog', { name: 'Delete budget' }).getByRole('button', { name: 'Delete budget' }).click();
    await budgetRow(page, '/team week').waitFor({ state: 'detached', ...SHOWN });
    assert.deepEqual((await budgets()).map((b) => b.user_path), ['/research']);
  });

  it('says so and hides the Budgets entry when budgets are disabled', async () => {
    const off = await startTestGateway({ env: { MASTER_KEY: MASTER, BUDGETS_ENABLED: 'false' } });
    const other = await session.newPage();
    try {
      await signIn(other, off.url);
      const nav = await other.getByRole('navigation', { name: 'Dashboard' }).getByRole('link').allTextContents();
      assert.deepEqual(nav, ['Rate limits', 'Queue', 'Explain a request', 'Providers', 'API keys', 'Usage']);
      await other.goto(`${off.url}/dashboard#/budgets`);
      await other.getByRole('heading', { name: 'Budgets are disabled' }).waitFor(SHOWN);
      assert.match(await other.locator('main').textContent() ?? '', /BUDGETS_ENABLED=false/);
    } finally {
      await other.close();
      await off.close();
    }
  });
});
