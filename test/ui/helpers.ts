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
  const { secret } = await inviteUser(ctx, { partner: partnerId, email, role }, 'test');
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

// A small cookie-keeping HTTP client for console tests that need no rendering (sessions,
// throttling, headers): it sends what a same-origin browser form sends, the CSRF token taken
// from the last page it read.

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

export class Client {
  cookies = new Map<string, string>();
  csrf = '';

  constructor(readonly base: string) {}

  private cookieHeader() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  private async send(method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
    const res = await fetch(this.base + path, {
      method,
      redirect: 'manual',
      headers: {
        cookie: this.cookieHeader(),
        'sec-fetch-site': 'same-origin',
        origin: this.base,
        ...(init.body !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        ...init.headers,
      },
      body: init.body,
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';');
      const [name, value] = [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)];
      if (attrs.some((a) => a.trim() === 'Max-Age=0')) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const text = await res.text();
    const token = /name="_csrf" value="([^"]+)"/.exec(text);
    if (token) this.csrf = token[1];
    return { status: res.status, headers: res.headers, text };
  }

  get(path: string, headers?: Record<string, string>): Promise<Answer> {
    return this.send('GET', path, { headers });
  }

  post(path: string, fields: Record<string, string>, headers?: Record<string, string>): Promise<Answer> {
    const body = new URLSearchParams({ _csrf: this.csrf, ...fields }).toString();
    return this.send('POST', path, { body, headers });
  }

  async login(email: string, password = PASSWORD): Promise<Answer> {
    await this.get('/ui/login');
    return this.post('/ui/login', { email, password });
  }
}

/** An invited user who has set PASSWORD, and a client logged in as them. */
export async function loggedIn(ctx: CoreCtx, base: string, partnerId: string, role = 'admin') {
  const email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  const { secret } = await inviteUser(ctx, { partner: partnerId, email, role }, 'test');
  const c = new Client(base);
  await c.get(`/ui/invite/${secret}`);
  const set = await c.post(`/ui/invite/${secret}`, { password: PASSWORD, confirm: PASSWORD });
  if (set.status !== 303) throw new Error(`invite not accepted: ${set.status}`);
  const r = await c.login(email);
  if (r.status !== 303) throw new Error(`login failed: ${r.status}`);
  return { client: c, email };
}
