import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, deleteEndpoint } from '../../src/core/endpoints.js';
import { getMessageStateIn } from '../../src/core/messages.js';
import { applyStatusIn } from '../../src/core/message-status.js';
import { connect, setupPartner, startTestServer, outboundSms, type TestServer } from '../helpers/server.js';
import { sqlRow, sqlRun } from '../helpers/rows.js';
import { Client, PASSWORD, loggedIn } from './helpers.js';

// The pages' content over real HTTP: filters and paging, a failed message's provider error,
// the ledger and its CSV, the URL guard on endpoints, admins inviting, and no secret in logs.

let s: TestServer;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let admin: Client;
let channel: { id: string; gateway_id: string; sender: string | null };

beforeAll(async () => {
  s = await startTestServer({ 'log.level': 'debug' });
  acme = await setupPartner(s.ctx, { slug: 'acme', balance: '10.00' });
  channel = (await connect(s.ctx, acme.partnerId, { kind: 'sandbox' }, 'sms', '+15550000001')).channel;
  admin = (await loggedIn(s.ctx, s.url, acme.partnerId, 'admin')).client;
});
afterAll(async () => {
  await s?.stop();
});

const rowsOf = (html: string) => [...html.matchAll(/<tr><td><a href="\/ui\/messages\/(msg_\w+)"/g)].map((m) => m[1]);

describe('console pages', () => {
  it('every moment a page prints is a <time> element, which the script shows in the browser zone too', async () => {
    await outboundSms(s.ctx, acme.partnerId, channel, { to: '+14155550777', text: 'a moment' });
    await admin.get('/ui/users');
    const invited = await admin.post('/ui/users', { email: 'later@acme.example', role: 'developer' });
    const moment = /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/;
    expect(invited.text).toContain('later@acme.example');
    expect(invited.text.replace(/<time [^>]*>.*?<\/time>/g, '')).not.toMatch(moment);
    for (const path of [
      '/ui',
      '/ui/messages',
      '/ui/ledger',
      '/ui/tokens',
      '/ui/webhooks',
      '/ui/users',
      '/ui/account',
    ]) {
      const html = (await admin.get(path)).text;
      const outside = html.replace(/<time [^>]*>.*?<\/time>/g, '');
      expect(outside, path).not.toMatch(moment);
    }
  });

  it('Messages filters by status and recipient, pages by cursor, and refuses a bad date with 400', async () => {
    const made = [];
    for (let i = 0; i < 55; i++)
      made.push((await outboundSms(s.ctx, acme.partnerId, channel, { to: '+14155550123', text: `n${i}` })).id);
    const other = await outboundSms(s.ctx, acme.partnerId, channel, { to: '+14155550999', text: 'elsewhere' });
    const first = await admin.get('/ui/messages?recipient=%2B14155550123');
    expect(first.status).toBe(200);
    const page1 = rowsOf(first.text);
    expect(page1).toEqual(made.slice(-50).reverse());
    const next = /href="(\/ui\/messages\?recipient=[^"]+cursor=[^"]+)"/.exec(first.text)![1].replace(/&amp;/g, '&');
    const page2 = rowsOf((await admin.get(next)).text);
    expect(page2).toEqual(made.slice(0, 5).reverse());
    expect(rowsOf((await admin.get('/ui/messages?recipient=%2B14155550999')).text)).toEqual([other.id]);
    expect(rowsOf((await admin.get('/ui/messages?status=delivered')).text)).toEqual([]);
    const today = new Date().toISOString().slice(0, 10);
    expect(rowsOf((await admin.get(`/ui/messages?from=${today}&to=${today}`)).text)).toHaveLength(50);
    expect(rowsOf((await admin.get('/ui/messages?to=2020-01-01')).text)).toEqual([]);
    const bad = await admin.get('/ui/messages?from=yesterday');
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('from must be a date like 2026-11-22');
    expect((await admin.get('/ui/messages?cursor=garbage')).status).toBe(400);
  });

  it("a failed message's page shows the provider's error and the refund", async () => {
    const m = await outboundSms(s.ctx, acme.partnerId, channel, { text: 'will fail', price: 7500 });
    await s.ctx.store.transaction(async (tx) => {
      await applyStatusIn(tx, s.ctx, (await getMessageStateIn(tx, m.id))!, {
        status: 'failed',
        providerStatus: 'undeliverable',
        errorCode: '30007',
        errorMessage: 'Carrier <filtered> the message',
        refundOnFailure: true,
      });
    });
    const page = await admin.get(`/ui/messages/${m.id}`);
    expect(page.text).toContain('Provider error 30007: Carrier &lt;filtered&gt; the message');
    expect(page.text).toContain('0.0075 USD (refunded)');
    expect(page.text).toMatch(/<td><span class="status failed">failed<\/span><\/td><td>undeliverable<\/td>/);
  });

  it('the ledger shows the running balance, and its CSV defuses formulas', async () => {
    await sqlRun(
      s.ctx,
      `UPDATE ledger_entries SET note = '=HYPERLINK("http://x")' WHERE partner_id = ? AND kind = 'topup'`,
      acme.partnerId,
    );
    const balance = ((await sqlRow(s.ctx, 'SELECT balance FROM partners WHERE id = ?', acme.partnerId)) as any).balance;
    const page = await admin.get('/ui/ledger');
    const first =
      /<tbody><tr><td><time[^>]*>[^<]+<\/time><\/td><td>(\w+)<\/td><td class="num">([-\d.]+)<\/td><td class="num">([-\d.]+)<\/td>/.exec(
        page.text,
      )!;
    expect(Number(first[3])).toBe(balance / 1e6);
    expect((await admin.get('/ui/ledger?before=abc')).status).toBe(400);
    const csv = await admin.get('/ui/ledger.csv');
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).toMatch(
      /^attachment; filename="ledger-acme-\d{4}-\d{2}-\d{2}\.csv"$/,
    );
    const lines = csv.text.trim().split('\r\n');
    expect(lines[0]).toBe('"id","created_at","kind","amount","balance_after","currency","message_id","note"');
    expect(lines.at(-1)).toMatch(
      /^"\d+","[\d\-T:.]+Z","topup","10\.00","10\.00","USD","","'=HYPERLINK\(""http:\/\/x""\)"$/,
    );
    // Oldest last: in id order every balance_after is the one before plus the amount.
    const rows = parseCsv(csv.text, ',').slice(1).reverse();
    let running = 0;
    for (const r of rows) {
      running = Math.round((running + Number(r[3])) * 1e6) / 1e6;
      expect(Number(r[4])).toBe(running);
    }
    expect(lines.length - 1).toBe(
      ((await sqlRow(s.ctx, 'SELECT COUNT(*) AS n FROM ledger_entries WHERE partner_id = ?', acme.partnerId)) as any).n,
    );
  });

  it('the CSV gives no cell a formula start when read with comma, semicolon or tab as the separator', async () => {
    const hostile = [
      'a;=1+1',
      'a,=1+1',
      'a\t=1+1',
      '=cmd|"/c calc"!A1',
      'x; +1',
      'x;"=1+1',
      'x;""@SUM(A1)',
      'line\n=1+1',
      'line\r\n-1+1',
      '\t=1',
      'plain; text, here',
    ];
    for (const note of hostile)
      await sqlRun(
        s.ctx,
        `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, note, actor, created_at)
         SELECT partner_id, 'adjustment', 0, balance_after, ?, 'test', created_at FROM ledger_entries WHERE partner_id = ? ORDER BY id DESC LIMIT 1`,
        note,
        acme.partnerId,
      );
    const csv = (await admin.get('/ui/ledger.csv')).text;
    for (const sep of [',', ';', '\t']) {
      const cells = parseCsv(csv, sep).flat();
      const formula = cells.filter((c) => /^[=+\-@\t\r]/.test(c) && !/^-\d+(\.\d+)?$/.test(c));
      expect(formula, `read with ${JSON.stringify(sep)}`).toEqual([]);
    }
    // Read with commas, each note comes back whole, defused where it could start a formula.
    const notes = parseCsv(csv, ',').map((r) => r[7]);
    expect(notes).toContain("a;'=1+1");
    expect(notes).toContain('\'=cmd|"/c calc"!A1');
    expect(notes).toContain('x; +1');
    expect(notes).toContain("line\n'=1+1");
    expect(notes).toContain('plain; text, here');
  });

  it('issues a token with an expiry and the chosen scopes, and refuses an unknown expiry or scope', async () => {
    await admin.get('/ui/tokens');
    const body = new URLSearchParams({ _csrf: admin.csrf, name: 'ci', expires: '30d' });
    body.append('scopes', 'messages:read');
    body.append('scopes', 'channels:read');
    const res = await fetch(`${s.url}/ui/tokens`, {
      method: 'POST',
      headers: {
        cookie: [...admin.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
        'content-type': 'application/x-www-form-urlencoded',
        'sec-fetch-site': 'same-origin',
      },
      body: body.toString(),
      redirect: 'manual',
    });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toMatch(/^\/ui\/tokens\?flash=[\w-]+$/);
    const row = (await sqlRow(s.ctx, `SELECT * FROM tokens WHERE name = 'ci'`)) as any;
    expect(row.scopes).toBe('channels:read messages:read');
    expect(row.expires_at - Date.now()).toBeGreaterThan(29.9 * 86_400_000);
    expect(row.expires_at - Date.now()).toBeLessThan(30 * 86_400_000);
    await admin.get('/ui/tokens');
    const badExpiry = await admin.post('/ui/tokens', { name: 'x', scopes: 'messages:read', expires: 'forever' });
    expect(badExpiry.status).toBe(400);
    expect(badExpiry.text).toContain('choose when the token expires');
    const badScope = await admin.post('/ui/tokens', { name: 'x', scopes: 'admin:all' });
    expect(badScope.status).toBe(400);
    expect(badScope.text).toContain('unknown scope &quot;admin:all&quot;');
    const none = await admin.post('/ui/tokens', { name: 'x' });
    expect(none.text).toContain('at least one scope is required');
    expect(await sqlRow(s.ctx, `SELECT COUNT(*) AS n FROM tokens WHERE name = 'x'`)).toEqual({ n: 0 });
  });

  it('refuses an endpoint on a private address, as /v1 does, on registering and on editing', async () => {
    await admin.get('/ui/webhooks');
    const r = await admin.post('/ui/webhooks', { url: 'https://127.0.0.1:8443/hook' });
    expect(r.status).toBe(400);
    expect(r.text).toContain('refused: 127.0.0.1 is a loopback address');
    expect(await sqlRow(s.ctx, 'SELECT COUNT(*) AS n FROM webhook_endpoints')).toEqual({ n: 0 });
    // Editing an endpoint meets the same guard, and leaves it as it was.
    const { endpoint } = await createEndpoint(s.ctx, acme.partnerId, { url: 'https://hooks.example.com/msgd' });
    await admin.get(`/ui/webhooks/${endpoint.id}`);
    const edit = await admin.post(`/ui/webhooks/${endpoint.id}/edit`, { url: 'https://169.254.169.254/latest' });
    expect(edit.status).toBe(400);
    expect(edit.text).toMatch(/refused: 169\.254\.169\.254 is a cloud metadata address/);
    expect(await sqlRow(s.ctx, 'SELECT url FROM webhook_endpoints WHERE id = ?', endpoint.id)).toEqual({
      url: 'https://hooks.example.com/msgd',
    });
    await deleteEndpoint(s.ctx, acme.partnerId, endpoint.id);
  });

  it('an admin invites a user, who joins with the link; secrets stay out of the logs', async () => {
    await admin.get('/ui/users');
    const r = await admin.post('/ui/users', { email: 'Dev@Acme.example', role: 'developer' });
    expect(r.status).toBe(201);
    const link = /(\/ui\/invite\/[\w-]{43})/.exec(r.text)![1];
    expect((await admin.get('/ui/users')).text).not.toContain(link);
    const dev = new Client(s.url);
    await dev.get(link);
    const short = await dev.post(link, { password: 'short', confirm: 'short' });
    expect(short.status).toBe(400);
    expect(short.text).toContain('the password must be at least 12 characters');
    expect((await dev.post(link, { password: PASSWORD, confirm: PASSWORD })).status).toBe(303);
    expect((await dev.login('dev@acme.example')).status).toBe(303);
    expect((await dev.get('/ui/tokens')).status).toBe(200);
    // A tampered post to the link is logged without the link's secret.
    await new Client(s.url).post(link, { password: PASSWORD, confirm: PASSWORD });
    const logs = s.logs.join('');
    expect(logs).toContain('/ui/invite/[redacted]');
    expect(logs).not.toContain(link.slice('/ui/invite/'.length));
    expect(logs).not.toContain(dev.cookies.get('msgd_session')!);
    expect(logs).not.toContain(PASSWORD);
  });
});

/**
 * A spreadsheet's reading of CSV with one separator: a field that starts with `"` is quoted
 * (`""` inside is a quote) up to its closing quote; anything else runs to the next separator
 * or line break, quotes and all.
 */
function parseCsv(text: string, sep: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let i = 0;
  for (;;) {
    let cell = '';
    if (text[i] === '"') {
      i++;
      for (;;) {
        if (i >= text.length) break;
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            cell += '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        cell += text[i++];
      }
      // Text after the closing quote belongs to the same cell, as spreadsheets read it.
      while (i < text.length && text[i] !== sep && text[i] !== '\r' && text[i] !== '\n') cell += text[i++];
    } else {
      while (i < text.length && text[i] !== sep && text[i] !== '\r' && text[i] !== '\n') cell += text[i++];
    }
    row.push(cell);
    if (i >= text.length) {
      rows.push(row);
      return rows.filter((r) => r.length > 1 || r[0] !== '');
    }
    if (text[i] === sep) {
      i++;
      continue;
    }
    if (text[i] === '\r' && text[i + 1] === '\n') i++;
    i++;
    rows.push(row);
    row = [];
  }
}
