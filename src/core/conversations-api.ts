import type { Database, Statement } from 'better-sqlite3';
import { stmt } from '../db/stmt.js';
import { fastIso, fastIsoOrNull } from '../lib/fast-iso.js';
import type { ChannelType, CoreCtx } from './context.js';
import type { ConversationRow } from './conversations.js';
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

// Only what the JSON shows: every column costs a conversion per row. fromRaw reads them by position.
const COLUMNS = `c.id, c.channel_type, c.status, c.contact_id, c.last_message_at, c.last_inbound_at, c.created_at, c.updated_at,
  ct.name AS ct_name, ct.phone AS ct_phone, ct.email AS ct_email, ct.psid AS ct_psid, ct.igsid AS ct_igsid`;

export interface ConversationListRow
  extends Pick<ConversationRow, 'id' | 'channel_type' | 'status' | 'contact_id' | 'last_message_at' | 'last_inbound_at' | 'created_at' | 'updated_at'> {
  ct_name: string | null;
  ct_phone: string | null;
  ct_email: string | null;
  ct_psid: string | null;
  ct_igsid: string | null;
}

export function listConversations(
  ctx: CoreCtx,
  partnerId: string,
  f: ConversationFilter,
  sort: ConversationSort,
  limit: number,
  after?: ConversationKey | null,
): ConversationListRow[] {
  const q = conversationsQuery(partnerId, f, sort, limit, after);
  // Rows as arrays, turned into objects here: better-sqlite3 builds named rows property by
  // property through the V8 API, which costs more than the query itself on a 50-row page.
  const rows = rawStatement(ctx.db.sqlite, q.sql).all(q.params) as unknown[][];
  return rows.map(fromRaw);
}

const rawStatements = new WeakMap<Database, Map<string, Statement>>();

function rawStatement(db: Database, sql: string): Statement {
  let cache = rawStatements.get(db);
  if (!cache) rawStatements.set(db, (cache = new Map()));
  let st = cache.get(sql);
  if (!st) cache.set(sql, (st = db.prepare(sql).raw(true)));
  return st;
}

function fromRaw(r: unknown[]): ConversationListRow {
  return {
    id: r[0] as string,
    channel_type: r[1] as ChannelType,
    status: r[2] as 'open' | 'closed',
    contact_id: r[3] as string,
    last_message_at: r[4] as number | null,
    last_inbound_at: r[5] as number | null,
    created_at: r[6] as number,
    updated_at: r[7] as number,
    ct_name: r[8] as string | null,
    ct_phone: r[9] as string | null,
    ct_email: r[10] as string | null,
    ct_psid: r[11] as string | null,
    ct_igsid: r[12] as string | null,
  };
}

/** The statement and parameters of a list page (exported so tests can EXPLAIN it). */
export function conversationsQuery(
  partnerId: string,
  f: ConversationFilter,
  sort: ConversationSort,
  limit: number,
  after?: ConversationKey | null,
): { sql: string; params: Record<string, unknown> } {
  const where = ['c.partner_id = @partner'];
  const params: Record<string, unknown> = { partner: partnerId, limit };
  const byUpdated = sort !== '-created_at';
  const index = f.contactId ? 'conversations_contact' : byUpdated ? 'conversations_partner_updated' : 'conversations_partner';
  if (f.contactId) {
    where.push('c.contact_id = @contact');
    params.contact = f.contactId;
  }
  if (f.channel) {
    where.push('c.channel_type = @channel');
    params.channel = f.channel;
  }
  if (f.status) {
    where.push('c.status = @status');
    params.status = f.status;
  }
  if (f.updatedSince !== undefined) {
    where.push('c.updated_at >= @since');
    params.since = f.updatedSince;
  }
  if (f.updatedBefore !== undefined) {
    where.push('c.updated_at < @before');
    params.before = f.updatedBefore;
  }
  if (after) {
    params.afterId = after.id;
    if (!byUpdated) where.push('c.id < @afterId');
    else {
      params.afterT = after.updatedAt ?? 0;
      // Written as a range on updated_at plus a tie-break so the index range still applies.
      where.push(
        sort === 'updated_at'
          ? 'c.updated_at >= @afterT AND (c.updated_at > @afterT OR c.id > @afterId)'
          : 'c.updated_at <= @afterT AND (c.updated_at < @afterT OR c.id < @afterId)',
      );
    }
  }
  const order = sort === '-created_at' ? 'c.id DESC' : sort === 'updated_at' ? 'c.updated_at, c.id' : 'c.updated_at DESC, c.id DESC';
  const sql = `SELECT ${COLUMNS}
      FROM conversations c INDEXED BY ${index}
      JOIN contacts ct ON ct.id = c.contact_id
     WHERE ${where.join(' AND ')}
     ORDER BY ${order} LIMIT @limit`;
  return { sql, params };
}

export function getConversation(ctx: CoreCtx, partnerId: string, id: string): ConversationListRow | undefined {
  return stmt<[string, string], ConversationListRow>(
    ctx.db.sqlite,
    `SELECT ${COLUMNS} FROM conversations c JOIN contacts ct ON ct.id = c.contact_id
      WHERE c.id = ? AND c.partner_id = ?`,
  ).get(id, partnerId);
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
    id: c.id,
    channel: c.channel_type,
    status: c.status,
    contact: {
      id: c.contact_id,
      name: c.ct_name,
      phone: c.ct_phone,
      email: c.ct_email,
      messenger_psid: c.ct_psid,
      instagram_igsid: c.ct_igsid,
    },
    last_message_at: fastIsoOrNull(c.last_message_at),
    last_inbound_at: fastIsoOrNull(c.last_inbound_at),
    created_at: fastIso(c.created_at),
    updated_at: fastIso(c.updated_at),
  };
}
