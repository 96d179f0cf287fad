import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { assignChannel } from '../../src/core/channels.js';
import { addGateway } from '../../src/core/gateways.js';
import { topup } from '../../src/core/ledger.js';
import { createPartner } from '../../src/core/partners.js';
import { setPrice } from '../../src/core/prices.js';
import { issueToken } from '../../src/core/tokens.js';
import { insertWebhookLogIn } from '../../src/core/webhook-log.js';
import { sql } from '../../src/db/sql.js';
import { newId } from '../../src/lib/ids.js';
import { queueOf } from '../../src/queue/of-ctx.js';
import { runCli } from '../helpers/cli.js';
import { terminalSafe } from '../../src/cli/output.js';
import { safeLine } from '../../src/lib/terminal-text.js';
import { outboundSms } from '../helpers/server.js';
import { FIXED_NOW, KEY, cleanupDirs, cliOptions, newDataDir, openConsole, type Console } from './helpers.js';

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
  const run = (q: Parameters<typeof ctx.store.run>[0]) => ctx.store.run(q);
  const gw = await addGateway(ctx, { kind: 'sandbox', name: 'sbx', settings: {} }, 'test');
  const p = await createPartner(ctx, { slug: 'evil', name: 'Evil' }, 'test');
  await topup(ctx, p.id, 1_000_000, 'note', 'test');
  const ch = await assignChannel(ctx, { partner: p.id, gateway: gw.id, type: 'sms', sender: '+15550001111' }, 'test');
  await issueToken(ctx, { partner: p.id, name: 'tok', scopes: ['messages:send'] }, 'test');
  await setPrice(ctx, { channel: 'sms', amount: 1000, partner: p.id }, 'test');
  const m = await outboundSms(ctx, p.id, { id: ch.id, gateway_id: gw.id, sender: ch.sender });
  // What the core functions refuse, written as an older version, an import or an attacker would have.
  await run(sql`UPDATE partners SET name = ${HOSTILE} WHERE id = ${p.id}`);
  await run(sql`UPDATE partners SET low_balance_threshold = 999000000 WHERE id = ${p.id}`);
  await run(sql`UPDATE ledger_entries SET note = ${HOSTILE} WHERE partner_id = ${p.id}`);
  await run(sql`UPDATE tokens SET name = ${HOSTILE} WHERE partner_id = ${p.id}`);
  await run(sql`UPDATE channels SET sender = ${HOSTILE} WHERE id = ${ch.id}`);
  await run(
    sql`UPDATE gateways SET name = ${HOSTILE}, settings = ${JSON.stringify({ delivery_delay_ms: 1, note: HOSTILE })}
        WHERE id = ${gw.id}`,
  );
  await run(
    sql`UPDATE messages SET "to" = ${HOSTILE}, "from" = ${HOSTILE}, error_code = 'E1', error_message = ${HOSTILE},
          provider_message_id = ${HOSTILE} WHERE id = ${m.id}`,
  );
  await insertWebhookLogIn(ctx.store, {
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
  await insertWebhookLogIn(ctx.store, {
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
  const q = queueOf(ctx, { now: () => FIXED_NOW });
  const { id } = await ctx.store.transaction((tx) =>
    q.enqueue(tx, { kind: 'webhook.process', payload: { webhook_ids: [] } }),
  );
  await run(sql`UPDATE jobs SET state = 'dead', last_error = ${HOSTILE} WHERE id = ${id}`);
  return { ctx, p, m };
}

describe('hostile text on every screen', () => {
  it('the console draws names, notes, bodies and headers as visible escapes, never as controls', async () => {
    const dir = await newDataDir();
    const { m } = await hostileScene(dir);
    const con = c!;
    await con.see('Queue');
    // Each step waits for rows, not only a header: a key on a list not loaded yet selects nothing.
    const walk: [string, () => Promise<unknown>][] = [
      ['overview', () => con.see('Partners under their low-balance threshold')],
      ['partners', async () => (await con.press('2'), con.see(/>evil\s/))],
      ['partner detail', async () => (await con.press(KEY.enter), con.see('RECENT LEDGER'))],
      ['ledger pages', async () => (await con.press('L'), con.see('Ledger of evil'))],
      ['gateways', async () => (await con.press(KEY.esc, KEY.esc, '3'), con.see('serves:'))],
      ['prices', async () => (await con.press('P'), con.see('Prices: the default'))],
      ['webhooks', async () => (await con.press(KEY.esc, '4'), con.see(/bad signature\s+rejected/))],
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
    const dir = await newDataDir();
    await hostileScene(dir);
    c!.close();
    c = null;
    for (const args of [
      ['partner', 'list'],
      ['ledger', 'list', 'evil'],
      ['messages', 'list', '--partner', 'evil'],
      ['webhooks', 'log'],
    ]) {
      const r = await runCli(args, cliOptions(dir));
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
