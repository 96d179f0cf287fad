import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptLink, inviteUser } from '../../src/core/users.js';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { axeViolations, freshPage, h1, launchBrowser, login, userSession, type TestBrowser } from './helpers.js';

// A person of two partners in a real browser: acme's admin invites someone who already works
// for globex, that person accepts after logging in and switches between the two from the header.

let s: TestServer;
let b: TestBrowser;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let globex: Awaited<ReturnType<typeof setupPartner>>;

beforeAll(async () => {
  s = await startTestServer();
  acme = await setupPartner(s.ctx, { slug: 'acme', balance: '3.00' });
  globex = await setupPartner(s.ctx, { slug: 'globex', balance: '7.00' });
  b = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await b?.close();
  await s?.stop();
});

const who = (page: Awaited<ReturnType<typeof freshPage>>) =>
  page.$eval('header .who', (e) => (e as HTMLElement).innerText);

describe('a person in several partners', () => {
  it('is invited by another partner, accepts through the link after logging in, and switches partners from the header', async () => {
    const email = 'pat@agency.example';
    const password = 'quiet harbour lantern moss';
    const { secret } = await inviteUser(s.ctx, { partner: globex.partnerId, email, role: 'billing' }, 'test');
    await acceptLink(s.ctx, secret, password);

    // acme's admin invites pat: the answer is an ordinary invitation with a link.
    const admin = await freshPage(b);
    await userSession(admin, s.ctx, s.url, acme.partnerId, 'admin');
    await admin.goto(`${s.url}/ui/users`);
    await admin.type('#u-email', email);
    await admin.select('#u-role', 'developer');
    await Promise.all([admin.waitForNavigation(), admin.click('form[action="/ui/users"] button')]);
    expect(await admin.$eval('main', (e) => (e as HTMLElement).innerText)).toContain(`Send this link to ${email}`);
    const link = /\/ui\/invite\/[\w-]{43}/.exec(await admin.content())![0];
    expect(await admin.$eval('main table', (e) => (e as HTMLElement).innerText)).toMatch(
      /pat@agency\.example\s+developer\s+invited/,
    );

    // pat logs in: one partner open, so straight into globex, with the invitation waiting.
    const page = await freshPage(b);
    await login(page, s.url, email, password);
    expect(page.url()).toBe(`${s.url}/ui/overview`);
    expect(await who(page)).toContain('(billing, globex)');
    expect(await page.$eval('main', (e) => (e as HTMLElement).innerText)).toContain('7.00 USD');
    await Promise.all([page.waitForNavigation(), page.click('header a[href="/ui/partners"]')]);
    expect(await h1(page)).toBe('Partners');
    expect(await axeViolations(page)).toEqual([]);
    // The invitation waits there, and is accepted through the link acme's admin sent.
    expect(await page.$eval('main table', (e) => (e as HTMLElement).innerText)).toContain(
      'Accept it through the link it came with',
    );
    await page.goto(`${s.url}${link}`);
    expect(await h1(page)).toBe('Join acme');
    await Promise.all([page.waitForNavigation(), page.click('main button[type=submit]')]);
    expect(page.url()).toBe(`${s.url}/ui/overview`);
    expect(await who(page)).toContain('(developer, acme)');
    // A developer's Overview shows traffic, not acme's money.
    expect(await page.$eval('main', (e) => (e as HTMLElement).innerText)).not.toContain('USD');

    // The switcher in the header takes pat to globex and back, with each partner's role.
    await page.select('#switch-partner', globex.partnerId);
    await Promise.all([page.waitForNavigation(), page.click('header form.switcher button')]);
    expect(await who(page)).toContain('(billing, globex)');
    await page.goto(`${s.url}/ui/tokens`);
    expect(await h1(page)).toBe('Not allowed');
    await page.select('#switch-partner', acme.partnerId);
    await Promise.all([page.waitForNavigation(), page.click('header form.switcher button')]);
    await page.goto(`${s.url}/ui/tokens`);
    expect(await h1(page)).toBe('API tokens');
    expect(await axeViolations(page)).toEqual([]);

    // acme's admin now sees pat as an active developer.
    await admin.goto(`${s.url}/ui/users`);
    expect(await admin.$eval('main table', (e) => (e as HTMLElement).innerText)).toMatch(
      /pat@agency\.example\s+developer\s+active/,
    );
    await page.browserContext().close();
    await admin.browserContext().close();
  });
});
