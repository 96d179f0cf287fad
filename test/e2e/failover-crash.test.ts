import { describe, expect, it } from 'vitest';
import { addFallback } from '../../src/core/channels.js';
import { addGateway } from '../../src/core/gateways.js';
import { verifyLedger } from '../../src/core/ledger.js';
import { messageHistoryIn } from '../../src/core/messages.js';
import { setPrice } from '../../src/core/prices.js';
import { parseMoney } from '../../src/lib/money.js';
import { startTwilioFake } from '../fakes/twilio.js';
import { SMS, sender, TWILIO_SID, TWILIO_TOKEN } from '../helpers/gateways.js';
import { balanceOf, ledgerOf, messagesOf } from '../helpers/rows.js';
import { waitFor, waitForExit } from '../helpers/wait.js';
import { cleanupAfterEach, inspect, prepare, startMsgd } from './child.js';

// kill -9 while messages are on the wire to the fallback they moved to: after the restart each
// is sent again through the fallback only (flagged, since the first call may have arrived), never
// through the primary, and the price difference the move debited is in the ledger exactly once.

const CONFIG = {
  jobs: { leaseSeconds: 5, lifelineIntervalSeconds: 1, backoffBaseMs: 50, backoffCapMs: 1000 },
  dispatch: { timeoutMs: 10_000 },
};

const cleanup = cleanupAfterEach();

describe('crash: kill -9 during failover', () => {
  it('messages on the wire to the fallback at the kill go out through it again, charged its price once', async () => {
    const primary = cleanup.fake(await startTwilioFake());
    const backup = cleanup.fake(await startTwilioFake());
    backup.addAccount(TWILIO_SID, TWILIO_TOKEN);
    backup.latencyMs = 30_000;
    const prep = cleanup.prep(await prepare(primary, CONFIG, { balance: '10', price: '0.01' }));
    let view = await inspect(prep);
    let backupId: string;
    try {
      const gw = await addGateway(
        view.ctx,
        {
          kind: 'twilio',
          name: 'tw-backup',
          settings: { base_url: backup.url, account_sid: TWILIO_SID, rate_per_second: 10_000 },
          secrets: { auth_token: TWILIO_TOKEN },
        },
        'test',
      );
      backupId = gw.id;
      await addFallback(
        view.ctx,
        { partner: prep.partner.partnerId, type: 'sms', gateway: gw.id, sender: sender('sms') },
        'test',
      );
      await setPrice(view.ctx, { channel: 'sms', amount: parseMoney('0.025'), gateway: gw.id }, 'test');
    } finally {
      await view.close();
    }
    await primary.down();

    const first = cleanup.child(await startMsgd(prep));
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${first.url}${SMS}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${prep.partner.token}` },
        body: JSON.stringify({ to: '+14155550123', text: `crash ${i}` }),
      });
      expect(res.status).toBe(200);
      ids.push(((await res.json()) as { id: string }).id);
    }
    await waitFor(() => backup.requests.length === 5, 'the 5 moved messages on the wire to the fallback', 15_000);
    first.child.kill('SIGKILL');
    expect((await waitForExit(first.child)).signal).toBe('SIGKILL');

    backup.latencyMs = 0;
    const second = cleanup.child(await startMsgd(prep));
    view = await inspect(prep);
    try {
      await waitFor(
        async () => (await messagesOf(view.ctx, prep.partner.partnerId)).every((m) => m.status === 'sent'),
        'every message sent after the restart',
        30_000,
        100,
      );
      const rows = await messagesOf(view.ctx, prep.partner.partnerId);
      expect(rows.map((m) => m.id).sort()).toEqual([...ids].sort());
      // The primary never had them; the fallback had each twice (the call at the kill, then again).
      expect(primary.requests).toHaveLength(0);
      const calls = new Map<string, number>();
      for (const r of backup.requests) calls.set(r.body.Body, (calls.get(r.body.Body) ?? 0) + 1);
      expect([...calls.entries()].sort()).toEqual(ids.map((_, i) => [`crash ${i}`, 2]));
      for (const m of rows) {
        expect(m.gateway_id).toBe(backupId);
        expect(m.dispatch_uncertain).toBe(1);
        expect(m.price).toBe(parseMoney('0.025'));
        expect((await messageHistoryIn(view.ctx.store, m.id)).filter((h) => h.status === 'rerouted')).toHaveLength(1);
        // Charged 0.01 at accept and the 0.015 difference once, before the fallback was called.
        expect(
          (await ledgerOf(view.ctx, prep.partner.partnerId))
            .filter((e) => e.message_id === m.id)
            .map((e) => [e.kind, e.amount]),
        ).toEqual([
          ['debit', -parseMoney('0.01')],
          ['debit', -parseMoney('0.015')],
        ]);
      }
      expect(await balanceOf(view.ctx, prep.partner.partnerId)).toBe(parseMoney('10') - 5 * parseMoney('0.025'));
      expect((await verifyLedger(view.ctx)).ok).toBe(true);
    } finally {
      await view.close();
    }
    second.child.kill('SIGTERM');
    expect((await waitForExit(second.child, 15_000)).code).toBe(0);
  }, 90_000);
});
