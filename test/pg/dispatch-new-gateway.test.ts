import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setPrice } from '../../src/core/prices.js';
import { sql } from '../../src/db/sql.js';
import { parseMoney } from '../../src/lib/money.js';
import { SMS, sandboxPartner, send } from '../helpers/gateways.js';
import { balanceOf, ledgerOf, waitStatus } from '../helpers/rows.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

// On PostgreSQL the dispatcher reads the gateways through the store before a claim
// (GatewayBook.load) and then brings the cluster's gateway lines up to date, one transaction per
// gateway, before it claims. A gateway made meanwhile, and a message accepted on it, are in the
// claim but not in what was read: that message must still go out, not fail as if its gateway
// had been removed (which refunds it: a paid send that never leaves).
//
// The worker is held in the lines' update by a lock of the test's own on one line, so the
// gateway and the message come after its read of the gateways whatever the machine's timing.

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.stop();
});

const SMS_BODY = { to: '+14155550123', text: 'Your code is 1234' };

/** Runs `fn` while the test holds `gatewayId`'s line locked; resolves once a statement of msgd's waits for it. */
async function whileLineHeld<T>(gatewayId: string, fn: () => Promise<T>): Promise<T> {
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const holder = s.ctx.store.transaction(async (tx) => {
    await tx.all(sql`SELECT gateway_id FROM gateway_lines WHERE gateway_id = ${gatewayId} FOR UPDATE`);
    locked();
    await released;
  });
  await isLocked;
  try {
    return await fn();
  } finally {
    release();
    await holder;
  }
}

/** Waits until a statement on this database waits for a lock (the worker at the held line). */
async function aStatementWaits(): Promise<void> {
  await waitFor(
    async () =>
      Number(
        (await s.ctx.store.get<{ n: number }>(
          sql`SELECT CAST(count(*) AS BIGINT) AS n FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        ))!.n,
      ) > 0,
    'the worker to wait for the held line',
    10_000,
  );
}

describe('dispatch on PostgreSQL: a gateway newer than the worker read', () => {
  it('a message on a gateway made between the read of the gateways and the claim is sent, not refunded', async () => {
    // A first partner's message goes out: its gateway has a line the test can hold.
    const a = await sandboxPartner(s.ctx, { balance: '1', channels: ['sms'], prices: { sms: '0.01' } });
    const first = await send(s.url, SMS, SMS_BODY, a.token);
    expect(first.status).toBe(200);
    await waitStatus(s.ctx, first.body.id, 'sent');

    const b = await whileLineHeld(a.gateways.sms, async () => {
      // A settings change: the worker reads the gateways again before its next claim, then
      // updates the lines and stops at the held one.
      await setPrice(s.ctx, { channel: 'sms', amount: parseMoney('0.02'), partner: a.partnerId }, 'test');
      await aStatementWaits();
      // Meanwhile: a new partner on a new gateway sends.
      const b = await sandboxPartner(s.ctx, { balance: '1', channels: ['sms'], prices: { sms: '0.01' } });
      const r = await send(s.url, SMS, SMS_BODY, b.token);
      expect(r.status).toBe(200);
      return { ...b, messageId: r.body.id as string };
    });

    const m = await waitStatus(s.ctx, b.messageId, ['sent', 'failed']);
    expect({ status: m.status, error: m.error_code }).toEqual({ status: 'sent', error: null });
    expect((await ledgerOf(s.ctx, b.partnerId)).map((e) => e.kind)).toEqual(['topup', 'debit']);
    expect(await balanceOf(s.ctx, b.partnerId)).toBe(parseMoney('0.99'));
  });
});
