import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelType, CoreCtx } from '../../src/core/context.js';
import { createInboundIn } from '../../src/core/messages.js';
import { type Sql, sql } from '../../src/db/sql.js';
import { SCAN_LIMIT } from '../../src/core/message-list.js';
import { messageOut, pageOf } from '../../src/http/schemas/v1.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { SENDERS, call, richPartner, startV1, storeOutboundIn, storeOutboundsIn } from './helpers.js';

// GET /v1/messages: every filter, alone and combined, against the same messages read back by
// brute force from the database; cursors that never skip or repeat; bounded pages.

let server: TestServer;
let token: string;
let partnerId: string;
let otherToken: string;
let channels: Record<ChannelType, { id: string; gatewayId: string; sender: string }>;

const get = (path: string, t = token) => call(server, 'GET', path, { token: t });

async function channelsOf(ctx: CoreCtx, pid: string) {
  const rows = await ctx.store.all<{ id: string; type: ChannelType; gateway_id: string; sender: string }>(
    sql`SELECT id, type, gateway_id, sender FROM channels WHERE partner_id = ${pid} AND status = 'active'`,
  );
  return Object.fromEntries(rows.map((r) => [r.type, { id: r.id, gatewayId: r.gateway_id, sender: r.sender }])) as any;
}

const CUSTOMERS: Record<ChannelType, string[]> = {
  sms: ['+14155550101', '+14155550102', '+14155550103'],
  whatsapp: ['+14155550101', '+447911123456'],
  email: ['Ann@Example.com', 'bob@example.com'],
  messenger: ['24681357'],
  instagram: ['13572468'],
};
const STATUSES = ['queued', 'sent', 'delivered', 'failed', 'read'];

/** Messages as the send path and inbound processing write them, with a spread of statuses. */
async function seed(ctx: CoreCtx, pid: string, n: number) {
  const types = Object.keys(CUSTOMERS) as ChannelType[];
  await ctx.store.transaction(async (tx) => {
    for (let i = 0; i < n; i++) {
      const type = types[i % types.length];
      const list = CUSTOMERS[type];
      const who = list[Math.floor(i / types.length) % list.length];
      if (i % 4 === 3) {
        await createInboundIn(tx, ctx, {
          partnerId: pid,
          channel: { ...channels[type], type },
          from: type === 'email' ? who.toLowerCase() : who,
          providerMessageId: null,
          content: { kind: 'text', text: `in ${i}` },
          occurredAt: Date.now(),
        });
      } else {
        await storeOutboundIn(tx, ctx, {
          partnerId: pid,
          channel: { ...channels[type], type },
          to: who,
          content:
            type === 'email' ? { kind: 'email', subject: 's', text: `out ${i}` } : { kind: 'text', text: `out ${i}` },
          status: STATUSES[i % STATUSES.length],
        });
      }
    }
  });
}

beforeAll(async () => {
  server = await startV1();
  const p = await richPartner(server.ctx, 1);
  token = p.token;
  partnerId = p.partnerId;
  channels = await channelsOf(server.ctx, partnerId);
  await seed(server.ctx, partnerId, 300);
  // Another partner's messages, to the same customers, must never show.
  const other = await richPartner(server.ctx, 2);
  otherToken = other.token;
  const saved = channels;
  channels = await channelsOf(server.ctx, other.partnerId);
  await seed(server.ctx, other.partnerId, 40);
  channels = saved;
});
afterAll(() => server.stop());

async function walk(query: string, limit = 17): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 10_000; i++) {
    const q = `${query}${query ? '&' : ''}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const r = await get(`/v1/messages?${q}`);
    expect(r.status, r.text).toBe(200);
    expect(r.body.data.length).toBeLessThanOrEqual(limit);
    ids.push(...r.body.data.map((m: any) => m.id));
    cursor = r.body.next_cursor;
    if (!cursor) return ids;
  }
  throw new Error('did not end');
}

/** The same list straight from the table, newest first. */
async function expected(where: string | Sql): Promise<string[]> {
  const cond = typeof where === 'string' ? sql.raw(where ? `AND ${where}` : '') : sql`AND ${where}`;
  return (
    await server.ctx.store.all<{ id: string }>(
      sql`SELECT m.id FROM messages m WHERE m.partner_id = ${partnerId} ${cond} ORDER BY m.id DESC`,
    )
  ).map((r) => r.id);
}

describe('GET /v1/messages', () => {
  it('pages all of the partner’s messages newest first, in the documented shape, without history', async () => {
    const r = await get('/v1/messages');
    expect(r.status).toBe(200);
    expect(pageOf(messageOut).parse(r.body)).toBeTruthy();
    expect(r.body.data).toHaveLength(50);
    expect(r.body.data[0]).not.toHaveProperty('history');
    expect(r.body.data[0].content).toEqual({ kind: 'text', text: expect.any(String) });
    const all = await expected('');
    expect(all).toHaveLength(300);
    expect(await walk('')).toEqual(all);
  });

  it.each([
    ['channel=sms', "channel_type = 'sms'"],
    ['channel=email&direction=inbound', "channel_type = 'email' AND direction = 'inbound'"],
    ['status=failed', "status = 'failed'"],
    ['status=received&channel=whatsapp', "status = 'received' AND channel_type = 'whatsapp'"],
    ['direction=outbound&status=delivered', "direction = 'outbound' AND status = 'delivered'"],
  ])('filters %s', async (query, where) => {
    const want = await expected(where);
    expect(want.length).toBeGreaterThan(0);
    expect(await walk(query)).toEqual(want);
  });

  it('recipient: the messages to and from that customer on every channel, the address in any form', async () => {
    const waInbound = await expected("channel_type = 'whatsapp' AND direction = 'inbound'");
    const both = await expected(
      `contact_id = (SELECT id FROM contacts WHERE partner_id = m.partner_id AND phone = '+14155550101')`,
    );
    const r = await walk('recipient=%2B14155550101');
    expect(r).toEqual(both);
    const dirs = new Set<string>();
    const chans = new Set<string>();
    for (const id of r) {
      const m = (await get(`/v1/messages/${id}`)).body;
      dirs.add(m.direction);
      chans.add(m.channel);
      expect(m.direction === 'outbound' ? m.to : m.from).toBe('+14155550101');
    }
    expect([...dirs].sort()).toEqual(['inbound', 'outbound']);
    expect([...chans].sort()).toEqual(['sms', 'whatsapp']);
    // Email in any case; the channel filter narrows to one of the customer's conversations.
    expect(await walk(`recipient=${encodeURIComponent('ANN@example.COM')}`)).toEqual(
      await expected(
        `contact_id = (SELECT id FROM contacts WHERE partner_id = m.partner_id AND email = 'ann@example.com')`,
      ),
    );
    expect(await walk('recipient=%2B14155550101&channel=whatsapp&direction=inbound')).toEqual(
      both.filter((id) => waInbound.includes(id)),
    );
    expect(await walk('recipient=24681357')).toEqual(await expected("channel_type = 'messenger'"));
    // Nobody by that address: an empty list, not an error.
    expect((await get('/v1/messages?recipient=%2B19999999999')).body).toEqual({ data: [], next_cursor: null });
    expect((await get('/v1/messages?recipient=nobody')).body).toEqual({ data: [], next_cursor: null });
  });

  it('conversation: its messages only, and only the partner’s own', async () => {
    const conv = (await get('/v1/messages?channel=sms&limit=1')).body.data[0].conversation_id;
    expect(await walk(`conversation=${conv}`, 5)).toEqual(await expected(sql`conversation_id = ${conv}`));
    expect(await walk(`conversation=${conv}&status=queued`, 5)).toEqual(
      await expected(sql`conversation_id = ${conv} AND status = 'queued'`),
    );
    expect((await get(`/v1/messages?conversation=${conv}&channel=email`)).body.data).toEqual([]);
    // Another partner asking for this conversation sees nothing.
    expect((await get(`/v1/messages?conversation=${conv}`, otherToken)).body).toEqual({ data: [], next_cursor: null });
  });

  it('created_since and created_before bound the list by creation time', async () => {
    const all = await expected('');
    // The creation time an id carries (its first ten base32 characters): what the bounds compare.
    const times = all.map((id) =>
      [...id.slice(4, 14)].reduce((t, c) => t * 32 + '0123456789abcdefghjkmnpqrstvwxyz'.indexOf(c), 0),
    );
    const from = times[200];
    const to = times[40];
    const iso = (t: number) => encodeURIComponent(new Date(t).toISOString());
    const want = all.filter((_, i) => times[i] >= from && times[i] < to);
    const sms = await expected("channel_type = 'sms'");
    expect(await walk(`created_since=${iso(from)}&created_before=${iso(to)}`)).toEqual(want);
    expect(await walk(`created_since=${iso(from)}&created_before=${iso(to)}&channel=sms`)).toEqual(
      want.filter((id) => sms.includes(id)),
    );
    expect((await get(`/v1/messages?created_since=${iso(to)}&created_before=${iso(from)}`)).body.data).toEqual([]);
  });

  it('a message sent through the API is listed at once', async () => {
    const s = await call(server, 'POST', '/api/send-sms.php', {
      token,
      body: { to: '+14155550199', text: 'listed' },
    });
    expect(s.status).toBe(200);
    const r = await get('/v1/messages?limit=1');
    expect(r.body.data[0]).toMatchObject({ id: s.body.id, to: '+14155550199', from: SENDERS(1).sms });
    await waitFor(
      async () => (await get('/v1/messages?recipient=%2B14155550199&status=sent')).body.data[0],
      'the message listed as sent',
      5000,
    );
  });

  it('refuses bad filters and foreign cursors with 400 naming the field, and needs messages:read', async () => {
    for (const [q, field] of [
      ['status=bogus', 'status'],
      ['channel=fax', 'channel'],
      ['direction=up', 'direction'],
      ['created_since=yesterday', 'created_since'],
      ['limit=0', 'limit'],
      ['cursor=garbage', 'cursor'],
    ]) {
      const r = await get(`/v1/messages?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.error.code).toBe('invalid_request');
      expect(r.body.error.details.map((d: any) => d.field)).toContain(field);
    }
    const convCursor = (await get('/v1/conversations?limit=1')).body.next_cursor;
    expect((await get(`/v1/messages?cursor=${convCursor}`)).status).toBe(400);
    const p = await richPartner(server.ctx, 3, { scopes: 'messages:send' });
    const r = await get('/v1/messages', p.token);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('insufficient_scope');
    expect((await get('/v1/messages', null as any)).status).toBe(401);
  });
});

describe('a rare status among many messages', () => {
  it(`reads at most ${SCAN_LIMIT} messages a page and still reaches every match; a failure status in one page`, async () => {
    const s = await startV1();
    try {
      const p = await richPartner(s.ctx, 1);
      const ch = (await channelsOf(s.ctx, p.partnerId)).sms;
      const ids = await s.ctx.store.transaction((tx) =>
        storeOutboundsIn(
          tx,
          s.ctx,
          Array.from({ length: SCAN_LIMIT * 2 + 500 }, (_, i) => ({
            partnerId: p.partnerId,
            channel: { ...ch, type: 'sms' as const },
            to: `+1415556${String(i % 1000).padStart(4, '0')}`,
            content: { kind: 'text' as const, text: 'x' },
          })),
        ),
      );
      // Three read messages: the newest, one in the middle, the oldest.
      const rare = [ids[ids.length - 1], ids[SCAN_LIMIT + 100], ids[0]];
      const walk = async (status: string) => {
        const pages: number[] = [];
        const found: string[] = [];
        let cursor: string | null = null;
        do {
          const r = await call(s, 'GET', `/v1/messages?status=${status}&limit=10${cursor ? `&cursor=${cursor}` : ''}`, {
            token: p.token,
          });
          expect(r.status).toBe(200);
          pages.push(r.body.data.length);
          found.push(...r.body.data.map((m: any) => m.id));
          cursor = r.body.next_cursor;
        } while (cursor);
        return { pages, found };
      };
      for (const id of rare) await s.ctx.store.run(sql`UPDATE messages SET status = 'read' WHERE id = ${id}`);
      const read = await walk('read');
      expect(read.found).toEqual(rare);
      // Each page stopped after SCAN_LIMIT messages: three pages for 2.25 × SCAN_LIMIT.
      expect(read.pages).toEqual([1, 1, 1]);
      // A failure status is read from its own partial index: one page, however far apart.
      for (const id of rare) await s.ctx.store.run(sql`UPDATE messages SET status = 'failed' WHERE id = ${id}`);
      const failed = await walk('failed');
      expect(failed.found).toEqual(rare);
      expect(failed.pages).toEqual([3]);
    } finally {
      await s.stop();
    }
  });
});
