import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { assignChannel } from '../../src/core/channels.js';
import { addGateway } from '../../src/core/gateways.js';
import { topup } from '../../src/core/ledger.js';
import { createPartner, createPartnerIn, setPartnerLimits } from '../../src/core/partners.js';
import { setPrice } from '../../src/core/prices.js';
import { insertWebhookLogIn, type WebhookLogRow } from '../../src/core/webhook-log.js';
import { newId } from '../../src/lib/ids.js';
import { parseMoney } from '../../src/lib/money.js';
import { osc52 } from '../../src/tui/components.js';
import { outboundSms } from '../helpers/server.js';
import { sleep } from '../helpers/wait.js';
import { FIXED_NOW, KEY, cleanupDirs, writeBeat, flat, newDataDir, openConsole, type Console } from './helpers.js';

// Finding things among many, and the read-only views: 300 partners at 80×24, a picker found by
// typing, a live tail whose notes say what each webhook was, the whole ledger by pages.

let c: Console | null = null;
afterEach(() => {
  c?.close();
  c = null;
});
afterAll(cleanupDirs);

const now = () => FIXED_NOW;

// Slugs with a hyphen: the filter also matches partner ids, which are random letters and
// digits, so a filter of `p25` alone would now and then match one id as well.
async function manyPartners(con: Console, n = 300) {
  const ctx = con.cli.ctx;
  await ctx.store.transaction(async (tx) => {
    for (let i = 0; i < n; i++)
      await createPartnerIn(ctx, tx, { slug: `p-${String(i).padStart(3, '0')}`, name: `Partner ${i}` }, 'test');
  });
}

async function webhook(con: Console, over: Partial<WebhookLogRow>): Promise<WebhookLogRow> {
  const row: WebhookLogRow = {
    id: newId('pwh'),
    provider: 'sandbox',
    gateway_id: null,
    method: 'POST',
    path: '/api/webhook.php',
    headers: JSON.stringify({ 'content-type': 'application/json' }),
    body: Buffer.from('{}'),
    verification: 'ok',
    verification_reason: null,
    processing: 'processed',
    error: null,
    received_at: FIXED_NOW,
    processed_at: FIXED_NOW,
    ...over,
  };
  await insertWebhookLogIn(con.cli.ctx.store, row);
  return row;
}

describe('msgctl tui: finding things', () => {
  it('partners: / narrows as you type, n/N says where the selection is, g and G go to the ends', async () => {
    c = await openConsole(await newDataDir(), 'partners', { now });
    await manyPartners(c);
    await c.see('p-000');
    let f = await c.see(' 1/300');
    await c.press('G');
    f = await c.see('300/300');
    expect(f).toMatch(/>p-299\s+Partner 299/);
    await c.press('g');
    await c.see(' 1/300');
    await c.press('/', 'p-25');
    f = await c.see('/ p-25▏ · 10 of 300');
    expect(f).toMatch(/>p-250\s+Partner 250/);
    expect(f).not.toContain('p-249');
    await c.press('0', KEY.enter);
    f = await c.see('/ p-250 · 1 of 300');
    expect(f).toMatch(/>p-250\s+Partner 250/);
    expect(f).not.toContain('p-251');
    // The filter stays while the partner is opened and closed; Esc then clears it.
    await c.press(KEY.enter);
    await c.see('p-250 · Partner 250 · active');
    await c.press(KEY.esc);
    await c.see('1 of 300');
    await c.press(KEY.esc);
    await c.see(' 1/300');
  });

  it('pickers: typing finds an option (p250 of 300) instead of 250 presses', async () => {
    c = await openConsole(await newDataDir(), 'gateways', { now });
    await manyPartners(c);
    await addGateway(c.cli.ctx, { kind: 'sandbox', name: 'sandbox-1', settings: {} }, 'test');
    await c.see('sandbox-1');
    await c.press('p');
    await c.see('Set a price');
    await c.press(KEY.tab, 'p-250');
    await c.see('‹ p-250 ›');
    // A second later, typing starts a new search.
    await sleep(1100);
    await c.press('every');
    await c.see('‹ every partner (default) ›');
  });

  it('gateways: / filters, and the overview lists the failing and busy gateways first', async () => {
    c = await openConsole(await newDataDir(), 'gateways', { now });
    const ctx = c.cli.ctx;
    for (const name of ['alpha', 'beta', 'gamma'])
      await addGateway(ctx, { kind: 'sandbox', name, settings: {} }, 'test');
    await c.see('gamma');
    await c.press('/', 'gam', KEY.enter);
    const f = await c.see('/ gam · 1 of 3');
    expect(f).toMatch(/>gamma\s+sandbox/);
    expect(f).not.toMatch(/alpha\s+sandbox/);
  });

  it('webhooks: each verified row says what it was (event and message), and free text finds it', async () => {
    c = await openConsole(await newDataDir(), 'webhooks', { now });
    const ctx = c.cli.ctx;
    const gw = await addGateway(ctx, { kind: 'sandbox', name: 'sbx', settings: {} }, 'test');
    const p = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
    const ch = await assignChannel(ctx, { partner: p.id, gateway: gw.id, type: 'sms', sender: '+15550001111' }, 'test');
    await topup(ctx, p.id, parseMoney('1.00'), null, 'test');
    const m1 = await outboundSms(ctx, p.id, { id: ch.id, gateway_id: gw.id, sender: ch.sender });
    const m2 = await outboundSms(ctx, p.id, { id: ch.id, gateway_id: gw.id, sender: ch.sender });
    const status = (id: string, s: string, at: number) =>
      webhook(c!, {
        gateway_id: gw.id,
        received_at: at,
        body: Buffer.from(
          JSON.stringify({
            object: 'msgd_sandbox',
            events: [{ id: `e${at}`, message_id: id, status: s, timestamp: at / 1000 }],
          }),
        ),
      });
    await status(m1.id, 'delivered', FIXED_NOW - 3000);
    await status(m1.id, 'read', FIXED_NOW - 2000);
    await webhook(c, {
      gateway_id: gw.id,
      received_at: FIXED_NOW - 1000,
      body: Buffer.from(
        JSON.stringify({
          object: 'msgd_sandbox',
          events: [
            { id: 'in1', type: 'message', channel: 'sms', from: '+14155550999', to: '+15550001111', text: 'hi' },
          ],
        }),
      ),
    });
    await status(m2.id, 'delivered', FIXED_NOW - 500);
    const short = (id: string) => `msg…${id.slice(-8)}`;
    let f = await c.see(`read ${short(m1.id)}`);
    expect(f).toMatch(new RegExp(`processed\\s+delivered ${short(m1.id)}`));
    expect(f).toMatch(new RegExp(`processed\\s+delivered ${short(m2.id)}`));
    expect(f).toMatch(/processed\s+inbound/);
    await c.press('/');
    await c.see('Filter the tail');
    await c.press(KEY.down, KEY.down, m2.id, KEY.enter);
    f = await c.see(`Showing only "${m2.id}".`);
    expect(f).toContain(`delivered ${short(m2.id)}`);
    expect(f).not.toContain(short(m1.id));
  });

  it('webhooks: the detail pane scrolls down to the last line of the body at 80×24, and back at once', async () => {
    c = await openConsole(await newDataDir(), 'webhooks', { now });
    const body: Record<string, string> = {};
    for (let i = 1; i <= 30; i++) body[`field${String(i).padStart(2, '0')}`] = `value ${i}`;
    await webhook(c, { body: Buffer.from(JSON.stringify(body)) });
    await c.see('processed');
    await c.press(KEY.up, KEY.enter);
    await c.see('HEADERS');
    await c.press(...Array(60).fill('j'));
    let f = await c.see('"field30": "value 30"');
    expect(f).toContain('}');
    expect(f).toMatch(/│  }\s+│/);
    // Pressing past the end does not pile up: one k shows the line above at once.
    await c.press('k');
    f = await c.see('"field29": "value 29"');
    expect(f).not.toMatch(/│  }\s+│/);
  });
});

describe('msgctl tui: header and liveness', () => {
  it('at 60 columns the pid and uptime stay whole; the data directory gives way, with an ellipsis', async () => {
    const dir = await newDataDir();
    c = await openConsole(dir, 'overview', {
      now,
      size: { columns: 60, rows: 24 },
      showDir: '/var/lib/a/very/long/path/to/the/msgd/data/directory',
    });
    await writeBeat(c.cli.ctx, {
      id: 'ins_test',
      version: '0.1.0',
      pid: 18801,
      startedAt: FIXED_NOW - 3_600_000,
      beatAt: FIXED_NOW - 1000,
      running: true,
      gauges: {},
    });
    // writeBeat writes the row, then moves its times onto the store's clock: a poll between the
    // two reads the row half made, so the header is read once it shows the finished one.
    const f = await c.see('up 1h 0m');
    const first = f.split('\n')[0];
    expect(first).toMatch(/^● msgd running 0\.1\.0 · up 1h 0m · pid 18801 …\/data\/directory$/);
    expect(first.length).toBeLessThanOrEqual(60);
  });

  it('with several instances on the store, the header counts the running and the dead; the leader speaks', async () => {
    c = await openConsole(await newDataDir(), 'overview', { now: () => Date.now(), size: { columns: 100, rows: 24 } });
    const row = { version: '0.2.0', gauges: {}, running: true, host: 'another-host' };
    await writeBeat(c.cli.ctx, {
      ...row,
      id: 'ins_a',
      pid: 501,
      startedAt: Date.now() - 60_000,
      beatAt: Date.now(),
    });
    await writeBeat(c.cli.ctx, {
      ...row,
      id: 'ins_b',
      pid: 502,
      startedAt: Date.now() - 120_000,
      beatAt: Date.now(),
      leader: true,
    });
    await writeBeat(c.cli.ctx, { ...row, id: 'ins_c', pid: 503, startedAt: 0, beatAt: Date.now() - 60_000 });
    const f = await c.see('2 instances, 1 dead');
    expect(f.split('\n')[0]).toMatch(/^● msgd running 0\.2\.0 · up 2m \d+s · pid 502 · 2 instances, 1 dead/);
  });

  it('on msgd’s own host, a killed msgd reads "not running" at once (its pid is gone)', async () => {
    c = await openConsole(await newDataDir(), 'overview', { now: () => Date.now() });
    // A pid that was just used and is gone now.
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!;
    await writeBeat(c.cli.ctx, {
      id: 'ins_test',
      version: '0.1.0',
      pid: gone,
      startedAt: Date.now() - 60_000,
      beatAt: Date.now(),
      running: true,
      gauges: {},
      host: hostname(),
    });
    await c.see(`○ msgd not running (pid ${gone} is gone)`);
    // Another host's msgd: only its heartbeat tells.
    await writeBeat(c.cli.ctx, {
      id: 'ins_test',
      version: '0.1.0',
      pid: gone,
      startedAt: Date.now() - 60_000,
      beatAt: Date.now(),
      running: true,
      gauges: {},
      host: 'another-host',
    });
    await c.see(`● msgd running 0.1.0 · up 1m 0s · pid ${gone}`);
    // This very process: alive.
    await writeBeat(c.cli.ctx, {
      id: 'ins_test',
      version: '0.1.0',
      pid: process.pid,
      startedAt: Date.now() - 60_000,
      beatAt: Date.now(),
      running: true,
      gauges: {},
      host: hostname(),
    });
    await c.see(`pid ${process.pid}`);
  });
});

describe('msgctl tui: read-only views and keys at 80 columns', () => {
  it('the footer keeps the keys each screen needs; assign channel is A, g goes to the top', async () => {
    c = await openConsole(await newDataDir(), 'partners', { now });
    await createPartner(c.cli.ctx, { slug: 'acme', name: 'Acme' }, 'test');
    let f = await c.see('acme');
    const footer = f.split('\n').at(-1)!;
    expect(footer).toContain('i token');
    expect(footer).toContain('A channel');
    expect(footer).toContain('? all');
    // ? lists every key, the screen's and the global ones, in two columns when one is too short.
    await c.press('?');
    f = flat(await c.see('Keys (Partners)'));
    expect(f).toContain('A assign channel');
    expect(f).toContain('L the whole ledger');
    expect(f).toContain('g / G top / bottom');
    expect(f).toContain('q, Ctrl-C quit');
    await c.press('x');
    await c.see('SPENT TODAY');
    await c.press('3');
    f = await c.see('No gateways yet');
    expect(f.split('\n').at(-1)).toMatch(/n add · e edit · d disable · p price/);
    await c.press('g');
    await c.see('No gateways yet');
    expect(c.frame()).not.toContain('Assign a channel');
  });

  it('prices, a partner’s limits, the whole ledger by pages, and the token secret copied by OSC 52', async () => {
    c = await openConsole(await newDataDir(), 'gateways', { now });
    const ctx = c.cli.ctx;
    await addGateway(ctx, { kind: 'sandbox', name: 'sandbox-1', settings: {} }, 'test');
    const acme = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
    await setPartnerLimits(ctx, acme.id, { rateLimitPerMinute: 120, lowBalanceThreshold: parseMoney('5.00') }, 'test');
    await setPrice(ctx, { channel: 'sms', amount: parseMoney('0.0075') }, 'test');
    await setPrice(ctx, { channel: 'sms', amount: parseMoney('0.005'), partner: acme.id }, 'test');
    await setPrice(ctx, { channel: 'email', amount: parseMoney('0.001') }, 'test');
    for (let i = 1; i <= 45; i++) await topup(ctx, acme.id, parseMoney('1.00'), `invoice ${i}`, 'test');
    await c.see('sandbox-1');
    await c.press('P');
    let f = await c.see(/email\s+default/);
    expect(f).toMatch(/email\s+default \(every partner\)\s+0\.001\s+message/);
    expect(f).toMatch(/sms\s+default \(every partner\)\s+0\.0075\s+segment/);
    expect(f).toMatch(/sms\s+acme\s+0\.005\s+segment/);
    await c.press(KEY.esc, '2');
    await c.see('acme');
    await c.press(KEY.enter);
    f = await c.see('rate limit');
    expect(f).toContain('rate limit 120/min · low-balance threshold 5.00 USD');
    expect(f).toMatch(/email 0\.001 · sms 0\.005 \(own\)/);
    await c.press('L');
    f = await c.see('Ledger of acme (USD) · page 1');
    expect(f).toContain('invoice 45');
    expect(f).not.toContain('invoice 20 ');
    await c.press('\x1b[6~');
    f = await c.see('page 2');
    expect(f).not.toContain('invoice 45');
    await c.press('\x1b[6~');
    f = await c.see('page 3');
    expect(f).toMatch(/invoice 1$/m);
    expect(f).toContain('the oldest entry');
    await c.press(KEY.esc);
    await c.see('RECENT LEDGER');
    await c.press(KEY.esc, 'i');
    await c.see('Issue a token for acme');
    await c.press('prod', KEY.enter);
    f = await c.see('Shown ONCE');
    const secret = f.match(/msgd_live_[A-Za-z0-9_-]{20,}/)![0];
    await c.press('c');
    await c.see("Sent to the terminal's clipboard");
    expect(c.written()).toContain(osc52(secret));
    expect(osc52(secret)).toBe(`\x1b]52;c;${Buffer.from(secret).toString('base64')}\x07`);
  });
});
