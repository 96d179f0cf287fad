import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { assignChannel } from '../../src/core/channels.js';
import { Counters } from '../../src/core/counters.js';
import { CounterWriter } from '../../src/core/counter-store.js';
import { addGateway, getGateway } from '../../src/core/gateways.js';
import { topup } from '../../src/core/ledger.js';
import { createPartner, setPartnerLimits } from '../../src/core/partners.js';
import { listPrices } from '../../src/core/prices.js';
import { issueToken } from '../../src/core/tokens.js';
import { insertWebhookLogIn, readWebhookLog, type WebhookLogRow } from '../../src/core/webhook-log.js';
import { newId } from '../../src/lib/ids.js';
import { parseMoney } from '../../src/lib/money.js';
import { queueOf } from '../../src/queue/of-ctx.js';
import { sql } from '../../src/db/sql.js';
import { outboundSms } from '../helpers/server.js';
import { cancelScheduled } from '../../src/core/scheduled.js';
import {
  FIXED_NOW,
  KEY,
  capture,
  cleanupDirs,
  writeBeat,
  flat,
  newDataDir,
  openConsole,
  type Console,
} from './helpers.js';

// Each screen against a real data directory set up through the core functions (and msgd's own
// counter and heartbeat writers), drawn at 80×24 and compared with its capture in docs/tui.md.

let c: Console | null = null;
afterEach(() => {
  c?.close();
  c = null;
});
afterAll(cleanupDirs);

const now = () => FIXED_NOW;
const open = async (screen: Parameters<typeof openConsole>[1]) => {
  c = await openConsole(await newDataDir(), screen, { now, showDir: '/var/lib/msgd' });
  return c;
};

async function scene(con: Console) {
  const ctx = con.cli.ctx;
  const twilio = await addGateway(
    ctx,
    { kind: 'twilio', name: 'twilio-main', settings: { account_sid: 'AC123' }, secrets: { auth_token: 'tw-secret-1' } },
    'test',
  );
  const sandbox = await addGateway(ctx, { kind: 'sandbox', name: 'sandbox-1', settings: {} }, 'test');
  const acme = await createPartner(ctx, { slug: 'acme', name: 'Acme Ltd' }, 'test');
  await topup(ctx, acme.id, parseMoney('3.00'), 'invoice 41', 'test');
  await setPartnerLimits(ctx, acme.id, { lowBalanceThreshold: parseMoney('5.00') }, 'test');
  const globex = await createPartner(ctx, { slug: 'globex', name: 'Globex', currency: 'EUR' }, 'test');
  await topup(ctx, globex.id, parseMoney('120.00'), null, 'test');
  const ch = await assignChannel(
    ctx,
    { partner: acme.id, gateway: sandbox.id, type: 'sms', sender: '+15550001111' },
    'test',
  );
  return { ctx, twilio, sandbox, acme, globex, ch };
}

async function counters(con: Console, gw: { twilio: string; sandbox: string }) {
  const ctx = con.cli.ctx;
  const k = new Counters();
  const w = new CounterWriter();
  const times = (n: number, f: () => void) => Array.from({ length: n }, f);
  times(40, () => k.dispatch(gw.sandbox, 'sent'));
  times(7, () => k.dispatch(gw.twilio, 'retried', '20429'));
  times(3, () => k.dispatch(gw.twilio, 'failed', '21211'));
  times(25, () => k.webhookIn('sandbox', 'verified'));
  times(2, () => k.webhookIn('twilio', 'bad_signature'));
  times(20, () => k.delivery('ok'));
  await w.write(ctx.store, k.snapshot(), FIXED_NOW - 30 * 60_000);
  times(12, () => k.dispatch(gw.sandbox, 'sent'));
  k.dispatch(gw.twilio, 'failed', '21211');
  times(9, () => k.webhookIn('sandbox', 'verified'));
  k.webhookIn('whatsapp', 'unroutable');
  times(4, () => k.delivery('ok'));
  k.delivery('failed');
  await w.write(ctx.store, k.snapshot(), FIXED_NOW - 5_000);
  await writeBeat(ctx, {
    id: 'ins_test',
    version: '0.1.0',
    pid: 4242,
    startedAt: FIXED_NOW - (2 * 3600 + 13 * 60) * 1000,
    beatAt: FIXED_NOW - 1_000,
    running: true,
    gauges: { waiting: 12, inFlight: 3, retrying: 2, dead: 1, cap: 100_000 },
  });
}

async function webhook(ctx: Console['cli']['ctx'], over: Partial<WebhookLogRow>): Promise<WebhookLogRow> {
  const row: WebhookLogRow = {
    id: newId('pwh'),
    provider: 'sandbox',
    gateway_id: null,
    method: 'POST',
    path: '/api/webhook.php',
    headers: JSON.stringify({ 'content-type': 'application/json', 'x-msgd-sandbox-signature': '[redacted]' }),
    body: Buffer.from(
      JSON.stringify({
        object: 'msgd_sandbox',
        events: [{ id: 'e1', message_id: 'msg_01jd2k8x4v9q6r3m5t7w0y1z2a', status: 'delivered' }],
      }),
    ),
    verification: 'ok',
    verification_reason: null,
    processing: 'processed',
    error: null,
    received_at: FIXED_NOW,
    processed_at: FIXED_NOW,
    ...over,
  };
  await insertWebhookLogIn(ctx.store, row);
  return row;
}

describe('msgctl tui: screens', () => {
  it('overview: queue, gateways, webhooks in, deliveries and low balances from msgd counters', async () => {
    const con = await open('overview');
    const s = await scene(con);
    await counters(con, { twilio: s.twilio.id, sandbox: s.sandbox.id });
    const f = await con.see('dead jobs 1');
    expect(f).toContain('● msgd running 0.1.0 · up 2h 13m · pid 4242');
    expect(f).toContain('waiting 12 · in flight 3 · retrying 2');
    expect(f).toMatch(/sandbox-1\s+sandbox\s+12\/52\s+0\/0\s+0\/0\s+-/);
    expect(f).toMatch(/twilio-main\s+twilio\s+0\/0\s+1\/4\s+0\/7\s+20429 ×7/);
    expect(f).toMatch(/sandbox\s+verified 9\/34/);
    expect(f).toMatch(/twilio\s+verified 0\/0\s+bad signature 0\/2/);
    expect(f).toMatch(/whatsapp .*unroutable 1\/1/);
    expect(f).toContain('ok 4/24 · failed 1/1 · endpoints failing 0 · disabled 0');
    expect(f).toContain('acme 3.00 USD (< 5.00)');
    // The gateway failing comes first, ahead of the busier one that does not.
    expect(f.indexOf('twilio-main')).toBeLessThan(f.indexOf('sandbox-1'));
    expect(f).not.toContain('globex');
    capture('overview', f);
  });

  it('says when msgd is not running, or stopped answering', async () => {
    // A clock that runs: on PostgreSQL the beat's age is read on the database's clock, which runs.
    const con = (c = await openConsole(await newDataDir(), 'overview', {
      now: () => Date.now(),
      showDir: '/var/lib/msgd',
    }));
    await con.see('○ msgd not running');
    // Half a second into a second, so the few ms the clocks differ by do not change the one shown.
    const beatAt = Math.floor(Date.now() / 1000) * 1000 - 60_000 + 500;
    await writeBeat(con.cli.ctx, {
      id: 'ins_test',
      version: '0.1.0',
      pid: 1,
      startedAt: 0,
      beatAt,
      running: true,
      gauges: {},
    });
    const shown = new Date(beatAt).toISOString().slice(0, 19).replace('T', ' ');
    await con.see(`▲ msgd not responding: last beat ${shown} UTC`, 3000);
  });

  it("partners: the list with today's spend, and the detail", async () => {
    const con = await open('partners');
    const s = await scene(con);
    await issueToken(con.cli.ctx, { partner: s.acme.id, name: 'prod', scopes: ['messages:send'] }, 'test');
    await outboundSms(
      con.cli.ctx,
      s.acme.id,
      { id: s.ch.id, gateway_id: s.sandbox.id, sender: '+15550001111' },
      { price: 7500 },
    );
    const f = await con.see('globex');
    expect(f).toMatch(/acme\s+Acme Ltd\s+active\s+2\.9925 USD\s+0\.00\s+0\.0075/);
    capture('partners', f);
    await con.press(KEY.enter);
    const d = await con.see('RECENT LEDGER');
    expect(d).toMatch(/sms\s+primary\s+\+15550001111\s+via sandbox-1 \(sandbox\)/);
    expect(d).toMatch(/prod\s+msgd_live_[\w-]{6}…\s+active\s+used never\s+messages:send/);
    expect(d).toMatch(/topup\s+3\.00\s+→\s+3\.00 invoice 41/);
    capture('partner-detail', d);
    await con.press(KEY.esc);
    await con.see('SPENT TODAY');
  });

  it('gateways: add one with a masked secret that is never shown again', async () => {
    const con = await open('gateways');
    await scene(con);
    await con.see('twilio-main');
    await con.press('n');
    await con.see('Add a gateway: its kind');
    // whatsapp_cloud → meta_messenger → meta_instagram → twilio
    await con.press('tw2', KEY.tab, KEY.right, KEY.right, KEY.right);
    await con.see('‹ twilio: Twilio');
    await con.press(KEY.enter);
    await con.see('Add twilio gateway tw2');
    await con.press(KEY.tab, 'AC999');
    let f = await con.see('AC999');
    // account_sid, api_key_sid, base_url, …: tab to the required secret.
    const fields = f
      .split('\n')
      .filter((l) => /^│ [› ] \S/.test(l))
      .map((l) => l.slice(4).trim().split(/\s+/)[0]);
    const hops = fields.indexOf('auth_token') - fields.indexOf('account_sid');
    expect(hops).toBeGreaterThan(0);
    await con.press(...Array(hops).fill(KEY.tab), 'super-secret-token');
    f = await con.see('••••••••••••••••••');
    expect(f).not.toContain('super-secret-token');
    await con.press(KEY.enter);
    f = flat(await con.see('Added twilio gateway tw2.'));
    expect(f).toMatch(/Register its webhook URL: http:\/\/127\.0\.0\.1:8080\/api\/webhook\.php\?gateway=gw_\w{26}/);
    f = con.frame();
    expect(f).not.toContain('super-secret-token');
    const gw = await getGateway(con.cli.ctx, 'tw2');
    expect(gw.secret_names).toEqual(['auth_token']);
    const stored = await con.cli.ctx.store.get<{ secrets: string }>(
      sql`SELECT secrets FROM gateways WHERE name = 'tw2'`,
    );
    expect(stored!.secrets).not.toContain('super-secret-token');
    // The pane under the list is the new gateway's own: it is selected.
    f = await con.see('tw2 · Twilio');
    expect(f).toMatch(/>tw2\s+twilio/);
    expect(f).toContain(`gateway=${gw.id}`);
    expect(f).toContain('secrets: auth_token (values never shown)');
    expect(f).toMatch(/http:\/\/127\.0\.0\.1:8080\/api\/webhook\.php\?gateway=gw_\w{26}/);
  });

  it('gateways: prices and disabling ask first; cancel changes nothing', async () => {
    const con = await open('gateways');
    await scene(con);
    // The whole scene: its gateways are added one by one while the screen reads.
    const f0 = await con.see(/sandbox-1\s+sandbox\s+active\s+1000 default\s+1 [\s\S]*twilio-main/);
    capture('gateways', f0);
    await con.press('p');
    await con.see('Set a price');
    await con.press(KEY.right, KEY.right, KEY.right, KEY.tab, KEY.tab, '0.0075', KEY.enter);
    let f = flat(await con.see('Set the sms price?'));
    expect(f).toContain('sms costs 0.0075 per segment for every partner without an override, from the next send on.');
    await con.press('n');
    await con.see('Cancelled: nothing was changed.');
    expect(await listPrices(con.cli.ctx)).toEqual([]);
    await con.press('p');
    await con.see('Set a price');
    await con.press(KEY.right, KEY.right, KEY.right, KEY.tab, KEY.right, KEY.tab, '0.02', KEY.enter);
    f = flat(await con.see('Set the sms price?'));
    expect(f).toContain('sms costs 0.02 USD per segment for acme, overriding the default');
    await con.press('y');
    await con.see('sms now costs 0.02 USD per segment for acme');
    expect((await listPrices(con.cli.ctx)).map((p) => [p.channel_type, p.partner_slug, p.amount])).toEqual([
      ['sms', 'acme', 20_000],
    ]);

    await con.press('d');
    f = flat(await con.see('Disable gateway sandbox-1?'));
    expect(f).toContain('new sends on its 1 channel(s) are refused (403)');
    await con.press('y');
    await con.see('Disabled gateway sandbox-1.');
    expect((await getGateway(con.cli.ctx, 'sandbox-1')).status).toBe('disabled');
  });

  it('webhooks: a live tail with pause, filter, detail and reprocess', async () => {
    const con = await open('webhooks');
    const s = await scene(con);
    const ctx = con.cli.ctx;
    await webhook(ctx, { gateway_id: s.sandbox.id, received_at: FIXED_NOW - 4000 });
    await webhook(ctx, {
      provider: 'twilio',
      gateway_id: s.twilio.id,
      verification: 'failed',
      verification_reason: 'signature does not match the auth_token of gateway twilio-main',
      processing: 'rejected',
      error: 'not processed: signature not verified',
      received_at: FIXED_NOW - 3000,
      headers: JSON.stringify({
        'x-twilio-signature': '[redacted]',
        'content-type': 'application/x-www-form-urlencoded',
      }),
      body: Buffer.from('MessageSid=SM1&MessageStatus=delivered&To=%2B14155550123'),
    });
    const lost = await webhook(ctx, {
      provider: 'whatsapp',
      processing: 'unroutable',
      error: 'no channel for phone number id 5551',
      received_at: FIXED_NOW - 2000,
    });
    // The rows first, then the verified one's note, read from its stored body.
    let f = await con.see(/processed\s+delivered msg…/);
    expect(f).toContain('unroutable');
    expect(f).toMatch(/\d\d sandbox\s+sandbox-1\s+verified\s+processed/);
    expect(f).toMatch(/\d\d twilio\s+twilio-main\s+bad signature\s+rejected\s+signature does/);
    capture('webhooks', f);

    await con.press(' ');
    await con.see('PAUSED (Space resumes)');
    await webhook(ctx, { provider: 'sendgrid', received_at: FIXED_NOW - 1000 });
    await new Promise((r) => setTimeout(r, 700));
    expect(con.frame()).not.toContain('sendgrid');
    await con.press(' ');
    await con.see(/\d\d sendgrid/);

    await con.press('/');
    await con.see('Filter the tail');
    await con.press(KEY.down, KEY.down, KEY.down, KEY.right, KEY.right, KEY.right);
    await con.see('‹ unroutable ›');
    await con.press(KEY.enter);
    f = await con.see('filter: unroutable');
    expect(f).not.toMatch(/\d\d sandbox\s+sandbox-1/);
    expect(f).toMatch(/\d\d whatsapp\s+-\s+unroutable/);

    await con.press(KEY.up, KEY.enter);
    f = await con.see('what it changed: unroutable: no channel for phone number id 5551');
    expect(f).toContain('HEADERS (secrets redacted)');
    expect(f).toContain('x-msgd-sandbox-signature: [redacted]');
    await con.press('j', 'j', 'j', 'j');
    f = await con.see('"object": "msgd_sandbox",');

    await con.press('R');
    f = flat(await con.see(`Reprocess webhook ${lost.id}?`));
    expect(f).toContain('now unroutable: no channel for phone number id 5551');
    await con.press('y');
    await con.see('1 webhook(s) queued to be processed again');
    expect((await readWebhookLog(ctx, lost.id))!.processing).toBe('pending');
  });

  it('webhooks: o adds the deliveries to partners, new attempts as they are made', async () => {
    const con = await open('webhooks');
    const s = await scene(con);
    const store = con.cli.ctx.store;
    await webhook(con.cli.ctx, { gateway_id: s.sandbox.id, received_at: FIXED_NOW - 4000 });
    await store.run(sql`INSERT INTO webhook_endpoints (id, partner_id, url, secret, status, created_at, updated_at)
               VALUES ('whe_1', ${s.acme.id}, 'https://acme.example/hooks', 'sealed', 'enabled', 1, 1)`);
    await store.run(sql`INSERT INTO events (id, partner_id, type, payload, fanned_out, created_at)
               VALUES ('evt_1', ${s.acme.id}, 'message.delivered', '{}', 1, ${FIXED_NOW - 3000})`);
    await store.run(sql`INSERT INTO webhook_deliveries (id, event_id, endpoint_id, partner_id, status, attempts, created_at, updated_at)
               VALUES ('dlv_1', 'evt_1', 'whe_1', ${s.acme.id}, 'pending', 1, ${FIXED_NOW - 3000}, ${FIXED_NOW - 3000})`);
    const attempt = (no: number, code: number | null, error: string | null, at: number) =>
      store.run(
        sql`INSERT INTO webhook_attempts (delivery_id, attempt_no, status_code, duration_ms, error, created_at)
            VALUES ('dlv_1', ${no}, ${code}, 40, ${error}, ${at})`,
      );
    await attempt(1, 503, 'HTTP 503', FIXED_NOW - 2500);
    let f = await con.see(/\d\d sandbox/);
    expect(f).not.toMatch(/\d\d out /);

    await con.press('o');
    f = await con.see(/\d\d out\s+message\.…\s+#1 40 ms\s+failed 503\s+https:\/\/acme\.exam/);
    expect(f).toContain('in + out');
    await attempt(2, 200, null, FIXED_NOW - 1000);
    f = await con.see(/\d\d out\s+message\.…\s+#2 40 ms\s+ok 200/);
    expect(f).toMatch(/#1 40 ms\s+failed 503/);

    await con.press('o');
    await new Promise((r) => setTimeout(r, 700));
    expect(con.frame()).not.toMatch(/\d\d out /);
  });

  it('messages: find by partner, then a message with its history', async () => {
    const con = await open('messages');
    const s = await scene(con);
    const m = await outboundSms(con.cli.ctx, s.acme.id, {
      id: s.ch.id,
      gateway_id: s.sandbox.id,
      sender: '+15550001111',
    });
    await con.see('No messages match.');
    await con.press('/');
    await con.see('Find messages');
    await con.press(KEY.tab, 'acme', KEY.enter);
    await con.see('1 message(s) found.');
    // The list follows the new query a frame after the flash.
    let f = await con.see(m.id);
    expect(f).toMatch(new RegExp(`${m.id}\\s+2026-11-26 10:00\\s+sms\\s+\\+14155550123\\s+queued`));
    capture('messages', f);
    await con.press(KEY.enter);
    f = await con.see('HISTORY');
    expect(f).toContain('from +15550001111 to +14155550123');
    expect(f).toMatch(/2026-11-26 10:00:00\s+queued/);
    await con.press(KEY.esc);
    await con.see('CREATED (UTC)');
    await con.press('/');
    await con.see('Find messages');
    // By recipient alone: the partner field emptied.
    await con.press(KEY.tab, ...Array(4).fill(KEY.backspace), KEY.tab, '+14155550123', KEY.enter);
    f = await con.see('1 message(s) found.');
    expect(f).toContain(m.id);
    await con.press('/');
    await con.see('Find messages');
    await con.press(KEY.up, 'nonsense', KEY.enter);
    f = flat(await con.see('✗ unknown status "nonsense"'));
    expect(f).toContain('status: one of scheduled, queued');
  });

  it('messages: scheduled and canceled ones, with when a scheduled one goes', async () => {
    const con = await open('messages');
    const s = await scene(con);
    const ctx = con.cli.ctx;
    const channel = { id: s.ch.id, gateway_id: s.sandbox.id, sender: '+15550001111' };
    const later = (text: string) =>
      outboundSms(ctx, s.acme.id, channel, { text, price: 1000, sendAt: FIXED_NOW + 3 * 3_600_000 });
    const waiting = await later('at noon');
    const dropped = await later('never mind');
    await cancelScheduled(ctx, s.acme.id, dropped.id, 'test');
    await con.see('No messages match.');
    await con.press('/');
    await con.see('Find messages');
    await con.press(KEY.tab, 'acme', KEY.enter);
    await con.see('2 message(s) found.');
    let f = await con.see(waiting.id);
    expect(f).toMatch(new RegExp(`${waiting.id}\\s+2026-11-26 10:00\\s+sms\\s+\\+14155550123\\s+scheduled`));
    expect(f).toMatch(new RegExp(`${dropped.id}\\s+2026-11-26 10:00\\s+sms\\s+\\+14155550123\\s+canceled`));
    // Newest first: the canceled one is on top; the scheduled one below it.
    await con.press(KEY.down, KEY.enter);
    f = await con.see('HISTORY');
    expect(f).toContain(`scheduled for 2026-11-26 13:00:00`);
    expect(f).toContain(`cancel before then: msgctl messages cancel ${waiting.id}`);
    expect(f).toMatch(/2026-11-26 10:00:00\s+scheduled/);
  });

  it('jobs: retry a dead job after confirming', async () => {
    const con = await open('jobs');
    const store = con.cli.ctx.store;
    const q = queueOf(con.cli.ctx, { now });
    const { id } = await store.transaction((tx) =>
      q.enqueue(tx, { kind: 'webhook.process', payload: { webhook_ids: [] } }),
    );
    await store.run(
      sql`UPDATE jobs SET state = 'dead', attempts = 8, last_error = 'database is locked', updated_at = ${FIXED_NOW}
          WHERE id = ${id}`,
    );
    let f = await con.see('database is locked', 8000);
    capture('jobs', f);
    await con.press('R');
    f = flat(await con.see(`Retry dead job ${id}?`));
    expect(f).toContain('dead after 8 attempts: database is locked');
    await con.press('y');
    await con.see('1 dead job(s) queued again');
    expect((await q.get(Number(id)))!.state).toBe('available');
    await con.press('d');
    await con.see(/webhook\.process\s+available/);
  });

  it('shows the keys on ?, and an exception inside a screen in its place', async () => {
    const con = await open('overview');
    await con.press('?');
    await con.see('Keys (Overview)');
    await con.press('x');
    await con.see('Queue');
    // A gateway of a kind this msgd does not know (written by a newer one, or by hand).
    await addGateway(con.cli.ctx, { kind: 'sandbox', name: 'sandbox-1', settings: {} }, 'test');
    await con.cli.ctx.store.run(
      sql`INSERT INTO gateways (id, kind, name, status, settings, secrets, created_at, updated_at)
          SELECT 'gw_x', 'pigeon', 'coop', 'active', '{}', secrets, 0, 0 FROM gateways LIMIT 1`,
    );
    await con.press('3');
    const f = await con.see('This screen failed');
    expect(f).toContain('1 Overview');
    await con.press('2');
    await con.see('No partners yet');
  });
});
