import { rawStmt, stmt } from '../db/stmt.js';
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
// arrays, COL saying where each column is (faster form kept: npm run bench, v1 conversations).
const COLUMNS = `c.id, c.channel_type, c.status, c.contact_id, c.last_message_at, c.last_inbound_at, c.created_at, c.updated_at,
  ct.name, ct.phone, ct.email, ct.psid, ct.igsid`;

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

/** A conversation with its contact, as read for the API: see COLUMNS for the order. */
export type ConversationListRow = [
  id: string,
  channel_type: ChannelType,
  status: 'open' | 'closed',
  contact_id: string,
  last_message_at: number | null,
  last_inbound_at: number | null,
  created_at: number,
  updated_at: number,
  name: string | null,
  phone: string | null,
  email: string | null,
  psid: string | null,
  igsid: string | null,
];

export function listConversations(
  ctx: CoreCtx,
  partnerId: string,
  f: ConversationFilter,
  sort: ConversationSort,
  limit: number,
  after?: ConversationKey | null,
): ConversationListRow[] {
  const q = conversationsQuery(partnerId, f, sort, limit, after);
  return rawStmt(ctx.db.sqlite, q.sql).all(q.params) as ConversationListRow[];
}

/** The key a page's cursor carries for this row. */
export function conversationKey(c: ConversationListRow): { id: string; updatedAt: number } {
  return { id: c[COL.id], updatedAt: c[COL.updatedAt] };
}

/** The statement and parameters of a list page (exported so tests can EXPLAIN it). */
export function conversationsQuery(
  partnerId: string,
  f: ConversationFilter,
  sort: ConversationSort,
  limit: number,
  after?: ConversationKey | null,
): { sql: string; params: unknown[] } {
  const where = ['c.partner_id = ?'];
  const params: unknown[] = [partnerId];
  const byUpdated = sort !== '-created_at';
  const index = f.contactId
    ? 'conversations_contact'
    : byUpdated
      ? 'conversations_partner_updated'
      : 'conversations_partner';
  if (f.contactId) {
    where.push('c.contact_id = ?');
    params.push(f.contactId);
  }
  if (f.channel) {
    where.push('c.channel_type = ?');
    params.push(f.channel);
  }
  if (f.status) {
    where.push('c.status = ?');
    params.push(f.status);
  }
  if (f.updatedSince !== undefined) {
    where.push('c.updated_at >= ?');
    params.push(f.updatedSince);
  }
  if (f.updatedBefore !== undefined) {
    where.push('c.updated_at < ?');
    params.push(f.updatedBefore);
  }
  if (after) {
    if (!byUpdated) {
      where.push('c.id < ?');
      params.push(after.id);
    } else {
      const t = after.updatedAt ?? 0;
      // Written as a range on updated_at plus a tie-break so the index range still applies.
      where.push(
        sort === 'updated_at'
          ? 'c.updated_at >= ? AND (c.updated_at > ? OR c.id > ?)'
          : 'c.updated_at <= ? AND (c.updated_at < ? OR c.id < ?)',
      );
      params.push(t, t, after.id);
    }
  }
  const order =
    sort === '-created_at'
      ? 'c.id DESC'
      : sort === 'updated_at'
        ? 'c.updated_at, c.id'
        : 'c.updated_at DESC, c.id DESC';
  const sql = `SELECT ${COLUMNS}
      FROM conversations c INDEXED BY ${index}
      JOIN contacts ct ON ct.id = c.contact_id
     WHERE ${where.join(' AND ')}
     ORDER BY ${order} LIMIT ?`;
  params.push(limit);
  return { sql, params };
}

export function getConversation(ctx: CoreCtx, partnerId: string, id: string): ConversationListRow | undefined {
  const sql = `SELECT ${COLUMNS} FROM conversations c JOIN contacts ct ON ct.id = c.contact_id WHERE c.id = ? AND c.partner_id = ?`;
  return rawStmt(ctx.db.sqlite, sql).get(id, partnerId) as ConversationListRow | undefined;
}

/** A page of a conversation's messages off messages_conversation (conversation_id, id). */
export function conversationMessages(
  ctx: CoreCtx,
  conversationId: string,
  order: 'asc' | 'desc',
  limit: number,
  afterId?: string | null,
): MessageRow[] {
  const cmp = order === 'asc' ? '>' : '<';
  const sql = `SELECT * FROM messages INDEXED BY messages_conversation WHERE conversation_id = ?${afterId ? ` AND id ${cmp} ?` : ''}
     ORDER BY id ${order === 'asc' ? 'ASC' : 'DESC'} LIMIT ?`;
  const args: unknown[] = afterId ? [conversationId, afterId, limit] : [conversationId, limit];
  return stmt<unknown[], MessageRow>(ctx.db.sqlite, sql).all(...args);
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
