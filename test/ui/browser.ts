import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import chromium from '@sparticuz/chromium';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import type { CoreCtx } from '../../src/core/context.js';
import { inviteUser } from '../../src/core/users.js';

// A real headless Chromium for the console's tests: the binary ships inside
// @sparticuz/chromium, so `npm test` needs nothing else installed. Launched with our own
// arguments, never the package's defaults (they include --disable-web-security, which would
// make every cross-origin test meaningless). One browser per test file, a fresh incognito
// context per test.

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'msgd-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: await chromium.executablePath(),
    headless: true,
    defaultViewport: { width: 1280, height: 800 },
    args: [
      '--no-sandbox',
      '--no-zygote',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--no-default-browser-check',
      `--user-data-dir=${profile}`,
    ],
  });
  return {
    browser,
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A page in a fresh context: no cookies shared with other tests. */
export async function freshPage(b: TestBrowser): Promise<Page> {
  const context = await b.browser.createBrowserContext();
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  return page;
}

export const PASSWORD = 'correct horse battery staple';

/** Open an invite link, set the password, and log in with it. */
export async function acceptAndLogin(page: Page, base: string, link: string, email: string, password = PASSWORD) {
  await page.goto(link);
  await page.type('#password', password);
  await page.type('#confirm', password);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  await login(page, base, email, password);
}

export async function login(page: Page, base: string, email: string, password = PASSWORD) {
  if (!page.url().startsWith(`${base}/ui/login`)) await page.goto(`${base}/ui/login`);
  await page.type('#email', email);
  await page.type('#password', password);
  await Promise.all([page.waitForNavigation(), page.click('main button[type=submit]')]);
}

/** A user invited through core (the msgctl path has its own test), logged in on `page`. */
export async function userSession(
  page: Page,
  ctx: CoreCtx,
  base: string,
  partnerId: string,
  role = 'admin',
  email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.com`,
) {
  const { secret } = inviteUser(ctx, { partner: partnerId, email, role }, 'test');
  await acceptAndLogin(page, base, `${base}/ui/invite/${secret}`, email);
  return email;
}

export const h1 = (page: Page) => page.$eval('h1', (e) => e.textContent);
export const mainText = (page: Page) => page.$eval('main', (e) => (e as HTMLElement).innerText);

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core's serious and critical violations on the page as it is now. */
export async function axeViolations(page: Page): Promise<string[]> {
  // Injected through the DevTools protocol, so the page's CSP (no inline script) still holds for the page itself.
  await page.evaluate(AXE);
  const result = (await page.evaluate(() => (window as any).axe.run(document, { resultTypes: ['violations'] }))) as {
    violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[];
  };
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}
