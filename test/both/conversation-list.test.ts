import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type ConversationFilter,
  type ConversationKey,
  type ConversationSort,
  conversationJson,
  conversationKey,
  conversationMessages,
  getConversation,
  listConversations,
} from '../../src/core/conversation-list.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { allPages, contact, conversation, idAt, message, partner } from './read-fixtures.js';

// The conversations list (GET /v1/conversations, the console) and one conversation with its
// messages, on both stores: each order paged across ties of updated_at without a skip or a
// repeat, the filters, and another partner's conversations out of reach.

const T0 = Date.UTC(2026, 0, 1);
const HOUR = 3_600_000;

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
  await partner(t, 'p1');
  await partner(t, 'p2');
  await contact(t, { id: 'ct_a', partner: 'p1', name: 'Ann', phone: '+14155552671' });
  await contact(t, { id: 'ct_b', partner: 'p1', email: 'bob@example.com' });
  await contact(t, { id: 'ct_x', partner: 'p2', phone: '+14155552671' });
  // Ids in creation order; three share one updated_at, so the updated_at orders need their tie-break.
  const conv = (n: number, contactId: string, channel: string, updatedAt: number, status: 'open' | 'closed' = 'open') =>
    conversation(t, {
      id: idAt('conv', T0 + n * HOUR),
      partner: 'p1',
      contact: contactId,
      channel,
      status,
      createdAt: T0 + n * HOUR,
      updatedAt,
      lastInboundAt: n === 2 ? T0 + 10 * HOUR : null,
    });
  await conv(1, 'ct_a', 'sms', T0 + 20 * HOUR);
  await conv(2, 'ct_a', 'whatsapp', T0 + 30 * HOUR);
  await conv(3, 'ct_b', 'email', T0 + 20 * HOUR, 'closed');
  await conv(4, 'ct_b', 'sms', T0 + 5 * HOUR);
  await conv(5, 'ct_a', 'messenger', T0 + 20 * HOUR);
  await conversation(t, { id: idAt('conv', T0), partner: 'p2', contact: 'ct_x', channel: 'sms', updatedAt: T0 });
});
afterEach(() => t.close());

const c = (n: number) => idAt('conv', T0 + n * HOUR);

async function ids(f: ConversationFilter, sort: ConversationSort, limit: number) {
  const { rows } = await allPages<string, ConversationKey>(async (after) => {
    const page = await listConversations(t.ctx, 'p1', f, sort, limit + 1, after);
    const more = page.length > limit;
    const shown = page.slice(0, limit);
    return { rows: shown.map((r) => conversationKey(r).id), next: more ? conversationKey(shown[limit - 1]) : null };
  });
  return rows;
}

describe('the conversations list', () => {
  it('pages each order across ties of updated_at, none skipped or repeated', async () => {
    const newest = [c(5), c(4), c(3), c(2), c(1)];
    // updated_at: 4 (5 h), then 1, 3, 5 (20 h, by id), then 2 (30 h).
    const byUpdated = [c(4), c(1), c(3), c(5), c(2)];
    for (const limit of [1, 2, 3, 5]) {
      expect(await ids({}, '-created_at', limit)).toEqual(newest);
      expect(await ids({}, 'updated_at', limit)).toEqual(byUpdated);
      expect(await ids({}, '-updated_at', limit)).toEqual([...byUpdated].reverse());
    }
  });

  it('filters by channel, status, contact and updated_at bounds, and they combine', async () => {
    expect(await ids({ channel: 'sms' }, '-created_at', 1)).toEqual([c(4), c(1)]);
    expect(await ids({ status: 'closed' }, '-created_at', 2)).toEqual([c(3)]);
    expect(await ids({ contactId: 'ct_a' }, 'updated_at', 1)).toEqual([c(1), c(5), c(2)]);
    expect(await ids({ contactId: 'ct_x' }, '-created_at', 5)).toEqual([]);
    expect(await ids({ updatedSince: T0 + 20 * HOUR }, 'updated_at', 2)).toEqual([c(1), c(3), c(5), c(2)]);
    expect(await ids({ updatedBefore: T0 + 20 * HOUR }, '-updated_at', 2)).toEqual([c(4)]);
    expect(
      await ids({ contactId: 'ct_a', status: 'open', updatedSince: T0 + 20 * HOUR, channel: 'sms' }, 'updated_at', 2),
    ).toEqual([c(1)]);
  });

  it('shows a conversation with its contact as the API does, only to its partner', async () => {
    const row = await getConversation(t.ctx, 'p1', c(2));
    expect(conversationJson(row!)).toEqual({
      id: c(2),
      channel: 'whatsapp',
      status: 'open',
      contact: {
        id: 'ct_a',
        name: 'Ann',
        phone: '+14155552671',
        email: null,
        messenger_psid: null,
        instagram_igsid: null,
      },
      last_message_at: new Date(T0 + 30 * HOUR).toISOString(),
      last_inbound_at: new Date(T0 + 10 * HOUR).toISOString(),
      window_expires_at: new Date(T0 + 34 * HOUR).toISOString(),
      created_at: new Date(T0 + 2 * HOUR).toISOString(),
      updated_at: new Date(T0 + 30 * HOUR).toISOString(),
    });
    expect(await getConversation(t.ctx, 'p2', c(2))).toBeUndefined();
    expect(await getConversation(t.ctx, 'p1', idAt('conv', T0))).toBeUndefined();
  });

  it('pages a conversation’s messages in either order', async () => {
    const m = (n: number) => idAt('msg', T0 + n * 1000);
    for (const n of [1, 2, 3, 4])
      await message(t, {
        id: m(n),
        partner: 'p1',
        channel: 'sms',
        conversation: c(1),
        contact: 'ct_a',
        at: T0 + n * 1000,
      });
    await message(t, { id: m(5), partner: 'p1', channel: 'sms', conversation: c(4), contact: 'ct_b', at: T0 + 5000 });
    const page = async (order: 'asc' | 'desc', after?: string) =>
      (await conversationMessages(t.ctx, c(1), order, 2, after)).map((r) => r.id);
    expect(await page('desc')).toEqual([m(4), m(3)]);
    expect(await page('desc', m(3))).toEqual([m(2), m(1)]);
    expect(await page('desc', m(1))).toEqual([]);
    expect(await page('asc')).toEqual([m(1), m(2)]);
    expect(await page('asc', m(2))).toEqual([m(3), m(4)]);
    const [first] = await conversationMessages(t.ctx, c(1), 'asc', 1);
    expect(first).toMatchObject({ id: m(1), price: 7500, created_at: T0 + 1000, status: 'delivered' });
  });
});
