import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { sqlRow } from '../helpers/rows.js';
import { freshPage, h1, launchBrowser, mainText, userSession, type TestBrowser } from './helpers.js';

// The 419 in a real browser: a form posted with a tampered or missing CSRF token, and a form
// posted from a page on another site, change nothing and show "page expired".

let s: TestServer;
let b: TestBrowser;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let evil: Server;
let evilPage = '';

const tokenCount = async () =>
  (
    (await sqlRow(s.ctx, 'SELECT COUNT(*) AS n FROM tokens WHERE partner_id = ?', acme.partnerId)) as {
      n: number;
    }
  ).n;

beforeAll(async () => {
  s = await startTestServer();
  acme = await setupPartner(s.ctx, { slug: 'acme' });
  // Another site: "localhost" is a different site from "127.0.0.1", where msgd is reached.
  evil = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(evilPage));
  await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
  b = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await b?.close();
  await new Promise((r) => evil?.close(r));
  await s?.stop();
});

describe('CSRF in the browser', () => {
  it('a form posted with a tampered token gets the 419 page and issues no token', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/tokens`);
    const before = await tokenCount();
    await page.type('#t-name', 'tampered');
    await page.click('input[value="messages:send"]');
    await page.$eval('form[action="/ui/tokens"] input[name=_csrf]', (e) => {
      const i = e as HTMLInputElement;
      i.value = i.value.slice(0, -2) + (i.value.endsWith('AA') ? 'BB' : 'AA');
    });
    const [res] = await Promise.all([page.waitForNavigation(), page.click('form[action="/ui/tokens"] button')]);
    expect(res!.status()).toBe(419);
    expect(await h1(page)).toBe('Page expired');
    expect(await mainText(page)).toContain(
      'This page has expired, so nothing was changed. Reload the page and try again.',
    );
    expect(await tokenCount()).toBe(before);
    // Still logged in: the reload link leads back into the console.
    await Promise.all([page.waitForNavigation(), page.click('main a')]);
    expect(await h1(page)).toBe('Overview');
    await page.browserContext().close();
  });

  it('a form without its token, logout included, gets 419 and changes nothing', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/tokens`);
    const before = await tokenCount();
    await page.type('#t-name', 'no token');
    await page.click('input[value="messages:send"]');
    await page.$eval('form[action="/ui/tokens"] input[name=_csrf]', (e) => e.remove());
    const [res] = await Promise.all([page.waitForNavigation(), page.click('form[action="/ui/tokens"] button')]);
    expect(res!.status()).toBe(419);
    expect(await tokenCount()).toBe(before);

    await page.goto(`${s.url}/ui/overview`);
    await page.$eval('header form input[name=_csrf]', (e) => e.remove());
    const [out] = await Promise.all([page.waitForNavigation(), page.click('header form button')]);
    expect(out!.status()).toBe(419);
    await page.goto(`${s.url}/ui/overview`);
    expect(await h1(page)).toBe('Overview');
    await page.browserContext().close();
  });

  it('a token from another session is refused the same way', async () => {
    const one = await freshPage(b);
    await userSession(one, s.ctx, s.url, acme.partnerId, 'developer');
    await one.goto(`${s.url}/ui/tokens`);
    const foreign = await one.$eval('input[name=_csrf]', (e) => (e as HTMLInputElement).value);
    const two = await freshPage(b);
    await userSession(two, s.ctx, s.url, acme.partnerId, 'developer');
    await two.goto(`${s.url}/ui/tokens`);
    await two.type('#t-name', 'foreign');
    await two.click('input[value="messages:send"]');
    await two.$eval(
      'form[action="/ui/tokens"] input[name=_csrf]',
      (e, v) => ((e as HTMLInputElement).value = v),
      foreign,
    );
    const before = await tokenCount();
    const [res] = await Promise.all([two.waitForNavigation(), two.click('form[action="/ui/tokens"] button')]);
    expect(res!.status()).toBe(419);
    expect(await tokenCount()).toBe(before);
    await one.browserContext().close();
    await two.browserContext().close();
  });

  it('a form on another site posting to the console is refused, even carrying a valid token', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/tokens`);
    const valid = await page.$eval('input[name=_csrf]', (e) => (e as HTMLInputElement).value);
    evilPage = `<!doctype html><title>win a prize</title>
      <form method="post" action="${s.url}/ui/tokens">
        <input type="hidden" name="_csrf" value="${valid}">
        <input type="hidden" name="name" value="stolen">
        <input type="hidden" name="scopes" value="messages:send">
        <button type="submit">Claim</button>
      </form>`;
    const before = await tokenCount();
    const requests: Record<string, string>[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST') requests.push(r.headers());
    });
    await page.goto(`http://localhost:${(evil.address() as AddressInfo).port}/`);
    const [res] = await Promise.all([page.waitForNavigation(), page.click('button')]);
    expect(res!.status()).toBe(419);
    expect(await mainText(page)).toContain(
      'This request came from another site, so it was refused. Nothing was changed.',
    );
    expect(await tokenCount()).toBe(before);
    // The browser said where the request came from, as real browsers do.
    expect(requests[0].origin).toMatch(/^http:\/\/localhost:\d+$/);
    const refused = s.logs.map((l) => JSON.parse(l)).find((l) => l.why === 'cross-site');
    expect(refused).toMatchObject({ path: '/ui/tokens', site: 'cross-site', origin: requests[0].origin });
    await page.browserContext().close();
  });

  it('a script asking for JSON gets the house error shape with code csrf_token_mismatch', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/tokens`);
    const answer = await page.evaluate(async () => {
      const res = await fetch('/ui/tokens', {
        method: 'POST',
        headers: {
          accept: 'application/json',
          'content-type': 'application/x-www-form-urlencoded',
          'x-csrf-token': 'nope',
        },
        body: 'name=script&scopes=messages:send',
      });
      return { status: res.status, body: await res.json() };
    });
    expect(answer.status).toBe(419);
    expect(answer.body).toEqual({
      error: { code: 'csrf_token_mismatch', message: expect.stringContaining('page has expired'), details: [] },
    });
    // With the right token in the header, the same script request works.
    const ok = await page.evaluate(async () => {
      const csrf = (document.querySelector('input[name=_csrf]') as HTMLInputElement).value;
      const res = await fetch('/ui/tokens', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-csrf-token': csrf },
        body: 'name=script&scopes=messages:send',
      });
      return { status: res.status, redirected: res.redirected, path: new URL(res.url).pathname };
    });
    expect(ok).toEqual({ status: 200, redirected: true, path: '/ui/tokens' });
    await page.browserContext().close();
  });
});
