import { indexedBy } from '../db/dialect.js';
import type { Row } from '../db/rows.js';
import type { contacts, conversations } from '../db/schema.js';
import { type Dialect, type Sql, sql } from '../db/sql.js';
import { iso } from '../lib/time.js';
import type { ChannelType, CoreCtx } from './context.js';
import { windowExpiresAt } from './customer-window.js';
import type { MessageRow } from './messages.js';

// Read side of conversations for the resource API. Every list is a keyset page read straight
// off an index (the plan is pinned with INDEXED BY: the nightly `PRAGMA optimize` may gather
// statistics that would otherwise change plans under a partner's feet):
//   default order, newest first  → conversations_partner (partner_id, id)
//   by last activity             → conversations_partner_updated (partner_id, updated_at)
//   one contact                  → conversations_contact (contact_id, channel_type, status)

export type ConversationSort = '-created_at' | 'updated_at' | '-updated_at';

export interface ConversationFilter {
  channel?: ChannelType;
  status?: 'open' | 'closed';
  contactId?: string;
  updatedSince?: number;
  updatedBefore?: number;
}

/** Where the previous page ended: the id, and updated_at for the updated_at orders. */
export interface ConversationKey {
  id: string;
  updatedAt?: number;
}

// Only what the JSON shows: every column costs a conversion per row. Rows come back as
// arrays (values()), COL saying where each column is (faster form kept: npm run bench, v1 conversations).
const COLUMNS =
  sql.raw(`c.id, c.channel_type, c.status, c.contact_id, c.last_message_at, c.last_inbound_at, c.created_at, c.updated_at,
  ct.name, ct.phone, ct.email, ct.psid, ct.igsid`);

const COL = {
  id: 0,
  channel: 1,
  status: 2,
  contactId: 3,
  lastMessageAt: 4,
  lastInboundAt: 5,
  createdAt: 6,
  updatedAt: 7,
  name: 8,
  phone: 9,
  email: 10,
  psid: 11,
  igsid: 12,
} as const;

type C = Row<typeof conversations>;
type Ct = Row<typeof contacts>;

/** A conversation with its contact, as read for the API: see COLUMNS for the order. */
export type ConversationListRow = [
  id: C['id'],
  channel_type: C['channel_type'],
  status: C['status'],
  contact_id: C['contact_id'],
  last_message_at: C['last_message_at'],
  last_inbound_at: C['last_inbound_at'],
  created_at: C['created_at'],
  updated_at: C['updated_at'],
  name: Ct['name'],
  phone: Ct['phone'],
  email: Ct['email'],
  psid: Ct['psid'],
  igsid: Ct['igsid'],
];

export function listConversations(
  ctx: CoreCtx,
  partnerId: string,
  f: ConversationFilter,
  sort: ConversationSort,
  limit: number,
  after?: ConversationKey | null,
): Promise<ConversationListRow[]> {
  return ctx.store.values<ConversationListRow>(conversationsQuery(ctx.store.dialect, partnerId, f, sort, limit, after));
}

/** The key a page's cursor carries for this row. */
export function conversationKey(c: ConversationListRow): { id: string; updatedAt: number } {
  return { id: c[COL.id], updatedAt: c[COL.updatedAt] };
}

/** The statement of a list page (exported so tests can EXPLAIN it). */
export function conversationsQuery(
  dialect: Dialect,
  partnerId: string,
  f: ConversationFilter,
  sort: ConversationSort,
  limit: number,
  after?: ConversationKey | null,
): Sql {
  const where = [sql`c.partner_id = ${partnerId}`];
  const byUpdated = sort !== '-created_at';
  const index = f.contactId
    ? 'conversations_contact'
    : byUpdated
      ? 'conversations_partner_updated'
      : 'conversations_partner';
  if (f.contactId) where.push(sql`c.contact_id = ${f.contactId}`);
  if (f.channel) where.push(sql`c.channel_type = ${f.channel}`);
  if (f.status) where.push(sql`c.status = ${f.status}`);
  if (f.updatedSince !== undefined) where.push(sql`c.updated_at >= ${f.updatedSince}`);
  if (f.updatedBefore !== undefined) where.push(sql`c.updated_at < ${f.updatedBefore}`);
  if (after) {
    if (!byUpdated) where.push(sql`c.id < ${after.id}`);
    else {
      const t = after.updatedAt ?? 0;
      // Written as a range on updated_at plus a tie-break so the index range still applies.
      where.push(
        sort === 'updated_at'
          ? sql`c.updated_at >= ${t} AND (c.updated_at > ${t} OR c.id > ${after.id})`
          : sql`c.updated_at <= ${t} AND (c.updated_at < ${t} OR c.id < ${after.id})`,
      );
    }
  }
  const order = sql.raw(
    sort === '-created_at'
      ? 'c.id DESC'
      : sort === 'updated_at'
        ? 'c.updated_at, c.id'
        : 'c.updated_at DESC, c.id DESC',
  );
  return sql`SELECT ${COLUMNS}
      FROM conversations c ${indexedBy(dialect, index)}
      JOIN contacts ct ON ct.id = c.contact_id
     WHERE ${sql.join(where, ' AND ')}
     ORDER BY ${order} LIMIT ${limit}`;
}

export async function getConversation(
  ctx: CoreCtx,
  partnerId: string,
  id: string,
): Promise<ConversationListRow | undefined> {
  const rows = await ctx.store.values<ConversationListRow>(
    sql`SELECT ${COLUMNS} FROM conversations c JOIN contacts ct ON ct.id = c.contact_id WHERE c.id = ${id} AND c.partner_id = ${partnerId}`,
  );
  return rows[0];
}

/** A page of a conversation's messages off messages_conversation (conversation_id, id). */
export function conversationMessages(
  ctx: CoreCtx,
  conversationId: string,
  order: 'asc' | 'desc',
  limit: number,
  afterId?: string | null,
): Promise<MessageRow[]> {
  const after = afterId ? sql` AND id ${sql.raw(order === 'asc' ? '>' : '<')} ${afterId}` : sql``;
  return ctx.store.all<MessageRow>(
    sql`SELECT * FROM messages ${indexedBy(ctx.store.dialect, 'messages_conversation')} WHERE conversation_id = ${conversationId}${after}
     ORDER BY id ${sql.raw(order === 'asc' ? 'ASC' : 'DESC')} LIMIT ${limit}`,
  );
}

export function conversationJson(c: ConversationListRow) {
  return {
    id: c[COL.id],
    channel: c[COL.channel],
    status: c[COL.status],
    contact: {
      id: c[COL.contactId],
      name: c[COL.name],
      phone: c[COL.phone],
      email: c[COL.email],
      messenger_psid: c[COL.psid],
      instagram_igsid: c[COL.igsid],
    },
    last_message_at: iso(c[COL.lastMessageAt]),
    last_inbound_at: iso(c[COL.lastInboundAt]),
    window_expires_at: iso(windowExpiresAt(c[COL.channel], c[COL.lastInboundAt])),
    created_at: iso(c[COL.createdAt]),
    updated_at: iso(c[COL.updatedAt]),
  };
}
