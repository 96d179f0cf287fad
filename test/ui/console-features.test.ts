import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FLASH_TTL_MS } from '../../src/ui/flash.js';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { freshPage, launchBrowser, loggedIn, userSession, type TestBrowser } from './helpers.js';

// What the console's users expect beyond the basics, in a real browser where it needs one:
// secrets shown once across reloads, self-refreshing statuses, dark mode, a phone-wide
// screen, local times; and over HTTP the rest.

let s: TestServer;
let b: TestBrowser;
let acme: ReturnType<typeof setupPartner>;
let channel: { id: string; gateway_id: string; sender: string | null };

const count = (sql: string, ...args: unknown[]) => (s.ctx.db.sqlite.prepare(sql).get(...args) as { n: number }).n;

beforeAll(async () => {
  s = await startTestServer({ 'webhooksOut.allowPrivateTargets': true });
  acme = setupPartner(s.ctx, { slug: 'acme', balance: '10.00', prices: { sms: '0.0075' } });
  channel = connect(s.ctx, acme.partnerId, { kind: 'sandbox', name: 'sbx' }, 'sms', '+15550000001').channel;
  b = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await b?.close();
  await s?.stop();
});

describe('one-time secrets (Post/Redirect/Get)', () => {
  it('reloading after issuing a token issues no second token, and the secret shows exactly once', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    const before = count('SELECT COUNT(*) AS n FROM tokens WHERE partner_id = ?', acme.partnerId);
    await page.goto(`${s.url}/ui/tokens`);
    await page.type('#t-name', 'reload-me');
    await page.click('input[value="messages:send"]');
    await Promise.all([page.waitForNavigation(), page.click('form[action="/ui/tokens"] button')]);
    const secret = await page.$eval('#new-secret', (e) => e.textContent!);
    expect(secret).toMatch(/^msgd_live_/);
    // The secret is not in the address, and the page was answered to a GET.
    expect(page.url()).not.toContain(secret);
    expect(page.url()).toMatch(/\/ui\/tokens\?flash=[\w-]+$/);

    await page.reload();
    expect(count('SELECT COUNT(*) AS n FROM tokens WHERE partner_id = ?', acme.partnerId)).toBe(before + 1);
    expect(await page.content()).not.toContain(secret);
    expect(await page.$('#new-secret')).toBeNull();
    const names = await page.$$eval('form.rename input[name=name]', (els) =>
      els.map((e) => (e as HTMLInputElement).value),
    );
    expect(names.filter((n) => n === 'reload-me')).toHaveLength(1);
    await page.browserContext().close();
  });

  it('reloading after registering or rotating an endpoint registers and rotates once; the secret shows once', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'admin');
    await page.goto(`${s.url}/ui/webhooks`);
    await page.type('#w-url', 'https://127.0.0.1:9/prg');
    await Promise.all([page.waitForNavigation(), page.click('form[action="/ui/webhooks"] button')]);
    const secret = await page.$eval('#new-secret', (e) => e.textContent!);
    expect(secret).toMatch(/^whsec_/);
    expect(page.url()).not.toContain(secret);
    await page.reload();
    expect(count(`SELECT COUNT(*) AS n FROM webhook_endpoints WHERE url = 'https://127.0.0.1:9/prg'`)).toBe(1);
    expect(await page.content()).not.toContain(secret);

    const audits = () => count(`SELECT COUNT(*) AS n FROM audit_log WHERE action = 'webhook.rotate_secret'`);
    const rotations = audits();
    page.on('dialog', (d) => void d.accept());
    await Promise.all([page.waitForNavigation(), page.click('form[action$="/rotate"] button')]);
    const rotated = await page.$eval('#new-secret', (e) => e.textContent!);
    expect(rotated).not.toBe(secret);
    await page.reload();
    expect(audits()).toBe(rotations + 1);
    expect(await page.content()).not.toContain(rotated);
    await page.browserContext().close();
  });

  it('a note is bound to its session and expires unread', async () => {
    const { client: dev } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    await dev.get('/ui/tokens');
    const r = await dev.post('/ui/tokens', { name: 'bound', scopes: 'messages:read' });
    expect(r.status).toBe(303);
    const location = r.headers.get('location')!;
    // Another user of the same partner, with the same link, sees no secret.
    const { client: other } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    expect((await other.get(location)).text).not.toContain('id="new-secret"');
    // The owner still can, once.
    expect((await dev.get(location)).text).toMatch(/id="new-secret">msgd_live_/);
    expect((await dev.get(location)).text).not.toContain('id="new-secret"');
    // A note not read in time is gone.
    const late = await dev.post('/ui/tokens', { name: 'late', scopes: 'messages:read' });
    s.clock.advance(FLASH_TTL_MS + 1);
    expect((await dev.get(late.headers.get('location')!)).text).not.toContain('id="new-secret"');
  });
});

describe('tokens', () => {
  it('a token is renamed in place: same secret, scopes and prefix; a blank name is refused', async () => {
    const { client } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    await client.get('/ui/tokens');
    await client.post('/ui/tokens', { name: 'old name', scopes: 'messages:read' });
    const before = s.ctx.db.sqlite.prepare(`SELECT * FROM tokens WHERE name = 'old name'`).get() as any;
    await client.get('/ui/tokens');
    const r = await client.post(`/ui/tokens/${before.id}/rename`, { name: 'billing export' });
    expect(r.status).toBe(303);
    const shown = await client.get(r.headers.get('location')!);
    expect(shown.text).toContain('Token “old name” is now named “billing export”.');
    expect(shown.text).toContain('value="billing export"');
    const after = s.ctx.db.sqlite.prepare('SELECT * FROM tokens WHERE id = ?').get(before.id) as any;
    expect(after).toEqual({ ...before, name: 'billing export' });
    const blank = await client.post(`/ui/tokens/${before.id}/rename`, { name: '   ' });
    expect(blank.status).toBe(400);
    expect(blank.text).toContain('a token name of 1-100 characters is required');
    // Another partner's token is not found.
    const other = setupPartner(s.ctx, { slug: 'globex' });
    const theirs = s.ctx.db.sqlite.prepare('SELECT id FROM tokens WHERE partner_id = ?').get(other.partnerId) as any;
    expect((await client.post(`/ui/tokens/${theirs.id}/rename`, { name: 'mine' })).status).toBe(404);
  });
});

describe('overview', () => {
  it('shows a ready request for a first message on the first channel, and the header links the API reference', async () => {
    const { client } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    const page = await client.get('/ui/overview');
    expect(page.text).toContain('Send your first message');
    const pre = /<pre class="body" id="first-message">([^<]+)<\/pre>/
      .exec(page.text)![1]
      .replace(/&quot;/g, '"')
      .replace(/&#x27;/g, "'");
    expect(pre).toContain(`curl -s ${s.url}/api/send-sms.php`);
    expect(pre).toContain('-H "Authorization: Bearer $MSGD_TOKEN"');
    expect(pre).toContain(`-d '{"to":"+14155550123","text":"Hello from msgd"}'`);
    expect(page.text).toContain('<a href="/v1/docs">API reference</a>');
    // The link leads somewhere real, without a token.
    const docs = await fetch(`${s.url}/v1/docs`);
    expect(docs.status).toBe(200);
    // The request, as shown, sends (with a real token in place of the placeholder).
    const body = /-d '([^']+)'/.exec(pre)![1];
    const sent = await fetch(`${s.url}/api/send-sms.php`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme.token}`, 'content-type': 'application/json' },
      body,
    });
    expect(sent.status).toBe(200);
    // A billing user sees money, not the request.
    const { client: billing } = await loggedIn(s.ctx, s.url, acme.partnerId, 'billing');
    expect((await billing.get('/ui/overview')).text).not.toContain('Send your first message');
  });
});
