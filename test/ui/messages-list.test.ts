import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelType, CoreCtx } from '../../src/core/context.js';
import { createInboundIn } from '../../src/core/messages.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sqlRow, sqlRows } from '../helpers/rows.js';
import { type FreeOutbound, richPartner, storeOutboundsIn } from '../v1/helpers.js';
import { Client, loggedIn } from './helpers.js';

// The console's Messages page and GET /v1/messages are one query: for the same filter they
// show the same messages, page by page, with the same cursors; a failure status answers in
// one page; a page that stopped at the scan bound says how far back it has searched.

let s: TestServer;
let token: string;
let admin: Client;
let channels: Record<ChannelType, { id: string; gatewayId: string; sender: string }>;
const stamp: Record<string, string> = {};

const CUSTOMERS: Record<ChannelType, string[]> = {
  sms: ['+14155550101', '+14155550102'],
  whatsapp: ['+14155550101', '+447911123456'],
  email: ['Ann@Example.com', 'bob@example.com'],
  messenger: ['24681357'],
  instagram: ['13572468'],
};
const STATUSES = ['queued', 'sent', 'delivered', 'failed', 'read'];

async function channelsOf(ctx: CoreCtx, pid: string) {
  const rows = (await sqlRows(
    ctx,
    "SELECT id, type, gateway_id, sender FROM channels WHERE partner_id = ? AND status = 'active'",
    pid,
  )) as { id: string; type: ChannelType; gateway_id: string; sender: string }[];
  return Object.fromEntries(rows.map((r) => [r.type, { id: r.id, gatewayId: r.gateway_id, sender: r.sender }])) as any;
}

/** A free outbound message (no debit, no job) of `type` to `to`, in `status`. */
function outbound(pid: string, type: ChannelType, to: string, status: string, text: string): FreeOutbound {
  return {
    partnerId: pid,
    channel: { ...channels[type], type },
    to,
    content: type === 'email' ? { kind: 'email', subject: text, text } : { kind: 'text', text },
    status,
  };
}

/**
 * Mixed traffic, then a run of plain SMS long enough that a rare status is past the scan bound;
 * outbound messages written a few hundred to a statement, in the order made.
 */
function seed(ctx: CoreCtx, pid: string) {
  const types = Object.keys(CUSTOMERS) as ChannelType[];
  return ctx.store.transaction(async (tx) => {
    [stamp.oldUndelivered] = await storeOutboundsIn(tx, ctx, [
      outbound(pid, 'sms', '+14155550102', 'undelivered', 'old undelivered'),
    ]);
    let run: FreeOutbound[] = [];
    for (let i = 0; i < 240; i++) {
      const type = types[i % types.length];
      const list = CUSTOMERS[type];
      const who = list[Math.floor(i / types.length) % list.length];
      if (i % 4 === 3) {
        await storeOutboundsIn(tx, ctx, run);
        run = [];
        await createInboundIn(tx, ctx, {
          partnerId: pid,
          channel: { ...channels[type], type },
          from: type === 'email' ? who.toLowerCase() : who,
          providerMessageId: null,
          content: { kind: 'text', text: `in ${i}` },
          occurredAt: Date.now(),
        });
      } else run.push(outbound(pid, type, who, STATUSES[i % STATUSES.length], `out ${i}`));
    }
    for (let i = 0; i < 2_100; i++) run.push(outbound(pid, 'sms', '+14155550109', 'queued', `bulk ${i}`));
    await storeOutboundsIn(tx, ctx, run);
    [stamp.newUndelivered] = await storeOutboundsIn(tx, ctx, [
      outbound(pid, 'whatsapp', '+14155550101', 'undelivered', 'new undelivered'),
    ]);
  });
}

beforeAll(async () => {
  s = await startTestServer();
  const p = await richPartner(s.ctx, 1);
  token = p.token;
  channels = await channelsOf(s.ctx, p.partnerId);
  await seed(s.ctx, p.partnerId);
  // Another partner's traffic to the same customers never shows on either surface.
  const other = await richPartner(s.ctx, 2);
  const mine = channels;
  channels = await channelsOf(s.ctx, other.partnerId);
  await s.ctx.store.transaction((tx) =>
    storeOutboundsIn(tx, s.ctx, [outbound(other.partnerId, 'sms', '+14155550101', 'undelivered', 'not yours')]),
  );
  channels = mine;
  admin = (await loggedIn(s.ctx, s.url, p.partnerId, 'developer')).client;
}, 60_000);
afterAll(async () => {
  await s?.stop();
});

interface Page {
  ids: string[];
  next: string | null;
  text: string;
}

const rowsOf = (html: string) => [...html.matchAll(/<tr><td><a href="\/ui\/messages\/(msg_\w+)"/g)].map((m) => m[1]);

async function consolePage(query: string, cursor: string | null): Promise<Page> {
  const q = new URLSearchParams(query);
  if (cursor) q.set('cursor', cursor);
  const r = await admin.get(`/ui/messages?${q}`);
  expect(r.status, r.text).toBe(200);
  const link = /<a href="([^"]+)" rel="next">/.exec(r.text);
  const next = link ? new URLSearchParams(link[1].replace(/&amp;/g, '&').split('?')[1]).get('cursor') : null;
  return { ids: rowsOf(r.text), next, text: r.text };
}

async function apiPage(query: string, cursor: string | null): Promise<Page> {
  const q = new URLSearchParams(query);
  q.set('limit', '50');
  if (cursor) q.set('cursor', cursor);
  const r = await fetch(`${s.url}/v1/messages?${q}`, { headers: { authorization: `Bearer ${token}` } });
  const text = await r.text();
  expect(r.status, text).toBe(200);
  const body = JSON.parse(text);
  return { ids: body.data.map((m: { id: string }) => m.id), next: body.next_cursor, text };
}

/** Both surfaces, page by page to the end: the same messages and the same cursors. */
async function walkBoth(consoleQuery: string, apiQuery: string): Promise<Page[]> {
  const pages: Page[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const [ui, api]: [Page, Page] = await Promise.all([consolePage(consoleQuery, cursor), apiPage(apiQuery, cursor)]);
    expect(ui.ids).toEqual(api.ids);
    expect(ui.next).toBe(api.next);
    pages.push(ui);
    cursor = ui.next;
    if (!cursor) return pages;
  }
  throw new Error('the list did not end');
}

const all = (pages: Page[]) => pages.flatMap((p) => p.ids);

describe('Messages page and GET /v1/messages', () => {
  const today = new Date().toISOString().slice(0, 10);
  const tomorrow = new Date(Date.parse(`${today}T00:00:00Z`) + 86_400_000).toISOString();
  const cases: [string, string, string][] = [
    ['no filter', '', ''],
    ['channel', 'channel=email', 'channel=email'],
    ['status', 'status=delivered', 'status=delivered'],
    ['direction', 'direction=inbound', 'direction=inbound'],
    ['recipient by phone, on every channel', 'recipient=%2B14155550101', 'recipient=%2B14155550101'],
    ['recipient by email in another case', 'recipient=ANN%40example.com', 'recipient=ANN%40example.com'],
    [
      'channel, status and recipient together',
      'channel=whatsapp&status=sent&recipient=%2B14155550101',
      'channel=whatsapp&status=sent&recipient=%2B14155550101',
    ],
    ['UTC days', `from=${today}&to=${today}`, `created_since=${today}T00:00:00Z&created_before=${tomorrow}`],
    ['a day with nothing', 'from=2020-01-01&to=2020-01-01', 'created_since=2020-01-01&created_before=2020-01-02'],
  ];

  it.each(cases)('show the same messages for %s', async (_name, consoleQuery, apiQuery) => {
    const pages = await walkBoth(consoleQuery, apiQuery);
    const ids = all(pages);
    expect(new Set(ids).size).toBe(ids.length);
    if (consoleQuery === '') expect(ids).toHaveLength(2_342);
    if (consoleQuery.startsWith('recipient=%2B')) expect(ids).toContain(stamp.newUndelivered);
    if (consoleQuery.startsWith('from=2020')) expect(ids).toEqual([]);
  });

  it('a failure status answers in one page, however far apart its messages are', async () => {
    const pages = await walkBoth('status=undelivered', 'status=undelivered');
    expect(pages.map((p) => p.ids)).toEqual([[stamp.newUndelivered, stamp.oldUndelivered]]);
    expect(pages[0].text).not.toContain('Searched messages back to');
    const sms = await walkBoth('status=undelivered&channel=sms', 'status=undelivered&channel=sms');
    expect(sms.map((p) => p.ids)).toEqual([[stamp.oldUndelivered]]);
  });

  it('a page that stopped at the scan bound says how far back it searched, and the next page goes on', async () => {
    const pages = await walkBoth('direction=inbound&channel=sms', 'direction=inbound&channel=sms');
    expect(pages[0].ids).toEqual([]);
    // The first page looked at 2,000 messages, all newer than any inbound SMS.
    const searched = /Searched messages back to <time dateTime="([^"]+)">[^<]+<\/time>; nothing matches yet\./.exec(
      pages[0].text,
    );
    expect(searched).not.toBeNull();
    expect(pages[0].text).toContain('Look further back');
    expect(pages.length).toBeGreaterThan(1);
    const found = all(pages);
    expect(found.length).toBeGreaterThan(0);
    // Every match is older than where the first page stopped.
    const idsTime = async (id: string) =>
      ((await sqlRow(s.ctx, 'SELECT created_at FROM messages WHERE id = ?', id)) as any).created_at;
    for (const id of found) expect(await idsTime(id)).toBeLessThanOrEqual(Date.parse(searched![1]));
    expect(pages.at(-1)!.text).not.toContain('Searched messages back to');
  });

  it('a cursor from /v1 opens the same page in the console, and a bad filter is a 400 on the page', async () => {
    const first = await apiPage('channel=sms', null);
    const [ui, api] = await Promise.all([consolePage('channel=sms', first.next), apiPage('channel=sms', first.next)]);
    expect(ui.ids).toEqual(api.ids);
    for (const bad of ['status=lost', 'direction=sideways', 'channel=fax', 'to=tomorrow']) {
      const r = await admin.get(`/ui/messages?${bad}`);
      expect(r.status).toBe(400);
      expect(rowsOf(r.text)).toEqual([]);
    }
  });
});
