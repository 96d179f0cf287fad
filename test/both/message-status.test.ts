import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { emitEventIn } from '../../src/core/events.js';
import {
  applyStatusIn,
  claimForDispatchIn,
  clearDispatchErrorIn,
  flagUncertainIn,
  HELD_AFTER_RESTORE,
  holdAfterRestoreIn,
  holdForDisabledGatewayIn,
  markDispatchInFlightIn,
  markSentIn,
  claimManyForDispatchIn,
  markManyInFlightIn,
  noteDispatchRetryIn,
  releaseAfterRestoreIn,
  requeueForRateIn,
  type StatusChange,
} from '../../src/core/message-status.js';
import { getMessageRowIn, getMessageStateIn, recordHistoryIn } from '../../src/core/messages.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { message, partner } from './read-fixtures.js';

// A message's statuses as a partner sees them, on both stores: what the row says, the history
// it keeps, the events it is told, and the money moved by failures and late deliveries.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await partner(t, 'prt_a');
  await t.exec(`UPDATE partners SET balance = 100000, credit_limit = 0 WHERE id = 'prt_a'`);
  // An endpoint taking every event: status events are stored pending fan-out.
  await t.exec(
    `INSERT INTO webhook_endpoints (id, partner_id, url, secret, status, created_at, updated_at)
     VALUES ('wh_a', 'prt_a', 'https://partner.example/hook', 'sealed', 'enabled', 0, 0)`,
  );
});
afterEach(() => t.close());

const ID = 'msg_0000000000000001';

async function send(status = 'sending', extra: Partial<Parameters<typeof message>[1]> = {}) {
  await message(t, { id: ID, partner: 'prt_a', channel: 'sms', status, at: 1_000, ...extra });
}

/** The status change in a transaction of its own, as a provider report or dispatch makes it. */
async function apply(change: StatusChange) {
  return t.ctx.store.transaction(async (tx) => {
    const m = (await getMessageStateIn(tx, ID))!;
    return applyStatusIn(tx, t.ctx, m, change);
  });
}

const row = async () => (await getMessageRowIn(t.ctx.store, ID))!;
const history = () =>
  t.ctx.store.all<{ status: string; provider_status: string | null; error_code: string | null; ignored: number }>(
    sql`SELECT status, provider_status, error_code, ignored FROM message_status_history WHERE message_id = ${ID} ORDER BY id`,
  );
const events = async () =>
  (
    await t.ctx.store.all<{ type: string; payload: string; fanned_out: number }>(
      sql`SELECT type, payload, fanned_out FROM events WHERE partner_id = 'prt_a' ORDER BY created_at, id`,
    )
  ).map(
    (e) =>
      ({ ...(JSON.parse(e.payload) as Record<string, unknown>), type: e.type, fannedOut: e.fanned_out }) as Record<
        string,
        unknown
      > & { type: string; fannedOut: number },
  );
const balance = async () =>
  (await t.ctx.store.get<{ balance: number }>(sql`SELECT balance FROM partners WHERE id = 'prt_a'`))!.balance;
const ledger = () =>
  t.ctx.store.all<{ kind: string; amount: number; balance_after: number; message_id: string; note: string }>(
    sql`SELECT kind, amount, balance_after, message_id, note FROM ledger_entries WHERE partner_id = 'prt_a' ORDER BY id`,
  );

describe('applyStatusIn', () => {
  it('moves sent → delivered → read, with a history row and an event for each', async () => {
    await send();
    t.clock.now = 5_000;
    const sent = await apply({ status: 'sent', providerMessageId: 'SM1', namedInReports: true, occurredAt: 4_000 });
    expect(sent).toEqual({ changed: true, from: 'sending', to: 'sent', refunded: false, charged: false });
    t.clock.now = 6_000;
    await apply({ status: 'delivered', providerStatus: 'delivered', occurredAt: 5_500 });
    t.clock.now = 7_000;
    await apply({ status: 'read', providerStatus: 'read', occurredAt: 6_500 });

    expect(await row()).toMatchObject({
      status: 'read',
      provider_message_id: 'SM1',
      provider_id_indexed: 0,
      sent_at: 4_000,
      updated_at: 7_000,
      error_code: null,
      refunded: 0,
    });
    expect(await history()).toEqual([
      { status: 'sent', provider_status: null, error_code: null, ignored: 0 },
      { status: 'delivered', provider_status: 'delivered', error_code: null, ignored: 0 },
      { status: 'read', provider_status: 'read', error_code: null, ignored: 0 },
    ]);
    const evs = await events();
    expect(evs.map((e) => [e.type, e.previous_status, e.status, e.occurred_at, e.fannedOut])).toEqual([
      ['message.sent', 'sending', 'sent', new Date(4_000).toISOString(), 0],
      ['message.delivered', 'sent', 'delivered', new Date(5_500).toISOString(), 0],
      ['message.read', 'delivered', 'read', new Date(6_500).toISOString(), 0],
    ]);
    expect(evs[1]).toMatchObject({ message_id: ID, channel: 'sms', to: '+15550001111', error: null });
    expect(await balance()).toBe(100_000);
  });

  it('keeps a late "sent" after "delivered" in history only, ignored, and takes its provider id', async () => {
    await send();
    await apply({ status: 'delivered', providerStatus: 'delivered' });
    const late = await apply({ status: 'sent', providerMessageId: 'SM9', namedInReports: false });
    expect(late).toEqual({ changed: false, from: 'delivered', to: 'delivered', refunded: false, charged: false });
    expect(await row()).toMatchObject({ status: 'delivered', provider_message_id: 'SM9', provider_id_indexed: 1 });
    expect((await history()).map((h) => [h.status, h.ignored])).toEqual([
      ['delivered', 0],
      ['sent', 1],
    ]);
    expect((await events()).map((e) => e.type)).toEqual(['message.delivered']);
  });

  it('fails with its error and refunds once; a delivery after it charges again', async () => {
    await send('sent', { providerId: 'SM1', indexed: true });
    t.clock.now = 9_000;
    const failed = await apply({
      status: 'failed',
      errorCode: '30003',
      errorMessage: 'Unreachable destination handset',
      refundOnFailure: true,
    });
    expect(failed).toMatchObject({ changed: true, from: 'sent', to: 'failed', refunded: true });
    expect(await row()).toMatchObject({
      status: 'failed',
      error_code: '30003',
      error_message: 'Unreachable destination handset',
      refunded: 1,
    });
    expect(await balance()).toBe(107_500);
    // Failed again (a second report): no second refund.
    const again = await apply({ status: 'undelivered', errorCode: '30005', refundOnFailure: true });
    expect(again.refunded).toBe(false);
    expect(await balance()).toBe(107_500);

    const delivered = await apply({ status: 'delivered', providerStatus: 'delivered' });
    expect(delivered).toMatchObject({ changed: true, to: 'delivered', charged: true });
    expect(await row()).toMatchObject({ status: 'delivered', error_code: null, error_message: null, refunded: 0 });
    expect(await balance()).toBe(100_000);
    expect(await ledger()).toEqual([
      { kind: 'refund', amount: 7_500, balance_after: 107_500, message_id: ID, note: 'refund: failed (30003)' },
      {
        kind: 'debit',
        amount: -7_500,
        balance_after: 100_000,
        message_id: ID,
        note: 'charged again: delivered after the refund',
      },
    ]);
    const failedEvent = (await events()).find((e) => e.type === 'message.failed')!;
    expect(failedEvent.error).toEqual({ code: '30003', message: 'Unreachable destination handset' });
  });

  it('leaves a refunded message refunded when funds no longer cover the charge', async () => {
    await send('sent');
    await apply({ status: 'failed', errorCode: 'x', refundOnFailure: true });
    await t.exec(`UPDATE partners SET balance = 0 WHERE id = 'prt_a'`);
    const delivered = await apply({ status: 'delivered' });
    expect(delivered).toMatchObject({ changed: true, charged: false });
    expect(await row()).toMatchObject({ status: 'delivered', refunded: 1 });
    expect(await balance()).toBe(0);
  });

  it('writes nothing when its transaction rolls back', async () => {
    await send();
    await expect(
      t.ctx.store.transaction(async (tx) => {
        const m = (await getMessageStateIn(tx, ID))!;
        await applyStatusIn(tx, t.ctx, m, { status: 'failed', errorCode: 'x', refundOnFailure: true });
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect((await row()).status).toBe('sending');
    expect(await history()).toEqual([]);
    expect(await events()).toEqual([]);
    expect(await balance()).toBe(100_000);
  });
});

describe("dispatch's marks", () => {
  it("claims a batch's queued messages in one statement, and marks them in flight in another", async () => {
    await send('queued');
    const d = t.ctx.store.dialect;
    const claimed = await t.ctx.store.transaction((tx) => claimManyForDispatchIn(tx, d, [ID, 'msg_none'], 2_000));
    expect([...claimed.keys()]).toEqual([ID]);
    expect(claimed.get(ID)).toMatchObject({ id: ID, status: 'sending', dispatch_in_flight: 0, channel_type: 'sms' });
    // Not queued any more: left out, nothing written.
    expect((await t.ctx.store.transaction((tx) => claimManyForDispatchIn(tx, d, [ID], 3_000))).size).toBe(0);
    await t.ctx.store.transaction((tx) => markManyInFlightIn(tx, d, [ID]));
    expect(await row()).toMatchObject({ status: 'sending', updated_at: 2_000, dispatch_in_flight: 1 });
  });

  it('claims a queued message once, marks it in flight, and sends it, clearing a retry note', async () => {
    await send('queued');
    const claimed = await t.ctx.store.transaction((tx) => claimForDispatchIn(tx, ID, 2_000));
    expect(claimed).toMatchObject({ id: ID, status: 'sending', dispatch_in_flight: 0, channel_type: 'sms' });
    expect(await t.ctx.store.transaction((tx) => claimForDispatchIn(tx, ID, 2_000))).toBeUndefined();
    await t.ctx.store.transaction(async (tx) => {
      await markDispatchInFlightIn(tx, ID);
      await noteDispatchRetryIn(tx, t.ctx, ID, '429', 'rate limited');
    });
    expect(await row()).toMatchObject({ error_code: '429', error_message: 'rate limited', dispatch_in_flight: 0 });
    await t.ctx.store.transaction((tx) => markDispatchInFlightIn(tx, ID));
    t.clock.now = 3_000;
    const sent = await t.ctx.store.transaction((tx) =>
      markSentIn(tx, t.ctx, claimed!, {
        providerMessageId: 'SM1',
        namedInReports: true,
        providerStatus: 'queued',
        occurredAt: 2_500,
        uncertain: true,
      }),
    );
    expect(sent).toBe(true);
    expect(await row()).toMatchObject({
      status: 'sent',
      provider_message_id: 'SM1',
      provider_id_indexed: 0,
      error_code: null,
      error_message: null,
      dispatch_in_flight: 0,
      dispatch_uncertain: 1,
      sent_at: 2_500,
    });
    expect(await history()).toEqual([{ status: 'sent', provider_status: 'queued', error_code: null, ignored: 0 }]);
    expect((await events()).map((e) => [e.type, e.previous_status])).toEqual([['message.sent', 'sending']]);
    // Not 'sending' any more: nothing written.
    const twice = await t.ctx.store.transaction((tx) =>
      markSentIn(tx, t.ctx, claimed!, {
        providerMessageId: 'SM2',
        namedInReports: true,
        providerStatus: null,
        occurredAt: 2_600,
        uncertain: false,
      }),
    );
    expect(twice).toBe(false);
    expect((await row()).provider_message_id).toBe('SM1');
  });

  it('puts a message waiting for its rate or a disabled gateway back to queued, saying why', async () => {
    await send('sending');
    await t.ctx.store.transaction((tx) => holdForDisabledGatewayIn(tx, t.ctx, ID, 'gateway tw is disabled'));
    expect(await row()).toMatchObject({
      status: 'queued',
      error_code: 'gateway_disabled',
      error_message: 'gateway tw is disabled',
    });
    await t.ctx.store.transaction((tx) => claimForDispatchIn(tx, ID, 1));
    await t.ctx.store.transaction((tx) => requeueForRateIn(tx, t.ctx, ID));
    expect(await row()).toMatchObject({ status: 'queued', error_code: null, error_message: null });
    await t.ctx.store.transaction(async (tx) => {
      await flagUncertainIn(tx, t.ctx, ID);
      await noteDispatchRetryIn(tx, t.ctx, ID, 'timeout', 'no answer');
      await clearDispatchErrorIn(tx, ID);
    });
    expect(await row()).toMatchObject({ status: 'queued', dispatch_uncertain: 1, error_code: null });
  });

  it('holds a restored message until it is released, then flags it a possible duplicate', async () => {
    await send('sending');
    expect(await t.ctx.store.transaction((tx) => holdAfterRestoreIn(tx, ID, 5))).toBe(true);
    expect(await row()).toMatchObject({ status: 'queued', error_code: HELD_AFTER_RESTORE, dispatch_uncertain: 0 });
    expect(await t.ctx.store.transaction((tx) => releaseAfterRestoreIn(tx, ID, 6))).toBe(true);
    expect(await row()).toMatchObject({ status: 'queued', error_code: null, dispatch_uncertain: 1, updated_at: 6 });
    expect(await t.ctx.store.transaction((tx) => releaseAfterRestoreIn(tx, ID, 7))).toBe(false);
    await t.exec(`UPDATE messages SET status = 'delivered' WHERE id = '${ID}'`);
    expect(await t.ctx.store.transaction((tx) => holdAfterRestoreIn(tx, ID, 8))).toBe(false);
  });
});

describe('emitEventIn and recordHistoryIn', () => {
  it('stores an event pending fan-out only when an enabled endpoint subscribes to its type', async () => {
    await t.exec(`UPDATE webhook_endpoints SET events = '["message.failed"]' WHERE id = 'wh_a'`);
    t.clock.now = 42_000;
    const sent = await emitEventIn(t.ctx.store, t.ctx, 'prt_a', 'message.sent', { message_id: ID });
    const failed = await emitEventIn(t.ctx.store, t.ctx, 'prt_a', 'message.failed', { message_id: ID });
    expect(sent.payload).toEqual({
      id: sent.id,
      event: 'message.sent',
      created_at: new Date(42_000).toISOString(),
      message_id: ID,
    });
    expect((await events()).map((e) => [e.id, e.type, e.fannedOut])).toEqual([
      [sent.id, 'message.sent', 1],
      [failed.id, 'message.failed', 0],
    ]);
    await t.exec(`UPDATE webhook_endpoints SET status = 'disabled'`);
    await emitEventIn(t.ctx.store, t.ctx, 'prt_a', 'message.failed', { message_id: ID });
    expect((await events())[2].fannedOut).toBe(1);
  });

  it('records a history row with the provider status, error and time', async () => {
    await send();
    t.clock.now = 10;
    await recordHistoryIn(t.ctx.store, t.ctx, ID, 'failed', { errorCode: 'e1', providerStatus: 'rejected', at: 7 });
    const rows = await t.ctx.store.all<Record<string, unknown>>(
      sql`SELECT status, provider_status, error_code, ignored, occurred_at, created_at FROM message_status_history WHERE message_id = ${ID}`,
    );
    expect(rows).toEqual([
      { status: 'failed', provider_status: 'rejected', error_code: 'e1', ignored: 0, occurred_at: 7, created_at: 10 },
    ]);
  });
});
