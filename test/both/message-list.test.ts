import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findMessages, listMessages, type MessageFilter } from '../../src/core/message-list.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { allPages, contact, conversation, idAt, message, partner } from './read-fixtures.js';

// The partner's message list (GET /v1/messages, the console) and its lookup by id, on both
// stores: pages newest first that neither skip nor repeat, each filter on its index range,
// a customer's conversations merged into one list.

const T0 = Date.UTC(2026, 0, 1);
const id = (n: number) => idAt('msg', T0 + n * 1000);
const PHONE = '+14155552671';

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
  await partner(t, 'p1');
  await partner(t, 'p2');
  await contact(t, { id: 'ct_a', partner: 'p1', phone: PHONE });
  await contact(t, { id: 'ct_b', partner: 'p1', email: 'bob@example.com' });
  await contact(t, { id: 'ct_x', partner: 'p2', phone: PHONE });
  await conversation(t, { id: 'conv_a', partner: 'p1', contact: 'ct_a', channel: 'sms', updatedAt: T0 });
  await conversation(t, { id: 'conv_b', partner: 'p1', contact: 'ct_b', channel: 'email', updatedAt: T0 });
  await conversation(t, { id: 'conv_c', partner: 'p1', contact: 'ct_a', channel: 'whatsapp', updatedAt: T0 });
  await conversation(t, { id: 'conv_x', partner: 'p2', contact: 'ct_x', channel: 'sms', updatedAt: T0 });
  const a = { partner: 'p1', channel: 'sms', conversation: 'conv_a', contact: 'ct_a' };
  const b = { partner: 'p1', channel: 'email', conversation: 'conv_b', contact: 'ct_b' };
  const c = { partner: 'p1', channel: 'whatsapp', conversation: 'conv_c', contact: 'ct_a' };
  await message(t, { ...a, id: id(1), at: T0 + 1000 });
  await message(t, { ...b, id: id(2), status: 'failed', at: T0 + 2000 });
  await message(t, { ...c, id: id(3), direction: 'inbound', status: 'received', at: T0 + 3000 });
  await message(t, { ...a, id: id(4), status: 'scheduled', at: T0 + 4000 });
  await message(t, { ...a, id: id(5), status: 'failed', providerId: 'SMabc', indexed: true, at: T0 + 5000 });
  await message(t, { ...c, id: id(6), providerId: 'wamid.X', at: T0 + 6000 });
  await message(t, { ...b, id: id(7), at: T0 + 7000 });
  await message(t, { ...a, id: id(8), status: 'queued', at: T0 + 8000 });
  await message(t, {
    partner: 'p2',
    channel: 'sms',
    conversation: 'conv_x',
    contact: 'ct_x',
    id: id(9),
    providerId: 'SMabc',
    indexed: true,
    at: T0 + 9000,
  });
});
afterEach(() => t.close());

/** The ids of every page of the list, `limit` a page. */
async function ids(f: MessageFilter, limit: number) {
  const { rows, pages } = await allPages<{ id: string }, string>((after) => listMessages(t.ctx, 'p1', f, limit, after));
  return { ids: rows.map((r) => r.id), pages };
}

const seq = (...ns: number[]) => ns.map(id);

describe('the message list', () => {
  it('pages all of the partner’s messages newest first, none skipped or repeated, in full rows', async () => {
    expect(await ids({}, 3)).toEqual({ ids: seq(8, 7, 6, 5, 4, 3, 2, 1), pages: 3 });
    expect(await ids({}, 8)).toEqual({ ids: seq(8, 7, 6, 5, 4, 3, 2, 1), pages: 1 });
    const first = await listMessages(t.ctx, 'p1', {}, 1);
    expect(first.next).toBe(id(8));
    expect(first.rows[0]).toMatchObject({
      id: id(8),
      partner_id: 'p1',
      direction: 'outbound',
      channel_type: 'sms',
      conversation_id: 'conv_a',
      contact_id: 'ct_a',
      to: '+15550001111',
      from: '+15550002222',
      content: '{"kind":"text","text":"hi"}',
      status: 'queued',
      price: 7500,
      segments: 1,
      provider_id_indexed: 0,
      dispatch_uncertain: 0,
      created_at: T0 + 8000,
      deleted_at: null,
    });
  });

  it('filters by channel, status (failed and scheduled on their own indexes) and direction', async () => {
    expect((await ids({ channel: 'sms' }, 2)).ids).toEqual(seq(8, 5, 4, 1));
    expect((await ids({ status: 'failed' }, 1)).ids).toEqual(seq(5, 2));
    expect((await ids({ status: 'scheduled' }, 5)).ids).toEqual(seq(4));
    expect((await ids({ status: 'delivered' }, 2)).ids).toEqual(seq(7, 6, 1));
    expect((await ids({ direction: 'inbound' }, 5)).ids).toEqual(seq(3));
    expect((await ids({ channel: 'sms', status: 'failed' }, 5)).ids).toEqual(seq(5));
  });

  it('merges a customer’s conversations by their address, and keeps to one conversation when asked', async () => {
    expect(await ids({ recipient: PHONE }, 4)).toEqual({ ids: seq(8, 6, 5, 4, 3, 1), pages: 2 });
    expect((await ids({ recipient: ` ${PHONE} `, channel: 'whatsapp' }, 1)).ids).toEqual(seq(6, 3));
    expect((await ids({ recipient: 'Bob@Example.com' }, 5)).ids).toEqual(seq(7, 2));
    expect((await ids({ recipient: PHONE, conversationId: 'conv_c' }, 5)).ids).toEqual(seq(6, 3));
    expect((await ids({ conversationId: 'conv_b' }, 1)).ids).toEqual(seq(7, 2));
    expect((await ids({ recipient: 'nobody@example.com' }, 5)).ids).toEqual([]);
    // Another partner's conversation and customer are not this partner's.
    expect((await ids({ conversationId: 'conv_x' }, 5)).ids).toEqual([]);
    expect((await ids({ recipient: '+14155552672' }, 5)).ids).toEqual([]);
  });

  it('bounds by creation time (since inclusive, before exclusive) and by a provider id row by row', async () => {
    expect((await ids({ createdSince: T0 + 3000, createdBefore: T0 + 7000 }, 3)).ids).toEqual(seq(6, 5, 4, 3));
    expect((await ids({ createdSince: T0 + 7000, createdBefore: T0 + 7000 }, 3)).ids).toEqual([]);
    expect((await ids({ providerMessageId: 'wamid.X' }, 3)).ids).toEqual(seq(6));
  });
});

describe('a message by id', () => {
  it('finds msgd’s id and an indexed provider id, only the partner’s own', async () => {
    expect((await findMessages(t.ctx, 'p1', id(5))).map((m) => m.id)).toEqual([id(5)]);
    expect((await findMessages(t.ctx, 'p1', ' SMabc ')).map((m) => m.id)).toEqual([id(5)]);
    expect((await findMessages(t.ctx, 'p2', 'SMabc')).map((m) => m.id)).toEqual([id(9)]);
    expect(await findMessages(t.ctx, 'p2', id(5))).toEqual([]);
    // Not indexed (reports carry msgd's id): the list's providerMessageId filter finds it.
    expect(await findMessages(t.ctx, 'p1', 'wamid.X')).toEqual([]);
    expect(await findMessages(t.ctx, 'p1', '')).toEqual([]);
  });
});
