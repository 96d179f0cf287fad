import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asciiJson, metaHeaders, postWebhook, sandboxHeaders, waInbound } from '../fakes/webhook-senders.js';
import { sandboxBody } from '../../src/providers/sandbox/webhook.js';
import { openGatewaysOfKindIn } from '../../src/core/gateway-secrets.js';
import { runCli } from '../helpers/cli.js';
import { connect, postJson, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { sqlRow, sqlRows, waitStatus } from '../helpers/rows.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, startReceiver, type Receiver, type TlsFiles } from '../helpers/webhook-receiver.js';
import {
  PASSWORD,
  acceptAndLogin,
  axeViolations,
  freshPage,
  h1,
  launchBrowser,
  login,
  mainText,
  userSession,
  type TestBrowser,
} from './helpers.js';

// The partner console in a real browser against a real msgd: invited by msgctl, a partner's
// admin sets a password, logs in and out, issues a token and sends with it, registers a
// webhook endpoint on a real HTTPS receiver, and sees what happened.

let s: TestServer;
let b: TestBrowser;
let tls: TlsFiles;
let receiver: Receiver;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let sandboxSecret: string;

beforeAll(async () => {
  tls = makeCert();
  receiver = await startReceiver(tls);
  s = await startTestServer({ 'webhooksOut.caFile': tls.cert, 'webhooksOut.allowPrivateTargets': true });
  acme = await setupPartner(s.ctx, { slug: 'acme', balance: '10.00', prices: { sms: '0.0075' } });
  await connect(s.ctx, acme.partnerId, { kind: 'sandbox', name: 'sbx' }, 'sms', '+15550000001');
  sandboxSecret = (await openGatewaysOfKindIn(s.ctx, ['sandbox']))[0].secrets.signing_secret;
  b = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await b?.close();
  await s?.stop();
  await receiver?.close();
  tls?.cleanup();
});

describe('the console in a browser', () => {
  it('an admin invited with msgctl sets a password, logs in and logs out; the link then is spent', async () => {
    const r = await runCli(['user', 'invite', 'acme', 'Ann@Acme.example', '--role', 'admin'], {
      dataDir: s.dataDir,
      env: s.storeEnv,
    });
    expect(r.code).toBe(0);
    const link = /link\s+(\S+)/.exec(r.stdout)![1];
    expect(link).toMatch(/^http:\/\/127\.0\.0\.1:8080\/ui\/invite\/[A-Za-z0-9_-]{43}$/);
    expect(r.stderr).toMatch(/server\.publicUrl is not set/);
    const path = new URL(link).pathname;

    const page = await freshPage(b);
    await acceptAndLogin(page, s.url, s.url + path, 'ann@acme.example');
    expect(page.url()).toBe(`${s.url}/ui/overview`);
    expect(await h1(page)).toBe('Overview');
    expect(await mainText(page)).toContain('10.00 USD');

    await Promise.all([page.waitForNavigation(), page.click('header form button')]);
    expect(page.url()).toBe(`${s.url}/ui/login?done=logout`);
    expect(await mainText(page)).toContain('You are logged out.');
    // Logged out for real: the console sends the browser back to the login page.
    await page.goto(`${s.url}/ui/tokens`);
    expect(page.url()).toBe(`${s.url}/ui/login?next=%2Fui%2Ftokens`);

    await page.goto(s.url + path);
    expect(await h1(page)).toBe('Link expired');

    await page.goto(`${s.url}/ui/tokens`);
    await login(page, s.url, 'ann@acme.example', 'not the password at all');
    expect(await mainText(page)).toContain('The email or password is not right');
    await page.$eval('#email', (e) => ((e as HTMLInputElement).value = ''));
    await login(page, s.url, 'ann@acme.example', PASSWORD);
    // Back where the login page was asked for.
    expect(page.url()).toBe(`${s.url}/ui/tokens`);
    const audit = (await sqlRows(s.ctx, `SELECT action FROM audit_log WHERE action LIKE 'ui.login%' ORDER BY id`)).map(
      (a: any) => a.action,
    );
    expect(audit).toEqual(['ui.login', 'ui.login_failed', 'ui.login']);
    await page.browserContext().close();
  });

  it('a token issued in the console sends a sandbox message whose timeline reaches delivered', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/tokens`);
    await page.type('#t-name', 'integration');
    await page.click('input[value="messages:send"]');
    await page.click('input[value="messages:read"]');
    await Promise.all([page.waitForNavigation(), page.click('form[action="/ui/tokens"] button')]);
    const secret = await page.$eval('#new-secret', (e) => e.textContent!);
    expect(secret).toMatch(/^msgd_live_/);
    expect(await mainText(page)).toContain('will not be shown again');

    // Shown once: the list shows only the prefix afterwards.
    await page.goto(`${s.url}/ui/tokens`);
    expect(await page.content()).not.toContain(secret);
    expect(await mainText(page)).toContain(secret.slice(0, 16));

    const res = await postJson(
      `${s.url}/api/send-sms.php`,
      { to: '+14155550123', text: 'Hello from the console' },
      secret,
    );
    expect(res.status).toBe(200);
    const id = res.body.id as string;
    await waitStatus(s.ctx, id, 'delivered');

    await page.goto(`${s.url}/ui/messages?channel=sms`);
    expect(await mainText(page)).toContain('Hello from the console');
    await Promise.all([page.waitForNavigation(), page.click(`a[href="/ui/messages/${id}"]`)]);
    const timeline = await page.$$eval('main table tbody tr td:nth-child(2)', (tds) => tds.map((t) => t.textContent));
    expect(timeline).toEqual(['queued', 'sent', 'delivered']);
    expect(await mainText(page)).toContain('0.0075 USD');

    // The token's last use shows on the tokens page.
    await page.goto(`${s.url}/ui/tokens`);
    const row = await page.$$eval('main table tbody tr', (trs) => {
      const tr = trs.find(
        (r) => (r.querySelector('input[name=name]') as HTMLInputElement | null)?.value === 'integration',
      );
      return tr && Array.from(tr.querySelectorAll('td'), (td) => (td as HTMLElement).innerText).join('\t');
    });

    expect(row).toMatch(/active/);
    expect(row).not.toMatch(/\t—\t/);
    await page.browserContext().close();
  });

  it('a webhook endpoint registered in the console gets a test event; the delivery and its replay show', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'admin');
    await page.goto(`${s.url}/ui/webhooks`);
    await page.type('#w-url', 'http://example.com/hook');
    await Promise.all([page.waitForNavigation(), page.click('form[action="/ui/webhooks"] button')]);
    expect(await mainText(page)).toContain('webhook endpoints must use https://');

    await page.$eval('#w-url', (e) => ((e as HTMLInputElement).value = ''));
    await page.type('#w-url', receiver.url);
    await Promise.all([page.waitForNavigation(), page.click('form[action="/ui/webhooks"] button')]);
    const secret = await page.$eval('#new-secret', (e) => e.textContent!);
    expect(secret).toMatch(/^whsec_/);
    receiver.setSecrets([secret]);

    await Promise.all([page.waitForNavigation(), page.click('form[action$="/test"] button')]);
    expect(await mainText(page)).toMatch(/Test event evt_\w+ is on its way/);
    await waitFor(() => receiver.delivered.length >= 1, 'the test event at the receiver', 10_000);
    expect(receiver.received.at(-1)!.body.event).toBe('webhook.test');

    expect(page.url()).toMatch(/\/ui\/webhooks\/whe_\w+\?sent=evt_\w+$/);
    const url = page.url().split('?')[0];
    await waitFor(
      async () => {
        await page.goto(url);
        return (await mainText(page)).includes('succeeded');
      },
      'the delivery on the page',
      10_000,
    );
    const row = await page.$eval('main table tbody tr', (tr) => (tr as HTMLElement).innerText);
    expect(row).toMatch(/webhook\.test/);
    expect(row).toMatch(/\t200\t/);
    expect(row).toMatch(/\d+ ms/);

    await Promise.all([page.waitForNavigation(), page.click('form[action$="/replay"] button')]);
    expect(await mainText(page)).toMatch(/is being delivered again/);
    await waitFor(() => receiver.received.length >= 2, 'the replay at the receiver', 10_000);
    await page.browserContext().close();
  });

  it('hostile text from customers and providers renders as text, never as markup or script', async () => {
    const hostile = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"><b>bold</b>`;
    const body = sandboxBody([
      {
        id: 'sbx_in_1',
        type: 'message',
        channel: 'sms',
        from: '+14155550177',
        to: '+15550000001',
        text: hostile,
        timestamp: Math.floor(Date.now() / 1000),
      },
    ]);
    const gw = (await openGatewaysOfKindIn(s.ctx, ['sandbox']))[0].id;
    const res = await postWebhook(`${s.url}/api/webhook.php?gateway=${gw}`, body, sandboxHeaders(sandboxSecret, body));
    expect(res.status).toBe(200);
    const msg = await waitFor(
      async () =>
        (await sqlRow(
          s.ctx,
          `SELECT id, conversation_id FROM messages WHERE direction = 'inbound' AND "from" = ?`,
          '+14155550177',
        )) as any,
      'the inbound message',
      10_000,
    );

    // A WhatsApp customer whose profile name is markup, through Meta's signed webhook.
    await connect(
      s.ctx,
      acme.partnerId,
      {
        kind: 'whatsapp_cloud',
        settings: { phone_number_id: '106540352242922' },
        secrets: { access_token: 'EAA-test', app_secret: 'app-secret', verify_token: 'vt' },
      },
      'whatsapp',
      '+15550783881',
    );
    const wa = asciiJson(
      waInbound(
        '106540352242922',
        { from: '14155550188', id: 'wamid.HOSTILE', text: { body: hostile } },
        { name: hostile },
      ),
    );
    expect((await postWebhook(`${s.url}/api/webhook-messenger.php`, wa, metaHeaders('app-secret', wa))).status).toBe(
      200,
    );
    const waMsg = await waitFor(
      async () =>
        (await sqlRow(s.ctx, `SELECT id, conversation_id FROM messages WHERE "from" = ?`, '+14155550188')) as any,
      'the WhatsApp message',
      10_000,
    );

    const page = await freshPage(b);
    const alerts: string[] = [];
    page.on('dialog', async (d) => {
      alerts.push(d.message());
      await d.dismiss();
    });
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    for (const path of [
      '/ui/messages',
      `/ui/messages/${msg.id}`,
      `/ui/conversations/${msg.conversation_id}`,
      `/ui/messages/${waMsg.id}`,
      `/ui/conversations/${waMsg.conversation_id}`,
      '/ui/conversations',
    ]) {
      await page.goto(s.url + path);
      expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
      expect(await page.$$('main img, main b, main script')).toHaveLength(0);
      // As text: in the message, the thread, and the WhatsApp contact's name in the list and title.
      expect(await mainText(page)).toContain('<script>window.__pwned=1</script>');
    }
    expect(alerts).toEqual([]);
    await page.browserContext().close();
  });

  it("a user of another partner gets 404 for every one of acme's ids", async () => {
    const other = await setupPartner(s.ctx, { slug: 'globex' });
    const ids = (await sqlRow(
      s.ctx,
      'SELECT id, conversation_id FROM messages WHERE partner_id = ? LIMIT 1',
      acme.partnerId,
    )) as any;
    const endpoint = (await sqlRow(
      s.ctx,
      'SELECT id FROM webhook_endpoints WHERE partner_id = ?',
      acme.partnerId,
    )) as any;
    const token = (await sqlRow(s.ctx, 'SELECT id FROM tokens WHERE partner_id = ?', acme.partnerId)) as any;
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, other.partnerId, 'admin');
    for (const path of [
      `/ui/messages/${ids.id}`,
      `/ui/conversations/${ids.conversation_id}`,
      `/ui/webhooks/${endpoint.id}`,
    ]) {
      const r = await page.goto(s.url + path);
      expect(r!.status(), path).toBe(404);
      expect(await h1(page)).toBe('Not found');
    }
    // Posts too: revoking acme's token from globex's console is a 404 and revokes nothing.
    await page.goto(`${s.url}/ui/tokens`);
    const r = await page.evaluate(async (id) => {
      const csrf = (document.querySelector('input[name=_csrf]') as HTMLInputElement).value;
      const res = await fetch(`/ui/tokens/${id}/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `_csrf=${encodeURIComponent(csrf)}`,
      });
      return res.status;
    }, token.id);
    expect(r).toBe(404);
    expect(
      ((await sqlRow(s.ctx, 'SELECT revoked_at FROM tokens WHERE id = ?', token.id)) as any).revoked_at,
    ).toBeNull();
    await page.browserContext().close();
  });

  it('every page has no serious or critical accessibility violations', async () => {
    const page = await freshPage(b);
    const m = (await sqlRow(
      s.ctx,
      `SELECT id, conversation_id FROM messages WHERE partner_id = ? AND direction = 'outbound' LIMIT 1`,
      acme.partnerId,
    )) as any;
    const endpoint = (await sqlRow(
      s.ctx,
      'SELECT id FROM webhook_endpoints WHERE partner_id = ?',
      acme.partnerId,
    )) as any;
    await page.goto(`${s.url}/ui/login`);
    expect(await axeViolations(page)).toEqual([]);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'admin');
    const pages = [
      '/ui/overview',
      '/ui/messages',
      `/ui/messages/${m.id}`,
      '/ui/conversations',
      `/ui/conversations/${m.conversation_id}`,
      '/ui/webhooks',
      `/ui/webhooks/${endpoint.id}`,
      '/ui/tokens',
      '/ui/ledger',
      '/ui/channels',
      '/ui/users',
      '/ui/account',
      '/ui/nothing-here',
    ];
    for (const path of pages) {
      await page.goto(s.url + path);
      expect(await axeViolations(page), path).toEqual([]);
    }
    await page.browserContext().close();
  });
});
