import type { ChannelType, CoreCtx } from '../../src/core/context.js';
import { findOrCreateContactIn } from '../../src/core/contacts.js';
import { touchConversationIn } from '../../src/core/conversations.js';
import type { MessageContent } from '../../src/core/message-content.js';
import type { Queryable } from '../../src/db/query.js';
import { type Sql, sql } from '../../src/db/sql.js';
import { newId } from '../../src/lib/ids.js';
import { connect, setupPartner, startTestServer, type PartnerSetup, type TestServer } from '../helpers/server.js';

export interface Res {
  status: number;
  body: any;
  headers: Headers;
  text: string;
}

/** One request to the server; `body` as a string is sent as is (malformed JSON tests). */
export async function call(
  server: { url: string },
  method: string,
  path: string,
  opts: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Res> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(server.url + path, {
    method,
    headers,
    body: opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body),
  });
  const text = await res.text();
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, body, headers: res.headers, text };
}

export const SENDERS = (n: number) => ({
  sms: `+1555010${String(n).padStart(4, '0')}`,
  whatsapp: `+1555020${String(n).padStart(4, '0')}`,
  email: `p${n}@sender.example.com`,
  messenger: `10${n}000`,
  instagram: `20${n}000`,
});

/** A funded partner with a sandbox gateway on every channel type. */
export async function richPartner(
  ctx: CoreCtx,
  n: number,
  opts: { scopes?: string; balance?: string } = {},
): Promise<PartnerSetup> {
  const p = await setupPartner(ctx, {
    balance: opts.balance ?? '100',
    scopes: opts.scopes,
    prices: { sms: '0.01', whatsapp: '0.02', email: '0.001', messenger: '0.005', instagram: '0.005' },
  });
  for (const [type, sender] of Object.entries(SENDERS(n))) {
    await connect(ctx, p.partnerId, { kind: 'sandbox', settings: { delivery_delay_ms: 50 } }, type, sender);
  }
  return p;
}

/** Bulk conversations straight through core, as inbound/outbound traffic would make them. */
export async function seedConversations(
  ctx: CoreCtx,
  partnerId: string,
  count: number,
  opts: { channel?: 'sms' | 'email'; prefix?: string } = {},
): Promise<string[]> {
  const ids: string[] = [];
  await ctx.store.transaction(async (tx) => {
    for (let i = 0; i < count; i++) {
      const channel = opts.channel ?? (i % 3 === 0 ? 'email' : 'sms');
      const addr =
        channel === 'email'
          ? `${opts.prefix ?? 'c'}${i}@example.org`
          : `+1415${(opts.prefix ? 7 : 6).toString()}${String(i).padStart(6, '0')}`;
      const { contact } = await findOrCreateContactIn(tx, ctx, partnerId, channel, addr);
      ids.push((await touchConversationIn(tx, ctx, partnerId, contact.id, channel, null)).id);
    }
  });
  return ids;
}

export interface FreeOutbound {
  partnerId: string;
  channel: { id: string; type: ChannelType; gatewayId: string; sender: string };
  to: string;
  content: MessageContent;
  status?: string;
}

/**
 * Free outbound messages (price 0: no debit, no dispatch job) stored in `tx` as the send path
 * stores them, in order: each recipient's contact and conversation found or made once, the
 * messages in `status` (default queued), written a few hundred to a statement. Their ids.
 */
export async function storeOutboundsIn(tx: Queryable, ctx: CoreCtx, inputs: FreeOutbound[]): Promise<string[]> {
  const now = ctx.now();
  const threads = new Map<string, { contact: string; conversation: string }>();
  const rows: Sql[] = [];
  for (const m of inputs) {
    const key = `${m.partnerId} ${m.channel.id} ${m.to}`;
    let t = threads.get(key);
    if (!t) {
      const { contact } = await findOrCreateContactIn(tx, ctx, m.partnerId, m.channel.type, m.to);
      const conv = await touchConversationIn(tx, ctx, m.partnerId, contact.id, m.channel.type, m.channel.id);
      threads.set(key, (t = { contact: contact.id, conversation: conv.id }));
    }
    rows.push(
      sql`(${newId('msg')}, ${m.partnerId}, 'outbound', ${m.channel.type}, ${m.channel.id}, ${m.channel.gatewayId},
        ${t.conversation}, ${t.contact}, ${m.to}, ${m.channel.sender}, ${JSON.stringify(m.content)},
        ${m.status ?? 'queued'}, ${now}, ${now})`,
    );
  }
  for (let i = 0; i < rows.length; i += 500) {
    await tx.run(
      sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id,
            contact_id, "to", "from", content, status, created_at, updated_at)
          VALUES ${sql.join(rows.slice(i, i + 500))}`,
    );
  }
  return rows.map((r) => r.values[0] as string);
}

/** One of storeOutboundsIn's messages: its id. */
export async function storeOutboundIn(tx: Queryable, ctx: CoreCtx, input: FreeOutbound): Promise<string> {
  return (await storeOutboundsIn(tx, ctx, [input]))[0];
}

export async function startV1(overrides: Record<string, unknown> = {}): Promise<TestServer> {
  return startTestServer({ 'log.level': 'warn', ...overrides });
}
