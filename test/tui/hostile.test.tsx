import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { assignChannel } from '../../src/core/channels.js';
import { addGateway } from '../../src/core/gateways.js';
import { topup } from '../../src/core/ledger.js';
import { createPartner } from '../../src/core/partners.js';
import { setPrice } from '../../src/core/prices.js';
import { issueToken } from '../../src/core/tokens.js';
import { insertWebhookLog } from '../../src/core/webhook-log.js';
import { newId } from '../../src/lib/ids.js';
import { JobQueue } from '../../src/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { terminalSafe } from '../../src/cli/output.js';
import { safeLine } from '../../src/lib/terminal-text.js';
import { storeOutboundSms } from '../helpers/server.js';
import { FIXED_NOW, KEY, cleanupDirs, newDataDir, openConsole, type Console } from './helpers.js';

// Text from outside, made hostile: every screen of the console and msgctl's text output draw it
// as visible escapes. No byte a terminal acts on may come through but the console's own
// styling (Ink's SGR attributes): no colour or blink, no window title (OSC 0), no link (OSC 8),
// no clipboard write (OSC 52), no C1 CSI, no bidi override, no tab or newline splitting a row.

const HOSTILE =
  'Evil\x1b[5m\x1b]0;pwned\x07\x1b]8;;https://evil.example\x07link\x1b]8;;\x07\x1b]52;c;cHduZWQ=\x07\u009b6m\u202eusd\u2066x\u2069\tTAB\nNEWLINE\rCR';

/** Ink's own attributes (bold, dim, underline, inverse, colours and their resets). */
const INK_SGR = /\x1b\[(?:0|1|2|4|7|22|24|27|39|49|3[0-7]|9[0-7])m/g;

function expectInert(output: string, where: string) {
  const bad = output.replace(INK_SGR, '').match(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
  expect(bad, `${where}: a control character reached the terminal`).toBeNull();
}

let c: Console | null = null;
afterEach(() => {
  c?.close();
  c = null;
});
afterAll(cleanupDirs);

async function hostileScene(dir: string) {
  c = await openConsole(dir, 'overview', { now: () => FIXED_NOW });
  const ctx = c.cli.ctx;
  const db = ctx.db.sqlite;
  const gw = await addGateway(ctx, { kind: 'sandbox', name: 'sbx', settings: {} }, 'test');
  const p = await createPartner(ctx, { slug: 'evil', name: 'Evil' }, 'test');
  await topup(ctx, p.id, 1_000_000, 'note', 'test');
  const ch = await assignChannel(ctx, { partner: p.id, gateway: gw.id, type: 'sms', sender: '+15550001111' }, 'test');
  await issueToken(ctx, { partner: p.id, name: 'tok', scopes: ['messages:send'] }, 'test');
  await setPrice(ctx, { channel: 'sms', amount: 1000, partner: p.id }, 'test');
  const m = storeOutboundSms(ctx, p.id, { id: ch.id, gateway_id: gw.id, sender: ch.sender });
  // What the core functions refuse, written as an older version, an import or an attacker would have.
  db.prepare('UPDATE partners SET name = ? WHERE id = ?').run(HOSTILE, p.id);
  db.prepare('UPDATE partners SET low_balance_threshold = 999000000 WHERE id = ?').run(p.id);
  db.prepare('UPDATE ledger_entries SET note = ? WHERE partner_id = ?').run(HOSTILE, p.id);
  db.prepare('UPDATE tokens SET name = ? WHERE partner_id = ?').run(HOSTILE, p.id);
  db.prepare('UPDATE channels SET sender = ? WHERE id = ?').run(HOSTILE, ch.id);
  db.prepare('UPDATE gateways SET name = ?, settings = ? WHERE id = ?').run(
    HOSTILE,
    JSON.stringify({ delivery_delay_ms: 1, note: HOSTILE }),
    gw.id,
  );
  db.prepare(
    `UPDATE messages SET "to" = ?, "from" = ?, error_code = ?, error_message = ?, provider_message_id = ? WHERE id = ?`,
  ).run(HOSTILE, HOSTILE, 'E1', HOSTILE, HOSTILE, m.id);
  insertWebhookLog(ctx, {
    id: newId('pwh'),
    provider: 'sandbox',
    gateway_id: gw.id,
    method: 'POST',
    path: '/api/webhook.php',
    headers: JSON.stringify({ 'content-type': 'application/json', 'x-evil': HOSTILE }),
    body: Buffer.from(
      JSON.stringify({ object: 'msgd_sandbox', events: [{ id: HOSTILE, status: HOSTILE }], x: HOSTILE }),
    ),
    verification: 'ok',
    verification_reason: null,
    processing: 'processed',
    error: null,
    received_at: FIXED_NOW - 1000,
    processed_at: FIXED_NOW,
  });
  insertWebhookLog(ctx, {
    id: newId('pwh'),
    provider: 'twilio',
    gateway_id: null,
    method: 'POST',
    path: `/api/webhook.php?${HOSTILE}`,
    headers: '{}',
    body: Buffer.from(HOSTILE),
    verification: 'failed',
    verification_reason: HOSTILE,
    processing: 'rejected',
    error: HOSTILE,
    received_at: FIXED_NOW - 500,
    processed_at: FIXED_NOW,
  });
  const q = new JobQueue(ctx.db, { now: () => FIXED_NOW });
  const { id } = q.enqueue({ kind: 'webhook.process', payload: { webhook_ids: [] } });
  db.prepare(`UPDATE jobs SET state = 'dead', last_error = ? WHERE id = ?`).run(HOSTILE, id);
  return { ctx, p, m };
}

describe('hostile text on every screen', () => {
  it('the console draws names, notes, bodies and headers as visible escapes, never as controls', async () => {
    const dir = newDataDir();
    const { m } = await hostileScene(dir);
    const con = c!;
    await con.see('Queue');
    const walk: [string, () => Promise<unknown>][] = [
      ['overview', () => con.see('Partners under their low-balance threshold')],
      ['partners', async () => (await con.press('2'), con.see('SPENT TODAY'))],
      ['partner detail', async () => (await con.press(KEY.enter), con.see('RECENT LEDGER'))],
      ['ledger pages', async () => (await con.press('L'), con.see('Ledger of evil'))],
      ['gateways', async () => (await con.press(KEY.esc, KEY.esc, '3'), con.see('serves:'))],
      ['prices', async () => (await con.press('P'), con.see('Prices: the default'))],
      ['webhooks', async () => (await con.press(KEY.esc, '4'), con.see('NOTE'))],
      ['webhook detail', async () => (await con.press(KEY.up, KEY.up, KEY.enter), con.see('HEADERS'))],
      ['webhook detail 2', async () => (await con.press(KEY.esc, KEY.down, KEY.enter), con.see('BODY'))],
      ['messages', async () => (await con.press(KEY.esc, '5', '/', m.id, KEY.enter), con.see('1 message(s) found'))],
      ['message history', async () => (await con.press(KEY.enter), con.see('HISTORY'))],
      ['jobs', async () => (await con.press(KEY.esc, '6'), con.see('LAST ERROR'))],
    ];
    for (const [where, go] of walk) {
      await go();
      expectInert(con.frame(), where);
    }
    const all = con.written();
    expectInert(all, 'every frame');
    // Shown, as escapes a person can read.
    expect(all).toContain('Evil\\u001b[5m\\u001b]0;pwned\\u0007');
  }, 60_000);

  it('one sanitiser for both: C0, C1, bidi overrides and isolates become visible; tab and newline a space', () => {
    expect(safeLine('a\u202eb\u2066c\u2069d\u009be\x1bf\tg\nh')).toBe('a\\u202eb\\u2066c\\u2069d\\u009be\\u001bf g h');
    expect(terminalSafe('a\tb\nc\x1b[31m\u202e')).toBe('a\tb\nc\\u001b[31m\\u202e');
  });

  it("msgctl's text output: partner list, ledger list, messages list, webhooks log", async () => {
    const dir = newDataDir();
    await hostileScene(dir);
    c!.close();
    c = null;
    for (const args of [
      ['partner', 'list'],
      ['ledger', 'list', 'evil'],
      ['messages', 'list', '--partner', 'evil'],
      ['webhooks', 'log'],
    ]) {
      const r = await runCli(args, { dataDir: dir });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      expectInert(r.stdout.replace(/\n/g, ''), `msgctl ${args.join(' ')}`);
      expect(r.stdout, `msgctl ${args.join(' ')}`).not.toContain('NEWLINE\n');
      if (args[0] === 'partner') {
        // One partner, one row: the header and acme's line, its newline shown as a space.
        expect(r.stdout.trim().split('\n')).toHaveLength(2);
      }
    }
  }, 60_000);
});
