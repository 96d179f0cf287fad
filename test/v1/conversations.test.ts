import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  conversationsQuery,
  type ConversationFilter,
  type ConversationSort,
} from '../../src/core/conversation-list.js';
import { conversationOut, conversationWithMessages, pageOf } from '../../src/http/schemas/v1.js';
import { render, sql } from '../../src/db/sql.js';
import { serverStore, type TestServer } from '../helpers/server.js';
import { call, richPartner, seedConversations, startV1 } from './helpers.js';

let server: TestServer;
let token: string;
let partnerId: string;
let seeded: string[];

beforeAll(async () => {
  server = await startV1();
  const p = await richPartner(server.ctx, 1);
  token = p.token;
  partnerId = p.partnerId;
  seeded = await seedConversations(server.ctx, partnerId, 120);
});
afterAll(() => server.stop());

const get = (path: string) => call(server, 'GET', path, { token });

async function pageAll(path: string, onPage?: () => Promise<void>): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 1000; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const r = await get(cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path);
    expect(r.status).toBe(200);
    ids.push(...r.body.data.map((c: any) => c.id));
    cursor = r.body.next_cursor;
    if (!cursor) return ids;
    await onPage?.();
  }
  throw new Error('did not end');
}

describe('GET /v1/conversations', () => {
  it('pages newest first: default 50, the documented shape, a cursor until the end', async () => {
    const r = await get('/v1/conversations');
    expect(r.status).toBe(200);
    expect(pageOf(conversationOut).parse(r.body)).toBeTruthy();
    expect(r.body.data).toHaveLength(50);
    expect(r.body.data.map((c: any) => c.id)).toEqual([...seeded].reverse().slice(0, 50));
    expect(r.body.next_cursor).toEqual(expect.any(String));
    expect(r.body.data[0].contact.id).toMatch(/^ct_/);
    expect(await pageAll('/v1/conversations?limit=200')).toEqual([...seeded].reverse());
  });

  it('limit is 1-200; a bad or foreign cursor is a 400', async () => {
    expect((await get('/v1/conversations?limit=201')).status).toBe(400);
    expect((await get('/v1/conversations?limit=0')).status).toBe(400);
    expect((await get('/v1/conversations?limit=200')).body.data).toHaveLength(120);
    const bad = await get('/v1/conversations?cursor=garbage');
    expect(bad.status).toBe(400);
    expect(bad.body.error.details[0].field).toBe('cursor');
    const byId = (await get('/v1/conversations?limit=1')).body.next_cursor;
    expect((await get(`/v1/conversations?sort=updated_at&cursor=${byId}`)).status).toBe(400);
  });

  it('no duplicates and no gaps while conversations are created between pages', async () => {
    let n = 0;
    const insert = async () => {
      // New conversations through the real send path, between and during page reads.
      const sends = [0, 1, 2].map(() =>
        call(server, 'POST', '/v1/messages', {
          token,
          body: { channel: 'sms', to: `+1415555${String(1000 + n++).padStart(4, '0')}`, body: 'new' },
        }),
      );
      for (const s of await Promise.all(sends)) expect(s.status).toBe(200);
    };
    const before = (await pageAll('/v1/conversations?limit=200')).slice();
    const newestFirst = await pageAll('/v1/conversations?limit=7', insert);
    expect(new Set(newestFirst).size).toBe(newestFirst.length);
    expect(newestFirst).toEqual(before);

    // Oldest activity first: everything that existed is seen once; new ones show up at the end.
    const existing = (await pageAll('/v1/conversations?limit=200')).slice();
    const byActivity = await pageAll('/v1/conversations?sort=updated_at&limit=9', insert);
    expect(new Set(byActivity).size).toBe(byActivity.length);
    expect(existing.every((id) => byActivity.includes(id))).toBe(true);
    expect(byActivity.length).toBeGreaterThan(existing.length);
  });

  it('filters: channel, status, contact, updated_since/updated_before, and they combine', async () => {
    const all = (
      await Promise.all(
        (await pageAll('/v1/conversations?limit=200')).map((id) => get(`/v1/conversations/${id}?limit=1`)),
      )
    ).map((r) => r.body);
    const email = await pageAll('/v1/conversations?channel=email&limit=13');
    expect(email.length).toBe(all.filter((c) => c.channel === 'email').length);
    expect(email.length).toBeGreaterThan(0);

    const target = all[5];
    await server.ctx.store.run(sql`UPDATE conversations SET status = 'closed' WHERE id = ${target.id}`);
    expect((await get('/v1/conversations?status=closed')).body.data.map((c: any) => c.id)).toEqual([target.id]);
    expect((await get(`/v1/conversations?status=open&limit=200`)).body.data.map((c: any) => c.id)).not.toContain(
      target.id,
    );
    expect((await get(`/v1/conversations?contact=${target.contact.id}`)).body.data.map((c: any) => c.id)).toEqual([
      target.id,
    ]);
    expect(
      (
        await get(
          `/v1/conversations?contact=${target.contact.id}&channel=${target.channel === 'sms' ? 'email' : 'sms'}`,
        )
      ).body.data,
    ).toEqual([]);

    const t = Date.parse(all[10].updated_at);
    await server.ctx.store.run(sql`UPDATE conversations SET updated_at = ${t + 60_000} WHERE id = ${all[20].id}`);
    const since = new Date(t + 30_000).toISOString();
    expect((await get(`/v1/conversations?updated_since=${since}`)).body.data.map((c: any) => c.id)).toEqual([
      all[20].id,
    ]);
    const sync = await get(`/v1/conversations?sort=updated_at&updated_since=${since}`);
    expect(sync.body.data.map((c: any) => c.id)).toEqual([all[20].id]);
    const older = await pageAll(`/v1/conversations?updated_before=${since}&limit=50`);
    expect(older).not.toContain(all[20].id);
    expect(older.length).toBeGreaterThan(100);
    expect((await get('/v1/conversations?updated_since=yesterday')).status).toBe(400);
  });

  it('sort=-updated_at pages by last activity, newest first', async () => {
    const ids = await pageAll('/v1/conversations?sort=-updated_at&limit=11');
    const rows: { updated_at: number }[] = [];
    for (const id of ids)
      rows.push(
        (await server.ctx.store.get<{ updated_at: number }>(
          sql`SELECT updated_at FROM conversations WHERE id = ${id}`,
        ))!,
      );
    for (let i = 1; i < rows.length; i++) expect(rows[i - 1].updated_at).toBeGreaterThanOrEqual(rows[i].updated_at);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('GET /v1/conversations/{id}', () => {
  it('returns the conversation with a page of its messages, newest first or by order=asc', async () => {
    const to = '+14155550888';
    const sent: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await call(server, 'POST', '/v1/messages', { token, body: { channel: 'sms', to, body: `m${i}` } });
      sent.push(r.body.id);
    }
    const m = await get(`/v1/messages/${sent[0]}`);
    const convId = m.body.conversation_id;
    const r = await get(`/v1/conversations/${convId}?limit=2`);
    expect(r.status).toBe(200);
    expect(conversationWithMessages.parse(r.body)).toBeTruthy();
    expect(r.body).toMatchObject({ id: convId, channel: 'sms', contact: { phone: to } });
    expect(r.body.messages.data.map((x: any) => x.id)).toEqual([sent[4], sent[3]]);
    const next = await get(`/v1/conversations/${convId}?limit=2&cursor=${r.body.messages.next_cursor}`);
    expect(next.body.messages.data.map((x: any) => x.id)).toEqual([sent[2], sent[1]]);
    const asc = await get(`/v1/conversations/${convId}?order=asc&limit=10`);
    expect(asc.body.messages.data.map((x: any) => x.id)).toEqual(sent);
    expect(asc.body.messages.next_cursor).toBeNull();
    expect((await get(`/v1/conversations/${convId}?order=asc&cursor=${r.body.messages.next_cursor}`)).status).toBe(400);
    expect((await get('/v1/conversations/conv_01kzzzzzzzzzzzzzzzzzzzzzzz')).status).toBe(404);
  });
});

// SQLite's planner, asked with EXPLAIN QUERY PLAN; PostgreSQL plans by its own statistics.
describe.skipIf(serverStore === 'postgres')('query plans', () => {
  it.each([
    [{}, '-created_at', 'conversations_partner'],
    [{ channel: 'sms', status: 'open' }, '-created_at', 'conversations_partner'],
    [{ updatedSince: 1 }, 'updated_at', 'conversations_partner_updated'],
    [{ updatedBefore: 2e12 }, '-updated_at', 'conversations_partner_updated'],
    [{ contactId: 'ct_x' }, '-created_at', 'conversations_contact'],
  ] as [ConversationFilter, ConversationSort, string][])(
    '%j sorted %s reads %s without a full sort',
    (f, sort, index) => {
      for (const after of [null, { id: 'conv_01k0000000000000000000000', updatedAt: 1 }]) {
        const q = render(conversationsQuery('sqlite', partnerId, f, sort, 51, after), 'sqlite');
        const rows = server.ctx.db.sqlite.prepare(`EXPLAIN QUERY PLAN ${q.text}`).all(q.values) as { detail: string }[];
        const detail = rows.map((r) => r.detail).join(' | ');
        expect(detail).toContain(`USING INDEX ${index}`);
        // The contact's few conversations may be sorted; a partner-wide list never is.
        if (index !== 'conversations_contact') expect(detail).not.toMatch(/TEMP B-TREE FOR ORDER BY/);
        if (index === 'conversations_partner') expect(detail).not.toContain('TEMP B-TREE');
      }
    },
  );
});
