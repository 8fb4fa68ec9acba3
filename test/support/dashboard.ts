/**
 * The dashboard's browser tests (test/dashboard/*.test.ts): a gateway with the master key in front
 * of a fake upstream `up` serving `gpt-x`, the dashboard built, a page in a real browser, and the
 * screenshots of docs/dashboard.md (written with UPDATE_SCREENSHOTS=1).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { buildDashboard } from '../../web/dashboard/build.ts';
import { launchBrowser } from './browser.ts';
import { openaiProvider } from './e2e.ts';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream.ts';
import { startTestGateway, type TestGateway } from './gateway.ts';
import { MASTER } from './rate-limits.ts';

/** Ceiling for what the page shows after an action or a poll (the live pages refresh every 2 or 5 s). */
export const SHOWN = { timeout: 15_000 };

export const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1';
const SCREENSHOT_DIR = fileURLToPath(new URL('../../docs/screenshots/', import.meta.url));

/** Writes docs/screenshots/<name>.png of the whole page, with UPDATE_SCREENSHOTS=1 only. */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (SCREENSHOTS) await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

export async function signIn(page: Page, url: string): Promise<void> {
  await page.goto(`${url}/dashboard`);
  await page.getByLabel('Master key').fill(MASTER);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Dashboard' }).waitFor(SHOWN);
}

export interface DashboardSession {
  readonly up: FakeUpstream;
  readonly gw: TestGateway;
  /** The page the tests drive. */
  readonly page: Page;
  /** Another page of the same browser (sharing the signed-in tab's storage only if the test signs it in). */
  newPage(): Promise<Page>;
  /** Closes the browser, the gateway and the upstream; fails when any page had a script error. */
  close(): Promise<void>;
}

export interface DashboardOptions {
  /** YAML after the `providers:` block that declares `up`. */
  yaml?: string;
  /** Besides MASTER_KEY. */
  env?: Record<string, string>;
  now?: () => number;
  /** Whether the page starts signed in; default true. */
  signedIn?: boolean;
}

export async function openDashboard(options: DashboardOptions = {}): Promise<DashboardSession> {
  assert.notEqual(await buildDashboard({ ifStale: true }), 'no build tool');
  const up = await startFakeUpstream({ name: 'up', models: ['gpt-x'] });
  const gw = await startTestGateway({
    yaml: 'providers:\n' + openaiProvider('up', up.url, ['gpt-x']) + (options.yaml ?? ''),
    env: { MASTER_KEY: MASTER, ...options.env },
    ...(options.now !== undefined && { now: options.now }),
  });
  const browser = await launchBrowser();
  const pageErrors: string[] = [];
  const newPage = async (): Promise<Page> => {
    const page = await browser.context.newPage();
    page.on('pageerror', (err) => pageErrors.push(err.message));
    return page;
  };
  const page = await newPage();
  if (options.signedIn ?? true) await signIn(page, gw.url);
  return {
    up,
    gw,
    page,
    newPage,
    async close() {
      await browser.close();
      await gw.close();
      await up.close();
      assert.deepEqual(pageErrors, [], 'no script error on any page');
    },
  };
}
