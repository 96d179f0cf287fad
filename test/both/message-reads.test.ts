import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  findOperatorMessages,
  listOperatorMessages,
  messageIdByProviderId,
  messageStatusByProviderId,
  messageStatusOf,
} from '../../src/core/message-reads.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { contact, conversation, idAt, message, partner } from './read-fixtures.js';

// The operator's message list across partners (msgctl messages list), the console's Find and
// the webhook tail's lookups of the message a report names, on both stores.

const T0 = Date.UTC(2026, 0, 1);
const id = (n: number) => idAt('msg', T0 + n * 1000);

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
  await partner(t, 'p1');
  await partner(t, 'p2');
  const m = (n: number, p: string, status: string, uncertain = false) =>
    message(t, { id: id(n), partner: p, channel: 'sms', status, uncertain, at: T0 + n * 1000 });
  await m(1, 'p1', 'delivered');
  await m(2, 'p2', 'failed');
  await m(3, 'p1', 'bounced');
  await m(4, 'p1', 'sent', true);
  await m(5, 'p2', 'delivered', true);
});
afterEach(() => t.close());

const ids = async (f: Parameters<typeof listOperatorMessages>[1]) =>
  (await listOperatorMessages(t.ctx, f)).map((m) => m.id);

describe('the operator’s message list', () => {
  it('lists every partner’s messages newest first, filtered by partner, status, failure and doubt', async () => {
    expect(await ids({ limit: 10 })).toEqual([id(5), id(4), id(3), id(2), id(1)]);
    expect(await ids({ limit: 2 })).toEqual([id(5), id(4)]);
    expect(await ids({ partnerId: 'p1', limit: 10 })).toEqual([id(4), id(3), id(1)]);
    expect(await ids({ status: 'delivered', limit: 10 })).toEqual([id(5), id(1)]);
    expect(await ids({ failed: true, limit: 10 })).toEqual([id(3), id(2)]);
    expect(await ids({ uncertain: true, limit: 10 })).toEqual([id(5), id(4)]);
    expect(await ids({ partnerId: 'p2', uncertain: true, limit: 10 })).toEqual([id(5)]);
    const [row] = await listOperatorMessages(t.ctx, { partnerId: 'p1', status: 'sent', limit: 1 });
    expect(row).toMatchObject({
      id: id(4),
      partner_id: 'p1',
      dispatch_uncertain: 1,
      price: 7500,
      created_at: T0 + 4000,
    });
  });
});

describe('the console’s Find', () => {
  const find = async (q: Parameters<typeof findOperatorMessages>[1]) =>
    (await findOperatorMessages(t.ctx, q)).map((m) => m.id);

  beforeEach(async () => {
    await contact(t, { id: 'ct_1', partner: 'p1', phone: '+14155550123', email: 'ann@example.com' });
    await contact(t, { id: 'ct_2', partner: 'p2', phone: '+14155550123' });
    await conversation(t, { id: 'cv_1', partner: 'p1', contact: 'ct_1', channel: 'sms', updatedAt: T0 });
    await conversation(t, { id: 'cv_2', partner: 'p1', contact: 'ct_1', channel: 'email', updatedAt: T0 });
    await conversation(t, { id: 'cv_3', partner: 'p2', contact: 'ct_2', channel: 'sms', updatedAt: T0 });
    const m = (n: number, p: string, conv: string, status: string) =>
      message(t, { id: id(n), partner: p, channel: 'sms', conversation: conv, status, at: T0 + n * 1000 });
    await m(6, 'p1', 'cv_1', 'delivered');
    await m(7, 'p1', 'cv_2', 'failed');
    await m(8, 'p2', 'cv_3', 'delivered');
    await m(9, 'p1', 'cv_1', 'failed');
  });

  it('finds by id, by partner (slug or id) and status, by recipient across partners, newest first', async () => {
    expect(await find({ id: ` ${id(3)} ` })).toEqual([id(3)]);
    expect(await find({ id: 'msg_none' })).toEqual([]);
    expect(await find({ partner: 'p2' })).toEqual([id(8), id(5), id(2)]);
    expect(await find({ partner: 'p1', status: 'failed' })).toEqual([id(9), id(7)]);
    expect(await find({ status: 'delivered' })).toEqual([id(8), id(6), id(5), id(1)]);
    expect(await find({})).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1].map(id));
    expect(await find({ recipient: '+14155550123' })).toEqual([id(9), id(8), id(7), id(6)]);
    expect(await find({ recipient: '+14155550123', partner: 'p2' })).toEqual([id(8)]);
    expect(await find({ recipient: 'ANN@example.com', status: 'failed' })).toEqual([id(9), id(7)]);
    expect(await find({ recipient: '+19999999999' })).toEqual([]);
    const [row] = await findOperatorMessages(t.ctx, { id: id(4) });
    expect(row).toMatchObject({ id: id(4), partner_id: 'p1', status: 'sent', price: 7500, created_at: T0 + 4000 });
  });

  it('refuses an unknown status or partner', async () => {
    await expect(find({ status: 'lost' })).rejects.toMatchObject({
      code: 'invalid_request',
      details: [{ field: 'status' }],
    });
    await expect(find({ partner: 'nobody' })).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('the message a provider report names', () => {
  it('by msgd’s id or the provider’s indexed id, with its status now', async () => {
    await message(t, {
      id: id(10),
      partner: 'p1',
      channel: 'sms',
      status: 'sent',
      providerId: 'SM1',
      indexed: true,
      at: T0,
    });
    await message(t, { id: id(11), partner: 'p1', channel: 'sms', status: 'sent', providerId: 'SM2', at: T0 });
    expect(await messageStatusOf(t.ctx, id(2))).toEqual({ id: id(2), status: 'failed' });
    expect(await messageStatusOf(t.ctx, 'msg_none')).toBeUndefined();
    expect(await messageStatusByProviderId(t.ctx, 'SM1')).toEqual({ id: id(10), status: 'sent' });
    expect(await messageIdByProviderId(t.ctx, 'SM1')).toBe(id(10));
    // Not indexed: no report is matched to it by the provider's id.
    expect(await messageStatusByProviderId(t.ctx, 'SM2')).toBeUndefined();
    expect(await messageIdByProviderId(t.ctx, 'SM2')).toBeUndefined();
  });
});
