import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addSuppressionIn } from '../../src/core/suppressions.js';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { sqlRow } from '../helpers/rows.js';
import {
  axeViolations,
  freshPage,
  h1,
  launchBrowser,
  loggedIn,
  mainText,
  userSession,
  type TestBrowser,
} from './helpers.js';

// The Suppressions page: in a real browser an admin searches, adds and removes (a keyword
// opt-out only with the consent box ticked); billing reads; CSV export defuses formulas.

let s: TestServer;
let b: TestBrowser;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let globex: Awaited<ReturnType<typeof setupPartner>>;

const add = (
  partnerId: string,
  address: string,
  reason: 'opt_out_keyword' | 'hard_bounce' | 'manual',
  detail?: string,
) =>
  s.ctx.store.transaction(
    async (tx) =>
      (
        await addSuppressionIn(tx, s.ctx, {
          partnerId,
          channel: reason === 'hard_bounce' ? 'email' : 'sms',
          address,
          reason,
          source: 'msg_01kzzzzzzzzzzzzzzzzzzzzzzz',
          detail: detail ?? null,
        })
      ).row,
  );

beforeAll(async () => {
  s = await startTestServer();
  acme = await setupPartner(s.ctx, { slug: 'acme' });
  globex = await setupPartner(s.ctx, { slug: 'globex' });
  await connect(s.ctx, acme.partnerId, { kind: 'sandbox' }, 'sms', '+15550001111');
  await add(acme.partnerId, '+14155550123', 'opt_out_keyword', 'replied "STOP" to +15550001111');
  await add(acme.partnerId, 'bounced@example.com', 'hard_bounce', '=HYPERLINK("http://x");<script>alert(1)</script>');
  await add(globex.partnerId, '+14155550999', 'manual');
  b = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await b?.close();
  await s?.stop();
});

describe('the Suppressions page', () => {
  it('an admin searches, adds, and removes; a keyword opt-out only with the consent box', async () => {
    const page = await freshPage(b);
    page.on('dialog', (d) => void d.accept());
    await userSession(page, s.ctx, s.url, acme.partnerId, 'admin');
    await page.goto(`${s.url}/ui/suppressions`);
    expect(await h1(page)).toBe('Suppressions');
    let text = await mainText(page);
    expect(text).toContain('+14155550123');
    expect(text).toContain('bounced@example.com');
    expect(text).not.toContain('+14155550999'); // globex's
    // The provider's words are shown as text, never run.
    expect(text).toContain('<script>alert(1)</script>');
    expect(await axeViolations(page)).toEqual([]);

    await page.type('#f-q', 'bounced');
    await Promise.all([page.waitForNavigation(), page.click('form.filters button[type=submit]')]);
    text = await mainText(page);
    expect(text).toContain('bounced@example.com');
    expect(text).not.toContain('+14155550123');

    await page.goto(`${s.url}/ui/suppressions`);
    await page.select('form[method=post].filters #f-channel', 'email');
    await page.type('#a-address', ' Ann@Example.COM ');
    await page.type('#a-note', 'asked by phone');
    await Promise.all([page.waitForNavigation(), page.click('form[method=post].filters button[type=submit]')]);
    text = await mainText(page);
    expect(text).toContain('ann@example.com is suppressed on email');
    expect(text).toContain('asked by phone');

    // The STOP needs the box: without it, an error and nothing removed.
    const removeStop = async () => {
      const rows = await page.$$('tbody tr');
      for (const r of rows) {
        if ((await r.evaluate((e) => (e as HTMLElement).innerText)).includes('+14155550123')) return r;
      }
      throw new Error('no row for the STOP');
    };
    let row = await removeStop();
    await Promise.all([page.waitForNavigation(), (await row.$('button'))!.click()]);
    text = await mainText(page);
    expect(text).toContain('opted out themselves');
    expect(text).toContain('+14155550123');
    row = await removeStop();
    await (await row.$('input[name=consent]'))!.click();
    await Promise.all([page.waitForNavigation(), (await row.$('button'))!.click()]);
    text = await mainText(page);
    expect(text).toContain('+14155550123 is no longer suppressed on sms');
    const audit = (await sqlRow(
      s.ctx,
      "SELECT actor, details FROM audit_log WHERE action = 'suppression.remove' ORDER BY id DESC",
    )) as { actor: string; details: string };
    expect(audit.actor).toMatch(/^user:usr_/);
    expect(JSON.parse(audit.details)).toMatchObject({ consent_confirmed: true, address: '+14155550123' });
    await page.close();
  });

  it('billing reads and exports but cannot add or remove; CSV cells cannot start a formula', async () => {
    const billing = await loggedIn(s.ctx, s.url, acme.partnerId, 'billing');
    const page = await billing.client.get('/ui/suppressions');
    expect(page.status).toBe(200);
    expect(page.text).toContain('bounced@example.com');
    expect(page.text).not.toContain('Add a recipient');
    expect(page.text).not.toContain('/remove');
    const denied = await billing.client.post('/ui/suppressions', { channel: 'sms', address: '+14155550777' });
    expect(denied.status).toBe(403);
    const id = (
      (await sqlRow(s.ctx, "SELECT id FROM suppressions WHERE address = 'bounced@example.com'")) as {
        id: string;
      }
    ).id;
    expect((await billing.client.post(`/ui/suppressions/${id}/remove`, {})).status).toBe(403);
    expect(await sqlRow(s.ctx, "SELECT count(*) AS n FROM suppressions WHERE address = '+14155550777'")).toEqual({
      n: 0,
    });

    const csv = await billing.client.get('/ui/suppressions.csv');
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).toMatch(
      /^attachment; filename="suppressions-acme-\d{4}-\d{2}-\d{2}\.csv"$/,
    );
    const lines = csv.text.trim().split('\r\n');
    expect(lines[0]).toBe('"id","channel","address","reason","sender","group_id","source","detail","created_at"');
    const bounced = lines.find((l) => l.includes('bounced@example.com'))!;
    expect(bounced).toContain(`"'=HYPERLINK(""http://x"");<script>alert(1)</script>"`);
    expect(csv.text).not.toContain('+14155550999');
  });

  it('another partner’s entry is not found from this partner’s console', async () => {
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    await admin.client.get('/ui/suppressions');
    const theirs = (
      (await sqlRow(s.ctx, "SELECT id FROM suppressions WHERE address = '+14155550999'")) as {
        id: string;
      }
    ).id;
    expect((await admin.client.post(`/ui/suppressions/${theirs}/remove`, {})).status).toBe(404);
    expect(await sqlRow(s.ctx, 'SELECT count(*) AS n FROM suppressions WHERE id = ?', theirs)).toEqual({
      n: 1,
    });
  });
});
