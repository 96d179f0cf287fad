import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptStats } from '../../src/core/send.js';
import { parseMoney } from '../../src/lib/money.js';
import { sql } from '../../src/db/sql.js';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { SMS, twilioGateway } from '../helpers/gateways.js';
import { balanceOf, ledgerOf, messagesOf } from '../helpers/rows.js';
import { expectMoneyConsistent } from '../helpers/expectations.js';

// Concurrent requests can never overspend: 1,000 sends at once against funds for exactly
// 100 messages. The accept path is group-committed, so many land in one transaction.

let s: TestServer;
let twilio: TwilioFake;
beforeAll(async () => {
  twilio = await startTwilioFake();
  s = await startTestServer();
});
afterAll(async () => {
  await s?.stop();
  await twilio?.close();
});

describe('race for the last funds', () => {
  it('1,000 concurrent sends against funds for 100: exactly 100 × 200 and 900 × 402', async () => {
    const price = parseMoney('0.0075');
    // A limit the burst cannot reach: this is about money, not the rate limiter.
    const p = await setupPartner(s.ctx, {
      balance: '0.75',
      credit: '0',
      prices: { sms: '0.0075' },
      rateLimitPerMinute: 1_000_000,
    });
    await twilioGateway(s.ctx, p.partnerId, twilio);
    const stats = acceptStats(s.rt.acceptDeps);
    const before = { ...stats };

    const pool = new Pool(s.url, { connections: 128, pipelining: 1 });
    try {
      const results = await Promise.all(
        Array.from({ length: 1000 }, async (_, i) => {
          const res = await pool.request({
            path: SMS,
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${p.token}` },
            body: JSON.stringify({ to: '+14155550123', text: `race ${i}` }),
          });
          return { status: res.statusCode, body: (await res.body.json()) as any };
        }),
      );
      const by = (st: number) => results.filter((r) => r.status === st);
      expect({
        ok: by(200).length,
        broke: by(402).length,
        other: results.length - by(200).length - by(402).length,
      }).toEqual({
        ok: 100,
        broke: 900,
        other: 0,
      });
      for (const r of by(402)) expect(r.body.error.code).toBe('insufficient_balance');
      const accepted = new Set(by(200).map((r) => r.body.id));
      expect(accepted.size).toBe(100);

      // Money: never below -credit (0), each debit has its message, the ledger adds up.
      expect(await balanceOf(s.ctx, p.partnerId)).toBe(0);
      const debits = (await ledgerOf(s.ctx, p.partnerId)).filter((e) => e.kind === 'debit');
      expect(debits).toHaveLength(100);
      for (const d of debits) {
        expect(d.amount).toBe(-price);
        expect(d.balance_after).toBeGreaterThanOrEqual(0);
      }
      const msgs = await messagesOf(s.ctx, p.partnerId);
      expect(new Set(msgs.map((m) => m.id))).toEqual(accepted);
      await expectMoneyConsistent(s.ctx, p.partnerId);
      // Group commit did group: every send went through the accept's batcher, in far fewer commits.
      expect(stats.items - before.items).toBe(1000);
      expect(stats.batches - before.batches).toBeLessThan(1000);

      // Every accepted message is dispatched exactly once.
      await waitFor(
        async () => (await messagesOf(s.ctx, p.partnerId)).every((m) => m.status === 'sent'),
        '100 messages sent',
        20_000,
      );
      expect(twilio.requests).toHaveLength(100);
      const bodies = twilio.requests.map((r) => r.body.Body).sort();
      expect(new Set(bodies).size).toBe(100);
      expect(bodies).toEqual(msgs.map((m) => JSON.parse(m.content).text).sort());
      const left = (await s.ctx.store.get<{ n: number }>(
        sql`SELECT COUNT(*) AS n FROM jobs WHERE kind = 'message.dispatch'`,
      ))!;
      expect(left.n).toBe(0);
    } finally {
      await pool.close();
    }
  }, 60_000);
});
