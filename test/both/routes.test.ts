import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  mayHaveReachedProviderIn,
  nextRoutesIn,
  noteCircuitWaitIn,
  type RouteTarget,
  rerouteIn,
} from '../../src/core/routes.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { message, partner } from './read-fixtures.js';

// Failover as a partner sees it, on both stores: a message moves to the next gateway of its
// order with that gateway's price (the difference debited or refunded), its history and a
// message.rerouted event; a dearer route the funds do not cover fails it, refunded.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await partner(t, 'prt_a');
  await t.exec(`UPDATE partners SET balance = 100000, credit_limit = 0 WHERE id = 'prt_a'`);
  await t.exec(`INSERT INTO gateways (id, kind, name, secrets, status, created_at, updated_at) VALUES
    ('gw_main', 'twilio', 'tw-main', '', 'active', 0, 0), ('gw_back', 'twilio', 'tw-back', '', 'active', 0, 0),
    ('gw_off', 'twilio', 'tw-off', '', 'disabled', 0, 0)`);
  await t.exec(`INSERT INTO channels (id, partner_id, gateway_id, type, sender, status, position, created_at, updated_at) VALUES
    ('ch_main', 'prt_a', 'gw_main', 'sms', '+15550000001', 'active', 0, 0, 0),
    ('ch_off', 'prt_a', 'gw_off', 'sms', '+15550000003', 'active', 1, 0, 0),
    ('ch_back', 'prt_a', 'gw_back', 'sms', '+15550000002', 'active', 2, 0, 0)`);
  await t.exec(`INSERT INTO prices (id, channel_type, partner_id, gateway_id, category, amount, created_at, updated_at) VALUES
    ('pr_1', 'sms', '', '', '', 7500, 0, 0), ('pr_2', 'sms', '', 'gw_back', '', 9000, 0, 0)`);
  await message(t, { id: 'msg_1', partner: 'prt_a', channel: 'sms', channelId: 'ch_main', status: 'sending', at: 1 });
  await t.exec(`UPDATE messages SET gateway_id = 'gw_main', dispatch_in_flight = 1 WHERE id = 'msg_1'`);
});
afterEach(() => t.close());

const target: RouteTarget = {
  id: 'msg_1',
  partner_id: 'prt_a',
  channel_type: 'sms',
  channel_id: 'ch_main',
  gateway_id: 'gw_main',
};
const why = { code: 'network_error', message: 'connection refused' };
const row = async () =>
  (await t.ctx.store.get<Record<string, unknown>>(
    sql`SELECT gateway_id, channel_id, "from", price, status, error_code, dispatch_in_flight, dispatch_uncertain, refunded
          FROM messages WHERE id = 'msg_1'`,
  ))!;
const balance = async () =>
  (await t.ctx.store.get<{ balance: number }>(sql`SELECT balance FROM partners WHERE id = 'prt_a'`))!.balance;

async function moveToNext() {
  return t.ctx.store.transaction(async (tx) => {
    const [next] = await nextRoutesIn(tx, target, () => true);
    return rerouteIn(tx, t.ctx, target, { id: 'gw_main', name: 'tw-main' }, next, why);
  });
}

describe('failover to the next route', () => {
  it('lists the active, usable gateways after the current one, in order', async () => {
    expect((await nextRoutesIn(t.ctx.store, target, () => true)).map((c) => c.gateway_id)).toEqual(['gw_back']);
    expect(await nextRoutesIn(t.ctx.store, target, (id) => id !== 'gw_back')).toEqual([]);
    expect(await nextRoutesIn(t.ctx.store, { ...target, channel_type: 'whatsapp' }, () => true)).toEqual([]);
  });

  it('moves the message to the next gateway at its price: the difference debited, its history and event', async () => {
    t.clock.now = 50_000;
    expect(await moveToNext()).toEqual({ kind: 'rerouted', difference: 1_500, price: 9_000 });
    expect(await row()).toMatchObject({
      gateway_id: 'gw_back',
      channel_id: 'ch_back',
      from: '+15550000002',
      price: 9_000,
      status: 'queued',
      error_code: null,
      dispatch_in_flight: 0,
    });
    expect(await balance()).toBe(98_500);
    const ledger = await t.ctx.store.all<{ kind: string; amount: number; note: string }>(
      sql`SELECT kind, amount, note FROM ledger_entries WHERE message_id = 'msg_1' ORDER BY id`,
    );
    expect(ledger).toEqual([
      { kind: 'debit', amount: -1_500, note: 'rerouted tw-main → tw-back (network_error): price difference' },
    ]);
    const history = await t.ctx.store.all<{ status: string; error_code: string; error_message: string }>(
      sql`SELECT status, error_code, error_message FROM message_status_history WHERE message_id = 'msg_1'`,
    );
    expect(history).toEqual([
      { status: 'rerouted', error_code: 'network_error', error_message: 'tw-main → tw-back: connection refused' },
    ]);
    const [event] = await t.ctx.store.all<{ type: string; payload: string }>(
      sql`SELECT type, payload FROM events WHERE partner_id = 'prt_a'`,
    );
    expect(event.type).toBe('message.rerouted');
    expect(JSON.parse(event.payload)).toMatchObject({
      message_id: 'msg_1',
      from_channel_id: 'ch_main',
      channel_id: 'ch_back',
      position: 2,
      provider: 'twilio',
      sender: '+15550000002',
      reason: why,
      occurred_at: new Date(50_000).toISOString(),
    });
  });

  it('fails and refunds a message whose dearer fallback the funds do not cover', async () => {
    await t.exec(`UPDATE partners SET balance = 1000 WHERE id = 'prt_a'`);
    expect(await moveToNext()).toEqual({ kind: 'failed' });
    expect(await row()).toMatchObject({
      gateway_id: 'gw_main',
      status: 'failed',
      error_code: 'insufficient_balance',
      refunded: 1,
    });
    expect(await balance()).toBe(8_500);
  });

  it('leaves a message a report settled meanwhile where it is', async () => {
    await t.exec(`UPDATE messages SET status = 'delivered' WHERE id = 'msg_1'`);
    expect(await moveToNext()).toEqual({ kind: 'settled' });
    expect((await row()).gateway_id).toBe('gw_main');
    expect(await balance()).toBe(100_000);
  });

  it('keeps a message whose call may have reached the provider, flagged, waiting for its circuit', async () => {
    expect(await mayHaveReachedProviderIn(t.ctx.store, 'msg_1', false)).toBe(false);
    await t.ctx.store.transaction((tx) => noteCircuitWaitIn(tx, t.ctx, 'msg_1', 'tw-main: its circuit is open'));
    expect(await row()).toMatchObject({
      status: 'queued',
      error_code: 'gateway_circuit_open',
      dispatch_in_flight: 0,
      dispatch_uncertain: 1,
    });
    expect(await mayHaveReachedProviderIn(t.ctx.store, 'msg_1', false)).toBe(true);
  });
});
