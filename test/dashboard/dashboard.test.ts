/**
 * The dashboard in a real browser (Debian's chromium via playwright-core) against a real gateway:
 * sign-in, rules with live counters, every rule change with its confirmation, keys, usage charts,
 * the explain box, and the page with rate limits disabled. With UPDATE_SCREENSHOTS=1 it also
 * writes the screenshots shown in docs/dashboard.md.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { SHOWN, openDashboard, screenshot, signIn, type DashboardSession } from '../support/dashboard.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { MASTER, USER_PATH_HEADER, chat, listRules } from '../support/rate-limits.ts';

const CONFIG = `
rate_limits:
  providers: [ { name: up, limits: [ { period: hour, max_requests: 1000 } ] } ]
`;

/** A rule's row, by scope, subject and period label. */
function ruleRow(page: Page, rule: string): Locator {
  return page.locator(`tr[data-rule="${rule}"]`);
}

/** Waits until the row's request meter reads `used`. */
async function requestsUsed(page: Page, rule: string, used: number): Promise<void> {
  await ruleRow(page, rule).locator(`[role=meter][aria-label^="Requests used"][aria-valuenow="${used}"]`).waitFor(SHOWN);
}

describe('dashboard in a browser', { timeout: 180_000 }, () => {
  // The gateway's clock stands still five seconds into a minute (a past one, today's): a minute
  // window can't turn over between a request and the poll that shows it.
  const frozen = Math.floor(Date.now() / 60_000) * 60_000 - 55_000;
  let session: DashboardSession;
  let gw: TestGateway;
  let page: Page;

  const send = async (userPath: string, key = MASTER): Promise<number> => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat('up/gpt-x', 'hello there'), headers: { authorization: `Bearer ${key}`, [USER_PATH_HEADER]: userPath } });
    return res.status;
  };

  before(async () => {
    session = await openDashboard({ yaml: CONFIG, now: () => frozen, signedIn: false });
    ({ gw, page } = session);
  });
  after(async () => {
    await session?.close();
  });

  it('asks for the master key, refuses any other, and keeps it for the tab', async () => {
    await page.goto(`${gw.url}/dashboard`);
    const keyField = page.getByLabel('Master key');
    await keyField.waitFor(SHOWN);
    await screenshot(page, 'sign-in');
    await keyField.fill('not-the-master-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#master-key-error', { hasText: 'refused this key' }).waitFor(SHOWN);
    assert.equal(await keyField.getAttribute('aria-invalid'), 'true');

    await keyField.fill(MASTER);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Rate limits', exact: true }).waitFor(SHOWN);
    const nav = await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link').allTextContents();
    assert.deepEqual(nav, ['Rate limits', 'Queue', 'Explain a request', 'Providers', 'Budgets', 'API keys', 'Usage']);

    await page.reload();
    await page.getByRole('heading', { name: 'Rate limits', exact: true }).waitFor(SHOWN);
    assert.equal(await page.getByLabel('Master key').count(), 0, 'not asked again in the same tab');
  });

  it('shows a config rule read-only, with its source', async () => {
    const row = ruleRow(page, 'provider up hour');
    await row.waitFor(SHOWN);
    assert.match(await row.textContent() ?? '', /config · read-only/);
    assert.match(await row.locator('.badge.config').getAttribute('title') ?? '', /SET_\*RATE_LIMIT_\* variables/, 'the badge says where it is declared');
    for (const action of ['Edit caps of', 'Move', 'Delete']) {
      const button = row.getByRole('button', { name: new RegExp(`^${action}`) });
      assert.equal(await button.isDisabled(), true, `${action} is disabled`);
      assert.equal(await button.getAttribute('title'), 'Declared in the configuration: change it there', `${action} says why`);
    }
    assert.equal(await row.getByRole('button', { name: /^Reset counters of/ }).isEnabled(), true, 'its counters can still be reset');
  });

  it('creates a rule and lists it', async () => {
    const form = page.getByRole('form', { name: 'Create a rule' });
    await form.getByLabel('User path', { exact: true }).fill('/team/x');
    await form.getByLabel('Period').selectOption('minute');
    await form.getByLabel('Max requests').fill('3');
    await form.getByRole('button', { name: 'Create rule' }).click();
    await requestsUsed(page, 'user_path /team/x minute', 0);
    assert.match(await ruleRow(page, 'user_path /team/x minute').textContent() ?? '', /manual/);
  });

  it('shows the API\'s 400 beside the field it names', async () => {
    const form = page.getByRole('form', { name: 'Create a rule' });
    await form.getByLabel('User path', { exact: true }).fill('/team/y');
    await form.getByLabel('Period').selectOption('custom');
    await form.getByLabel('Window (seconds)').fill('99999999');
    await form.getByLabel('Max requests').fill('5');
    await form.getByRole('button', { name: 'Create rule' }).click();
    const error = page.locator('#create-period-seconds-error');
    await error.filter({ hasText: /period_seconds/ }).waitFor(SHOWN);
    assert.equal(await form.getByLabel('Window (seconds)').getAttribute('aria-invalid'), 'true');
    assert.match(await form.getByLabel('Window (seconds)').getAttribute('aria-describedby') ?? '', /create-period-seconds-error/);

    await form.getByLabel('Period').selectOption('minute');
    await form.getByLabel('User path', { exact: true }).fill('/team/../y');
    await form.getByRole('button', { name: 'Create rule' }).click();
    await page.locator('#create-subject-error').filter({ hasText: /'\.\.'/ }).waitFor(SHOWN);
    assert.equal((await listRules(gw)).some((r) => r.subject === '/team/y'), false, 'nothing was created');
  });

  it('moves the counters with traffic, refreshing on its own, with a countdown to the window\'s end', async () => {
    assert.equal(await send('/team/x/alice'), 200);
    assert.equal(await send('/team/x/bob'), 200);
    await requestsUsed(page, 'user_path /team/x minute', 2);
    const row = ruleRow(page, 'user_path /team/x minute');
    assert.match(await row.textContent() ?? '', /2 \/ 3 · 1 left/);
    // The window ends 55 s after the gateway's (frozen) time; the page counts down between polls.
    assert.match(await row.locator('.countdown').textContent() ?? '', /^5[3-5]s$/);
    await screenshot(page, 'rate-limits');
  });

  it('edits caps and keeps the counters', async () => {
    await ruleRow(page, 'user_path /team/x minute').getByRole('button', { name: /^Edit caps of/ }).click();
    const dialog = page.getByRole('dialog', { name: 'Edit caps' });
    await dialog.waitFor(SHOWN);
    assert.equal(await dialog.getByLabel('User path', { exact: true }).getAttribute('readonly'), '', 'the key is not editable here');
    await dialog.getByLabel('Max requests').fill('5');
    await dialog.getByRole('button', { name: 'Save caps' }).click();
    await ruleRow(page, 'user_path /team/x minute').filter({ hasText: '2 / 5' }).waitFor(SHOWN);
  });

  it('moves a rule after saying that its counters restart', async () => {
    await ruleRow(page, 'user_path /team/x minute').getByRole('button', { name: /^Move/ }).click();
    const dialog = page.getByRole('dialog', { name: 'Move rule' });
    await dialog.waitFor(SHOWN);
    await dialog.getByLabel('User path', { exact: true }).fill('/team/z');
    assert.match(await dialog.locator('#move-warning').textContent() ?? '', /counters restart at zero/);
    await dialog.getByRole('button', { name: 'Move rule (counters restart)' }).click();
    await requestsUsed(page, 'user_path /team/z minute', 0);
    await ruleRow(page, 'user_path /team/x minute').waitFor({ state: 'detached', ...SHOWN });
    const rules = await listRules(gw);
    assert.deepEqual(rules.filter((r) => r.scope === 'user_path').map((r) => [r.subject, r.max_requests, r.requests_used]), [['/team/z', 5, 0]]);
  });

  it('resets one rule after confirming', async () => {
    assert.equal(await send('/team/z'), 200);
    await requestsUsed(page, 'user_path /team/z minute', 1);
    await ruleRow(page, 'user_path /team/z minute').getByRole('button', { name: /^Reset counters of/ }).click();
    const dialog = page.getByRole('dialog', { name: 'Reset counters' });
    await dialog.getByRole('button', { name: 'Reset counters' }).click();
    await requestsUsed(page, 'user_path /team/z minute', 0);
  });

  it('resets every counter only after the word reset is typed', async () => {
    assert.equal(await send('/team/z'), 200);
    await requestsUsed(page, 'user_path /team/z minute', 1);
    await page.getByRole('button', { name: 'Reset all counters…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Reset every counter' });
    const confirm = dialog.getByRole('button', { name: 'Reset all counters' });
    assert.equal(await confirm.isDisabled(), true);
    await dialog.getByLabel('Type reset to confirm').fill('rese');
    assert.equal(await confirm.isDisabled(), true);
    await dialog.getByLabel('Type reset to confirm').fill('reset');
    await confirm.click();
    await requestsUsed(page, 'user_path /team/z minute', 0);
    const up = (await listRules(gw)).find((r) => r.scope === 'provider');
    assert.equal(up?.requests_used, 0, 'config rules are reset too');
  });

  it('deletes a rule after confirming', async () => {
    await ruleRow(page, 'user_path /team/z minute').getByRole('button', { name: /^Delete/ }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete rule' });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached', ...SHOWN });
    assert.equal(await ruleRow(page, 'user_path /team/z minute').count(), 1, 'cancel keeps it');
    await ruleRow(page, 'user_path /team/z minute').getByRole('button', { name: /^Delete/ }).click();
    await page.getByRole('dialog', { name: 'Delete rule' }).getByRole('button', { name: 'Delete rule' }).click();
    await ruleRow(page, 'user_path /team/z minute').waitFor({ state: 'detached', ...SHOWN });
    assert.equal((await listRules(gw)).some((r) => r.subject === '/team/z'), false);
  });

  it('creates a key bound to a user path with its highest priority, shows its secret once with a copy button, lists and revokes it', async () => {
    await page.getByRole('link', { name: 'API keys' }).click();
    const form = page.getByRole('form', { name: 'Create a key' });
    await form.getByLabel('Name').fill('ci-runner');
    await form.getByLabel('User path (optional)').fill('/team/k');
    assert.equal(await form.getByLabel('Highest priority').inputValue(), 'normal', 'normal unless chosen');
    await form.getByLabel('Highest priority').selectOption('low');
    await form.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.locator('#new-secret').textContent({ timeout: SHOWN.timeout }))?.trim() ?? '';
    assert.ok(secret.length > 20, secret);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied', exact: true }).waitFor(SHOWN);
    assert.equal(await page.evaluate('navigator.clipboard.readText()'), secret);
    const row = page.locator('tr', { hasText: 'ci-runner' });
    await row.waitFor(SHOWN);
    assert.match(await row.textContent() ?? '', /\/team\/k/);
    assert.equal(await row.locator('td.priority').textContent(), 'low');
    const listed = (await gw.request('GET', '/admin/api-keys', { headers: { authorization: `Bearer ${MASTER}` } })).json().api_keys as Array<{ name: string; max_priority: string }>;
    assert.equal(listed.find((k) => k.name === 'ci-runner')?.max_priority, 'low', 'created with the priority chosen');
    await screenshot(page, 'keys');
    assert.equal(await send('/ignored', secret), 200, 'the secret works');

    await page.getByRole('button', { name: 'I have copied it' }).click();
    await page.reload();
    await row.waitFor(SHOWN);
    assert.equal((await page.content()).includes(secret), false, 'the secret is never shown again');

    await row.getByRole('button', { name: 'Revoke ci-runner' }).click();
    await page.getByRole('dialog', { name: 'Revoke key' }).getByRole('button', { name: 'Revoke key' }).click();
    await row.waitFor({ state: 'detached', ...SHOWN });
    assert.equal(await send('/ignored', secret), 401, 'a revoked key is refused');
  });

  it('charts requests and tokens over time and lists the top consumers', async () => {
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.locator('tr[data-consumer="/team/x/alice"]').waitFor(SHOWN);
    // Nothing was refused yet: the refusals' chart says so instead of drawing zeros.
    await page.locator('[data-chart="refused"]').getByText('No request was refused in this range.').waitFor(SHOWN);
    assert.equal(await page.locator('.chart canvas').count(), 2, 'two charts drawn');
    assert.deepEqual(await page.getByRole('img').evaluateAll((els) => els.map((e) => e.getAttribute('aria-label'))), ['Requests over time by user path', 'Tokens over time by user path']);
    const consumers = await page.locator('tr[data-consumer]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-consumer')));
    assert.deepEqual([...consumers].sort(), ['/team/k', '/team/x/alice', '/team/x/bob', '/team/z']);
    assert.match(await page.locator('tr[data-consumer="/team/z"]').textContent() ?? '', /^\/team\/z2/, '/team/z made two requests');
    await page.getByLabel('Group by').selectOption('model');
    await page.locator('tr[data-consumer="up/gpt-x"]').waitFor(SHOWN);
    await page.getByLabel('Group by').selectOption('user_path');
    await page.locator('tr[data-consumer="/team/x/alice"]').waitFor(SHOWN);
    await screenshot(page, 'usage');
  });

  it('explains a request: admitted with its target, then refused with the breach a request gets', async () => {
    await page.getByRole('link', { name: 'Explain a request' }).click();
    const form = page.getByRole('form', { name: 'Request to explain' });
    await form.getByLabel('Model').fill('nope/nothing');
    await form.getByRole('button', { name: 'Explain' }).click();
    await page.locator('#explain-model-error').filter({ hasText: 'not found' }).waitFor(SHOWN);

    await form.getByLabel('Model').fill('up/gpt-x');
    await form.getByLabel('User path').fill('/team/q');
    await form.getByRole('button', { name: 'Explain' }).click();
    await page.getByText('Would be sent to up/gpt-x').waitFor(SHOWN);
    assert.match(await page.locator('.decision').textContent() ?? '', /Admitted/);

    const put = await gw.request('PUT', '/admin/rate-limits', { body: { user_path: '/team/q', limit_key: { period: 'minute' }, max_requests: 1 }, headers: { authorization: `Bearer ${MASTER}` } });
    assert.equal(put.status, 200, put.text);
    assert.equal(await send('/team/q'), 200);
    await form.getByRole('button', { name: 'Explain' }).click();
    await page.getByText('rate limit exceeded for /team/q: minute request limit of 1 reached').waitFor(SHOWN);
    assert.match(await page.locator('.decision').textContent() ?? '', /Refused \(429\)/);
    assert.equal(await send('/team/q'), 429, 'and the real request is refused');
    await screenshot(page, 'explain');
  });

  it('creates a per-child rule, says so on its row, and turning per child off moves it (counters restart)', async () => {
    await page.getByRole('link', { name: 'Rate limits', exact: true }).click();
    const form = page.getByRole('form', { name: 'Create a rule' });
    await form.getByLabel('User path', { exact: true }).fill('/team/p');
    await form.getByLabel('Period').selectOption('minute');
    await form.getByLabel('Max requests').fill('2');
    await form.getByLabel('Per child').check();
    await form.getByRole('button', { name: 'Create rule' }).click();
    const row = ruleRow(page, 'user_path /team/p minute');
    await row.filter({ hasText: 'per child' }).waitFor(SHOWN);
    for (const status of [200, 200, 429]) assert.equal(await send('/team/p/alice'), status);
    assert.equal(await send('/team/p/bob'), 200, 'bob has a counter of his own');
    const written = (await listRules(gw)).find((r) => r.subject === '/team/p') as { per_child?: boolean; requests_used: number } | undefined;
    assert.deepEqual([written?.per_child, written?.requests_used], [true, 0], "the row shows the path's own counter");
    // Below it, its busiest children with their own counters, alice marked as refusing.
    const children = page.locator('tr[data-children-of="user_path /team/p minute"]');
    await children.getByText('2 active children of /team/p').waitFor(SHOWN);
    const alice = children.locator('li[data-child="/team/p/alice"]');
    assert.equal(await alice.locator('.badge.refusing').textContent(), 'refusing');
    assert.equal(await alice.getByRole('meter', { name: 'Requests used, /team/p/alice' }).getAttribute('aria-valuetext'), '2 of 2 used, 0 left');
    const bob = children.locator('li[data-child="/team/p/bob"]');
    assert.equal(await bob.getByRole('meter', { name: 'Requests used, /team/p/bob' }).getAttribute('aria-valuetext'), '1 of 2 used, 1 left');
    assert.equal(await bob.locator('.badge.refusing').count(), 0, 'bob is not refused');
    // More children than are shown: the five busiest, alice first.
    for (let i = 1; i <= 5; i++) assert.equal(await send(`/team/p/c${i}`), 200);
    await children.getByText('The 5 busiest of 7 active children of /team/p').waitFor(SHOWN);
    assert.deepEqual(await children.locator('li[data-child]').evaluateAll((items) => items.map((li) => li.getAttribute('data-child'))), ['/team/p/alice', '/team/p/bob', '/team/p/c1', '/team/p/c2', '/team/p/c3']);
    await screenshot(page, 'rate-limits-children');

    // The usage page charts the refusals by user path, and counts them per consumer.
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.locator('[data-chart="refused"]').getByRole('img', { name: 'Refused requests over time by user path' }).waitFor(SHOWN);
    assert.match(await page.locator('tr[data-consumer="/team/p/alice"] td').last().textContent() ?? '', /^1$/, 'alice was refused once');
    assert.equal(await page.locator('tr[data-consumer="/team/p/bob"] td').last().textContent(), '0');
    await screenshot(page, 'usage-refused');
    await page.getByRole('link', { name: 'Rate limits', exact: true }).click();
    await row.waitFor(SHOWN);

    await row.getByRole('button', { name: /^Move/ }).click();
    const dialog = page.getByRole('dialog', { name: 'Move rule' });
    await dialog.getByLabel('Per child').uncheck();
    await dialog.locator('#move-warning').filter({ hasText: /Turning per child on or off moves the rule.*restart at zero/ }).waitFor(SHOWN);
    await dialog.getByRole('button', { name: 'Move rule (counters restart)' }).click();
    await row.filter({ hasNotText: 'per child' }).waitFor(SHOWN);
    assert.equal(await send('/team/p/alice'), 200, 'one shared counter now, starting at zero');
    assert.equal(await send('/team/p/bob'), 200);
    assert.equal(await send('/team/p/carol'), 429);
  });

  it('says so and hides the rate-limit pages when rate limits are disabled', async () => {
    const off = await startTestGateway({ env: { MASTER_KEY: MASTER, RATE_LIMITS_ENABLED: 'false' } });
    const other = await session.newPage();
    try {
      await signIn(other, off.url);
      const nav = await other.getByRole('navigation', { name: 'Dashboard' }).getByRole('link').allTextContents();
      assert.deepEqual(nav, ['Budgets', 'API keys', 'Usage']);
      await other.getByRole('heading', { name: 'Budgets', exact: true }).waitFor(SHOWN);
      await other.goto(`${off.url}/dashboard#/rate-limits`);
      await other.getByRole('heading', { name: 'Rate limits are disabled' }).waitFor(SHOWN);
      assert.match(await other.locator('main').textContent() ?? '', /RATE_LIMITS_ENABLED=false/);
      await screenshot(other, 'rate-limits-disabled');
    } finally {
      await other.close();
      await off.close();
    }
  });
});
