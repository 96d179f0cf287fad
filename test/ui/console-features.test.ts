import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FLASH_TTL_MS, PER_BROWSER } from '../../src/ui/flash.js';
import { getMessageStateIn } from '../../src/core/messages.js';
import { applyStatusIn } from '../../src/core/message-status.js';
import { newId } from '../../src/lib/ids.js';
import { connect, setupPartner, startTestServer, outboundSms, type TestServer } from '../helpers/server.js';
import { sql } from '../../src/db/sql.js';
import { sqlRow, sqlRun } from '../helpers/rows.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, startReceiver, type Receiver, type TlsFiles } from '../helpers/webhook-receiver.js';
import { axeViolations, freshPage, launchBrowser, loggedIn, userSession, type TestBrowser } from './helpers.js';

// What the console's users expect beyond the basics, in a real browser where it needs one:
// secrets shown once across reloads, self-refreshing statuses, dark mode, a phone-wide
// screen, local times; and over HTTP the rest.

let s: TestServer;
let b: TestBrowser;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let channel: { id: string; gateway_id: string; sender: string | null };
let tls: TlsFiles;
let receiver: Receiver;

const count = async (sql: string, ...args: unknown[]) => ((await sqlRow(s.ctx, sql, ...args)) as { n: number }).n;

beforeAll(async () => {
  tls = makeCert();
  receiver = await startReceiver(tls);
  s = await startTestServer({ 'webhooksOut.allowPrivateTargets': true, 'webhooksOut.caFile': tls.cert });
  acme = await setupPartner(s.ctx, { slug: 'acme', balance: '10.00', prices: { sms: '0.0075' } });
  channel = (await connect(s.ctx, acme.partnerId, { kind: 'sandbox', name: 'sbx' }, 'sms', '+15550000001')).channel;
  b = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await b?.close();
  await s?.stop();
  await receiver?.close();
  tls?.cleanup();
});

describe('one-time secrets (Post/Redirect/Get)', () => {
  it('reloading after issuing a token issues no second token, and the secret shows exactly once', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    const before = await count('SELECT COUNT(*) AS n FROM tokens WHERE partner_id = ?', acme.partnerId);
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
    expect(await count('SELECT COUNT(*) AS n FROM tokens WHERE partner_id = ?', acme.partnerId)).toBe(before + 1);
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
    expect(await count(`SELECT COUNT(*) AS n FROM webhook_endpoints WHERE url = 'https://127.0.0.1:9/prg'`)).toBe(1);
    expect(await page.content()).not.toContain(secret);

    const audits = () => count(`SELECT COUNT(*) AS n FROM audit_log WHERE action = 'webhook.rotate_secret'`);
    const rotations = await audits();
    page.on('dialog', (d) => void d.accept());
    await Promise.all([page.waitForNavigation(), page.click('form[action$="/rotate"] button')]);
    const rotated = await page.$eval('#new-secret', (e) => e.textContent!);
    expect(rotated).not.toBe(secret);
    await page.reload();
    expect(await audits()).toBe(rotations + 1);
    expect(await page.content()).not.toContain(rotated);
    await page.browserContext().close();
  });

  it('a note is bound to its session', async () => {
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
  });

  it('a note not read in time is gone', async () => {
    // On a msgd of its own: moving the clock past the note's life would leave this msgd's clock
    // ahead of PostgreSQL's, whose clock says when a job is due, so the webhook tests' jobs
    // would wait that long.
    const own = await startTestServer();
    try {
      const p = await setupPartner(own.ctx, { slug: 'late' });
      const { client: dev } = await loggedIn(own.ctx, own.url, p.partnerId, 'developer');
      await dev.get('/ui/tokens');
      const late = await dev.post('/ui/tokens', { name: 'late', scopes: 'messages:read' });
      expect(late.status).toBe(303);
      own.clock.advance(FLASH_TTL_MS + 1);
      expect((await dev.get(late.headers.get('location')!)).text).not.toContain('id="new-secret"');
    } finally {
      await own.stop();
    }
  });

  it("several tabs' notes each show on their own page; a browser holds a few at most; a forged one shows nothing", async () => {
    const { client: dev } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    await dev.get('/ui/tokens');
    const locations: string[] = [];
    for (const name of ['tab-1', 'tab-2', 'tab-3', 'tab-4', 'tab-5']) {
      const r = await dev.post('/ui/tokens', { name, scopes: 'messages:read' });
      expect(r.status).toBe(303);
      locations.push(r.headers.get('location')!);
    }
    // Four notes at most: the oldest made room for the fifth.
    expect([...dev.cookies.keys()].filter((n) => n.startsWith('msgd_flash_'))).toHaveLength(PER_BROWSER);
    expect((await dev.get(locations[0])).text).not.toContain('id="new-secret"');
    for (const location of locations.slice(1).reverse())
      expect((await dev.get(location)).text).toMatch(/id="new-secret">msgd_live_/);
    expect([...dev.cookies.keys()].filter((n) => n.startsWith('msgd_flash_'))).toHaveLength(0);

    // A note's cookie altered by a byte, or made up, opens nothing and breaks nothing.
    const r = await dev.post('/ui/tokens', { name: 'forged', scopes: 'messages:read' });
    const location = r.headers.get('location')!;
    const name = `msgd_flash_${location.split('flash=')[1]}`;
    const value = dev.cookies.get(name)!;
    dev.cookies.set(name, (value[0] === 'A' ? 'B' : 'A') + value.slice(1));
    const forged = await dev.get(location);
    expect(forged.status).toBe(200);
    expect(forged.text).not.toContain('id="new-secret"');
    expect(dev.cookies.has(name)).toBe(false);
  });
});

describe('tokens', () => {
  it('a token is renamed in place: same secret, scopes and prefix; a blank name is refused', async () => {
    const { client } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    await client.get('/ui/tokens');
    await client.post('/ui/tokens', { name: 'old name', scopes: 'messages:read' });
    const before = (await sqlRow(s.ctx, `SELECT * FROM tokens WHERE name = 'old name'`)) as any;
    await client.get('/ui/tokens');
    const r = await client.post(`/ui/tokens/${before.id}/rename`, { name: 'billing export' });
    expect(r.status).toBe(303);
    const shown = await client.get(r.headers.get('location')!);
    expect(shown.text).toContain('Token “old name” is now named “billing export”.');
    expect(shown.text).toContain('value="billing export"');
    const after = (await sqlRow(s.ctx, 'SELECT * FROM tokens WHERE id = ?', before.id)) as any;
    expect(after).toEqual({ ...before, name: 'billing export' });
    const blank = await client.post(`/ui/tokens/${before.id}/rename`, { name: '   ' });
    expect(blank.status).toBe(400);
    expect(blank.text).toContain('a token name of 1-100 characters is required');
    // Another partner's token is not found.
    const other = await setupPartner(s.ctx, { slug: 'globex' });
    const theirs = (await sqlRow(s.ctx, 'SELECT id FROM tokens WHERE partner_id = ?', other.partnerId)) as any;
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

describe('looks', () => {
  it("a message's status refreshes by itself while it is on its way, and stops when final; without script it still shows", async () => {
    const m = await outboundSms(s.ctx, acme.partnerId, channel, { text: 'live status' });
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/messages/${m.id}`);
    const status = () => page.$eval('#message-live dd[aria-live] .status', (e) => e.textContent);
    expect(await status()).toBe('queued');
    expect(await page.$eval('#message-live', (e) => e.getAttribute('data-refresh'))).toBe('5000');
    const move = (to: 'sent' | 'delivered') =>
      s.ctx.store.transaction(async (tx) =>
        applyStatusIn(tx, s.ctx, (await getMessageStateIn(tx, m.id))!, { status: to }),
      );
    await move('sent');
    await page.waitForFunction(
      () => document.querySelector('#message-live dd[aria-live] .status')?.textContent === 'sent',
      { timeout: 12_000 },
    );
    await move('delivered');
    await page.waitForFunction(
      () => document.querySelector('#message-live dd[aria-live] .status')?.textContent === 'delivered',
      { timeout: 12_000 },
    );
    // Final: the part no longer asks to be refreshed, and the timeline has every step.
    expect(await page.$eval('#message-live', (e) => e.hasAttribute('data-refresh'))).toBe(false);
    const timeline = await page.$$eval('#message-live table tbody tr td:nth-child(2)', (tds) =>
      tds.map((t) => t.textContent),
    );
    expect(timeline).toEqual(['queued', 'sent', 'delivered']);

    // Without script the same page shows the current status (a reload is the refresh).
    const noJs = await freshPage(b);
    await noJs.setJavaScriptEnabled(false);
    await userSession(noJs, s.ctx, s.url, acme.partnerId, 'developer');
    await noJs.goto(`${s.url}/ui/messages/${m.id}`);
    expect(await noJs.$eval('#message-live dd[aria-live] .status', (e) => e.textContent)).toBe('delivered');
    await page.browserContext().close();
    await noJs.browserContext().close();
  });

  it('dark mode follows the system setting, and stays free of serious accessibility violations', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'admin');
    const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
    await page.goto(`${s.url}/ui/tokens`);
    expect(await bg()).toBe('rgb(255, 255, 255)');
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
    for (const path of ['/ui/overview', '/ui/messages', '/ui/tokens', '/ui/webhooks', '/ui/ledger']) {
      await page.goto(s.url + path);
      expect(await bg(), path).toBe('rgb(13, 17, 23)');
      expect(await page.evaluate(() => getComputedStyle(document.body).color)).toBe('rgb(230, 237, 243)');
      expect(await axeViolations(page), path).toEqual([]);
    }
    await page.browserContext().close();
  });

  it('on a 390 px wide phone the page never scrolls sideways; a wide table scrolls inside its box', async () => {
    for (let i = 0; i < 3; i++)
      await outboundSms(s.ctx, acme.partnerId, channel, { to: '+14155550177', text: 'a rather long text '.repeat(8) });
    const page = await freshPage(b);
    await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true, deviceScaleFactor: 1 });
    await userSession(page, s.ctx, s.url, acme.partnerId, 'admin');
    for (const path of ['/ui/overview', '/ui/messages', '/ui/tokens', '/ui/webhooks', '/ui/ledger', '/ui/channels']) {
      await page.goto(s.url + path);
      const widths = await page.evaluate(() => ({
        page: document.documentElement.scrollWidth,
        view: document.documentElement.clientWidth,
        tables: [...document.querySelectorAll('main table')].map((t) => ({
          box: (t as HTMLElement).clientWidth,
          content: (t as HTMLElement).scrollWidth,
          overflow: getComputedStyle(t).overflowX,
        })),
      }));
      expect(widths.page, path).toBeLessThanOrEqual(widths.view);
      for (const t of widths.tables) {
        expect(t.box, path).toBeLessThanOrEqual(widths.view);
        if (t.content > t.box) expect(t.overflow, path).toBe('auto');
      }
    }
    // The messages table is wider than the phone: it scrolls within itself.
    await page.goto(`${s.url}/ui/messages`);
    const scrolled = await page.$eval('main table', (t) => {
      t.scrollLeft = 100;
      return t.scrollLeft;
    });
    expect(scrolled).toBeGreaterThan(0);
    await page.browserContext().close();
  });

  it("times show in UTC, and beside it in the browser's zone", async () => {
    const m = await outboundSms(s.ctx, acme.partnerId, channel, { text: 'when' });
    const page = await freshPage(b);
    await page.emulateTimezone('Asia/Kolkata');
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/messages/${m.id}`);
    const t = await page.$eval('dl.kv time', (e) => ({
      datetime: e.getAttribute('datetime'),
      text: e.textContent,
      local: e.querySelector('.local')?.textContent,
    }));
    const at = new Date(m.created_at);
    expect(t.datetime).toBe(at.toISOString());
    expect(t.text).toContain(at.toISOString().slice(0, 19).replace('T', ' ') + ' UTC');
    // India is UTC+5:30 all year.
    const local = new Date(m.created_at + 5.5 * 3_600_000).toISOString();
    // The browser's own format: 24-hour, or 12-hour with AM/PM (en-US) after noon too.
    const hour = Number(local.slice(11, 13));
    const h12 = `${String(((hour + 11) % 12) + 1).padStart(2, '0')}:${local.slice(14, 16)}`;
    const shown = t.local ?? '';
    expect(
      shown.includes(local.slice(11, 16)) || (shown.includes(h12) && shown.includes(hour < 12 ? 'AM' : 'PM')),
      shown,
    ).toBe(true);
    expect(t.local).toMatch(/GMT\+5:30|IST/);
    // Without script: UTC only, in the same element.
    const noJs = await freshPage(b);
    await noJs.setJavaScriptEnabled(false);
    await userSession(noJs, s.ctx, s.url, acme.partnerId, 'developer');
    await noJs.goto(`${s.url}/ui/messages/${m.id}`);
    expect(await noJs.$eval('dl.kv time', (e) => e.textContent)).toBe(
      at.toISOString().slice(0, 19).replace('T', ' ') + ' UTC',
    );
    await page.browserContext().close();
    await noJs.browserContext().close();
  });

  it("a billing user's ledger links messages only for roles that may open them", async () => {
    const sent = await fetch(`${s.url}/api/send-sms.php`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ to: '+14155550123', text: 'priced' }),
    });
    const id = ((await sent.json()) as { id: string }).id;
    const { client: billing } = await loggedIn(s.ctx, s.url, acme.partnerId, 'billing');
    const page = (await billing.get('/ui/ledger')).text;
    expect(page).toContain(`<code>${id}</code>`);
    expect(page).not.toContain('href="/ui/messages/');
    expect((await billing.get(`/ui/messages/${id}`)).status).toBe(403);
    const { client: admin } = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    expect((await admin.get('/ui/ledger')).text).toContain(`<a href="/ui/messages/${id}">${id}</a>`);
  });
});

describe('messages', () => {
  const rowsOf = (html: string) => [...html.matchAll(/<tr><td><a href="\/ui\/messages\/(msg_\w+)"/g)].map((m) => m[1]);

  it("finds a message by its id or by the provider's id, and never another partner's", async () => {
    const { client } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    const a = await outboundSms(s.ctx, acme.partnerId, channel, { text: 'by id' });
    const b2 = await outboundSms(s.ctx, acme.partnerId, channel, { text: 'by provider id' });
    const c = await outboundSms(s.ctx, acme.partnerId, channel, { text: 'by unindexed provider id' });
    const setProvider = (providerId: string, indexed: number, id: string) =>
      sqlRun(
        s.ctx,
        'UPDATE messages SET provider_message_id = ?, provider_id_indexed = ? WHERE id = ?',
        providerId,
        indexed,
        id,
      );
    await setProvider('wamid.HBgLMTQxNTU1NTAxMjM', 1, b2.id);
    await setProvider('SM0123456789abcdef0123456789abcdef', 0, c.id);
    expect(rowsOf((await client.get(`/ui/messages?id=${a.id}`)).text)).toEqual([a.id]);
    expect(rowsOf((await client.get(`/ui/messages?id=%20${a.id}%20`)).text)).toEqual([a.id]);
    expect(rowsOf((await client.get('/ui/messages?id=wamid.HBgLMTQxNTU1NTAxMjM')).text)).toEqual([b2.id]);
    // Reports for this provider carry msgd's id, so its ids are not indexed: found row by row.
    expect(rowsOf((await client.get('/ui/messages?id=SM0123456789abcdef0123456789abcdef')).text)).toEqual([c.id]);
    const missing = await client.get('/ui/messages?id=msg_00000000000000000000000000');
    expect(missing.text).toContain('No message of yours has the id msg_00000000000000000000000000.');
    const globex = await setupPartner(s.ctx, { slug: 'globex-m', balance: '1.00' });
    const gch = (await connect(s.ctx, globex.partnerId, { kind: 'sandbox' }, 'sms', '+15550000009')).channel;
    const theirs = await outboundSms(s.ctx, globex.partnerId, gch, { text: 'not yours' });
    await setProvider('wamid.THEIRS', 1, theirs.id);
    expect(rowsOf((await client.get(`/ui/messages?id=${theirs.id}`)).text)).toEqual([]);
    expect(rowsOf((await client.get('/ui/messages?id=wamid.THEIRS')).text)).toEqual([]);
  });

  it('cancels a scheduled message in the browser with its refund; a stale page that cancels again changes nothing', async () => {
    const later = new Date(Date.now() + 3_600_000);
    const sent = await fetch(`${s.url}/v1/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ channel: 'sms', to: '+14155550123', body: 'at the hour', send_at: later.toISOString() }),
    });
    const { id } = (await sent.json()) as { id: string };
    const balance = () => count('SELECT balance AS n FROM partners WHERE id = ?', acme.partnerId);
    const debited = await balance();
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/messages/${id}`);
    const stale = await page.browserContext().newPage();
    await stale.goto(`${s.url}/ui/messages/${id}`);
    expect(await page.$eval('#message-live dd[aria-live] .status', (e) => e.textContent)).toBe('scheduled');
    expect(await page.$eval('main', (e) => (e as HTMLElement).innerText)).toContain('Scheduled for');

    await Promise.all([page.waitForNavigation(), page.click('form[action$="/cancel"] button[type=submit]')]);
    const main = await page.$eval('main', (e) => (e as HTMLElement).innerText);
    expect(main).toContain('Canceled; 0.0075 USD refunded.');
    expect(await page.$eval('#message-live dd[aria-live] .status', (e) => e.textContent)).toBe('canceled');
    expect(await page.$('form[action$="/cancel"]')).toBeNull();
    expect((await balance()) - debited).toBe(7_500);

    // The page opened before the cancel still shows the button: a second cancel is refused.
    await Promise.all([stale.waitForNavigation(), stale.click('form[action$="/cancel"] button[type=submit]')]);
    expect(await stale.$eval('main', (e) => (e as HTMLElement).innerText)).toContain(
      'Not canceled: only a scheduled message can be canceled; this one is canceled.',
    );
    expect((await balance()) - debited).toBe(7_500);
    await page.browserContext().close();
  });

  it('pages forward and back: first, previous and next keep the filters', async () => {
    const p = await setupPartner(s.ctx, { slug: 'pager', balance: '10.00' });
    const ch = (await connect(s.ctx, p.partnerId, { kind: 'sandbox' }, 'sms', '+15550000010')).channel;
    const made: string[] = [];
    for (let i = 0; i < 130; i++)
      made.push((await outboundSms(s.ctx, p.partnerId, ch, { to: '+14155550150', text: `p${i}` })).id);
    const newest = made.slice().reverse();
    const { client } = await loggedIn(s.ctx, s.url, p.partnerId, 'developer');
    const link = (html: string, rel: string) => {
      const m =
        rel === 'first'
          ? /<a href="([^"]+)">« First page<\/a>/.exec(html)
          : new RegExp(`<a href="([^"]+)" rel="${rel}">`).exec(html);
      return m ? m[1].replace(/&amp;/g, '&') : null;
    };
    const p1 = await client.get('/ui/messages?channel=sms');
    expect(rowsOf(p1.text)).toEqual(newest.slice(0, 50));
    expect(link(p1.text, 'prev')).toBeNull();
    expect(link(p1.text, 'first')).toBeNull();
    const p2 = await client.get(link(p1.text, 'next')!);
    expect(rowsOf(p2.text)).toEqual(newest.slice(50, 100));
    const p3 = await client.get(link(p2.text, 'next')!);
    expect(rowsOf(p3.text)).toEqual(newest.slice(100));
    expect(link(p3.text, 'next')).toBeNull();
    expect(link(p3.text, 'prev')).toContain('channel=sms');
    const back2 = await client.get(link(p3.text, 'prev')!);
    expect(rowsOf(back2.text)).toEqual(newest.slice(50, 100));
    const back1 = await client.get(link(back2.text, 'prev')!);
    expect(rowsOf(back1.text)).toEqual(newest.slice(0, 50));
    expect(link(back1.text, 'prev')).toBeNull();
    const first = await client.get(link(p3.text, 'first')!);
    expect(rowsOf(first.text)).toEqual(newest.slice(0, 50));
    expect(
      (
        await client.get(
          '/ui/messages?back=garbage&cursor=' + new URL(s.url + link(p1.text, 'next')!).searchParams.get('cursor'),
        )
      ).status,
    ).toBe(400);
  });
});

describe('webhooks', () => {
  const decode = (html: string) =>
    html
      .replace(/&quot;/g, '"')
      .replace(/&#x27;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&');

  it("edits an endpoint's URL, events and description and keeps its secret; a bad URL changes nothing", async () => {
    const { client } = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    await client.get('/ui/webhooks');
    const reg = await client.post('/ui/webhooks', { url: `${receiver.url}?v=1` });
    const id = /\/ui\/webhooks\/(whe_\w+)/.exec(reg.headers.get('location')!)![1];
    await client.get(reg.headers.get('location')!);
    const row = async () => (await sqlRow(s.ctx, 'SELECT * FROM webhook_endpoints WHERE id = ?', id)) as any;
    const before = await row();
    const r = await client.post(`/ui/webhooks/${id}/edit`, {
      url: `${receiver.url}?v=2`,
      description: 'orders',
      events: 'message.delivered',
    });
    expect(r.status).toBe(303);
    expect((await client.get(r.headers.get('location')!)).text).toContain(
      'Endpoint saved; its signing secret is unchanged.',
    );
    const after = await row();
    expect(after.url).toBe(`${receiver.url}?v=2`);
    expect(after.description).toBe('orders');
    expect(JSON.parse(after.events)).toEqual(['message.delivered']);
    expect(after.secret).toBe(before.secret);
    expect(after.previous_secret).toBe(before.previous_secret);
    const bad = await client.post(`/ui/webhooks/${id}/edit`, { url: 'http://example.com/hook' });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('webhook endpoints must use https://');
    const unknown = await client.post(`/ui/webhooks/${id}/edit`, { url: receiver.url, events: 'money.printed' });
    expect(unknown.status).toBe(400);
    expect(await row()).toEqual(after);
  });

  it("a delivery shows its request with signatures redacted and the receiver's answers; filters by outcome", async () => {
    const { client } = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    await client.get('/ui/webhooks');
    const reg = await client.post('/ui/webhooks', { url: `${receiver.url}?detail=1` });
    const id = /\/ui\/webhooks\/(whe_\w+)/.exec(reg.headers.get('location')!)![1];
    const secret = /id="new-secret">(whsec_[^<]+)</.exec((await client.get(reg.headers.get('location')!)).text)![1];
    receiver.setSecrets([secret]);
    receiver.behave({ kind: 'ok' });
    await client.post(`/ui/webhooks/${id}/test`, {});
    await waitFor(() => receiver.delivered.length >= 1, 'the first test event', 10_000);
    receiver.behave({ kind: 'status', status: 503, body: '<b>busy</b>, try later' });
    const n = receiver.received.length;
    await client.get(`/ui/webhooks/${id}`);
    await client.post(`/ui/webhooks/${id}/test`, {});
    await waitFor(() => receiver.received.length > n, 'the second test event', 10_000);
    const attempts = async () =>
      (await sqlRow(
        s.ctx,
        'SELECT COUNT(*) AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ?',
        id,
      )) as { n: number };
    await waitFor(async () => (await attempts()).n >= 2, 'both attempts recorded', 10_000);
    const sent = receiver.received.at(-1)!;
    const dlv = (await sqlRow(
      s.ctx,
      "SELECT id, event_id FROM webhook_deliveries WHERE endpoint_id = ? AND attempts > 0 AND status = 'pending'",
      id,
    )) as { id: string; event_id: string };
    const page = await client.get(`/ui/webhooks/${id}/deliveries/${dlv.id}`);
    expect(page.status).toBe(200);
    const text = decode(page.text);
    expect(text).toContain(`POST ${receiver.url}?detail=1`);
    expect(text).toContain('content-type: application/json');
    expect(text).toContain(`webhook-id: ${dlv.event_id}`);
    expect(text).toContain('x-msgd-signature: [redacted]');
    expect(text).toContain('webhook-signature: [redacted]');
    expect(text).toContain(sent.raw.toString('utf8'));
    expect(text).not.toContain(sent.headers['x-msgd-signature'].slice(7));
    expect(text).not.toContain(sent.headers['webhook-signature'].slice(3));
    expect(text).not.toContain(secret);
    expect(page.text).toContain('&lt;b&gt;busy&lt;/b&gt;, try later');
    expect(page.text).toMatch(/<td class="num">503<\/td>/);
    // By outcome: the answered one, the one still being retried.
    const ids = (html: string) => [...html.matchAll(/\/deliveries\/(dlv_\w+)"/g)].map((m) => m[1]);
    const retrying = await client.get(`/ui/webhooks/${id}?outcome=retrying`);
    expect(ids(retrying.text)).toEqual([dlv.id]);
    const succeeded = ids((await client.get(`/ui/webhooks/${id}?outcome=succeeded`)).text);
    expect(succeeded).toHaveLength(1);
    expect(succeeded).not.toContain(dlv.id);
    expect(ids((await client.get(`/ui/webhooks/${id}?outcome=cancelled`)).text)).toEqual([]);
    // Another partner's delivery is not found under this endpoint.
    expect((await client.get(`/ui/webhooks/${id}/deliveries/dlv_00000000000000000000000000`)).status).toBe(404);
    receiver.behave({ kind: 'ok' });
  });

  it('pages past 50 deliveries, and a rare outcome says how far back it searched', async () => {
    const { client } = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    await client.get('/ui/webhooks');
    const reg = await client.post('/ui/webhooks', { url: `${receiver.url}?many=1` });
    const id = /\/ui\/webhooks\/(whe_\w+)/.exec(reg.headers.get('location')!)![1];
    const made: string[] = [];
    await s.ctx.store.transaction(async (tx) => {
      for (let i = 0; i < 2_100; i++) {
        const d = newId('dlv');
        const status = i === 0 ? 'dead' : 'succeeded';
        await tx.run(
          sql`INSERT INTO webhook_deliveries (id, event_id, endpoint_id, partner_id, status, attempts, created_at, updated_at)
              VALUES (${d}, ${newId('evt')}, ${id}, ${acme.partnerId}, ${status}, 1, ${Date.now()}, ${Date.now()})`,
        );
        made.push(d);
      }
    });
    const newest = made.slice().reverse();
    const ids = (html: string) => [...html.matchAll(/\/deliveries\/(dlv_\w+)"/g)].map((m) => m[1]);
    const older = (html: string) => /<a href="([^"]+)">Older deliveries →<\/a>/.exec(html)?.[1].replace(/&amp;/g, '&');
    const p1 = await client.get(`/ui/webhooks/${id}`);
    expect(ids(p1.text)).toEqual(newest.slice(0, 50));
    const p2 = await client.get(older(p1.text)!);
    expect(ids(p2.text)).toEqual(newest.slice(50, 100));
    expect(p2.text).toContain('« Newest deliveries');
    // The one dead delivery is the oldest: the first page looked at 2,000 and says so.
    const f1 = await client.get(`/ui/webhooks/${id}?outcome=failed`);
    expect(ids(f1.text)).toEqual([]);
    expect(f1.text).toMatch(/Searched deliveries back to <time[^>]*>[^<]+<\/time>; nothing matches yet\./);
    const further = /<a href="([^"]+)">Look further back →<\/a>/.exec(f1.text)![1].replace(/&amp;/g, '&');
    expect(further).toContain('outcome=failed');
    const f2 = await client.get(further);
    expect(ids(f2.text)).toEqual([made[0]]);
  });
});
