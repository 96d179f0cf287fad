import { type Sql, sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { invalid } from '../lib/errors.js';
import type { CoreCtx } from './context.js';
import type { MessageRow } from './messages.js';
import { getMessageRow } from './messages.js';
import { getPartner } from './partners.js';
import { FAILURE_STATUSES, STATUS_RANK, type MessageStatus } from './statuses.js';

// The operator's reads of messages across partners (msgctl messages list, the console's Find
// and webhook tail). The partner's own list, paged on indexes, is src/core/message-list.ts.

export interface OperatorMessageFilter {
  partnerId?: string;
  status?: MessageStatus;
  /** Only failed, undelivered, bounced or dropped messages. */
  failed?: boolean;
  /** Only messages that may have reached the provider twice. */
  uncertain?: boolean;
  /** At most 1000. */
  limit: number;
}

/** Messages, newest first (msgctl messages list). */
export function listOperatorMessages(ctx: CoreCtx, f: OperatorMessageFilter): Promise<MessageRow[]> {
  const where: Sql[] = [];
  if (f.partnerId) where.push(sql`partner_id = ${f.partnerId}`);
  if (f.status) where.push(sql`status = ${f.status}`);
  if (f.failed) where.push(sql`status IN (${sql.join(FAILURE_STATUSES.map((s) => sql`${s}`))})`);
  if (f.uncertain) where.push(sql`dispatch_uncertain = 1`);
  const filter = where.length ? sql`WHERE ${sql.join(where, ' AND ')}` : sql``;
  return ctx.store.all<MessageRow>(
    sql`SELECT * FROM messages ${filter} ORDER BY id DESC LIMIT ${Math.min(f.limit, 1000)}`,
  );
}

// Finding messages on a store of millions, each way through an index: by id (primary key), by
// partner (messages_partner), by recipient (the partner's contact, its conversations, their
// messages). A status alone is looked for among the newest messages only: no index serves it,
// and the send path gets none for the console.

export const FIND_LIMIT = 50;
/** How far back a search by status alone looks. */
export const STATUS_SCAN = 20_000;

export interface MessageQuery {
  id?: string;
  /** Slug or id. */
  partner?: string;
  recipient?: string;
  status?: string;
}

export type MessageSummary = Pick<
  MessageRow,
  'id' | 'partner_id' | 'direction' | 'channel_type' | 'to' | 'from' | 'status' | 'price' | 'error_code' | 'created_at'
>;
const COLS =
  'm.id, m.partner_id, m.direction, m.channel_type, m."to", m."from", m.status, m.price, m.error_code, m.created_at';

/** At most FIND_LIMIT messages, newest first, matching every field given. */
export function findOperatorMessages(ctx: CoreCtx, q: MessageQuery): MessageSummary[] {
  const status = q.status?.trim() || null;
  if (status && !(status in STATUS_RANK))
    throw invalid(`unknown status "${status}"`, [
      { field: 'status', message: `one of ${Object.keys(STATUS_RANK).join(', ')}` },
    ]);
  if (q.id?.trim()) {
    const m = getMessageRow(ctx, q.id.trim());
    return m ? [m] : [];
  }
  const partnerId = q.partner?.trim() ? getPartner(ctx, q.partner.trim()).id : null;
  const recipient = q.recipient?.trim();
  if (recipient) {
    const partners = partnerId
      ? [partnerId]
      : stmt<[], { id: string }>(ctx.db.sqlite, 'SELECT id FROM partners')
          .all()
          .map((p) => p.id);
    const out: MessageSummary[] = [];
    const contact = stmt<[{ p: string; r: string }], { id: string }>(
      ctx.db.sqlite,
      `SELECT id FROM contacts WHERE partner_id = @p AND phone = @r
       UNION SELECT id FROM contacts WHERE partner_id = @p AND email = lower(@r)
       UNION SELECT id FROM contacts WHERE partner_id = @p AND psid = @r
       UNION SELECT id FROM contacts WHERE partner_id = @p AND igsid = @r`,
    );
    const conversations = stmt<[string], { id: string }>(
      ctx.db.sqlite,
      'SELECT id FROM conversations INDEXED BY conversations_contact WHERE contact_id = ?',
    );
    // One conversation at a time, newest first off (conversation_id, id): no sort of a
    // contact's whole history.
    const inConversation = stmt<[{ c: string; s: string | null; n: number }], MessageSummary>(
      ctx.db.sqlite,
      `SELECT ${COLS} FROM messages m INDEXED BY messages_conversation
        WHERE m.conversation_id = @c AND (@s IS NULL OR m.status = @s) ORDER BY m.id DESC LIMIT @n`,
    );
    for (const p of partners)
      for (const c of contact.all({ p, r: recipient }))
        for (const conv of conversations.all(c.id))
          out.push(...inConversation.all({ c: conv.id, s: status, n: FIND_LIMIT }));
    return out.sort((a, b) => (a.id < b.id ? 1 : -1)).slice(0, FIND_LIMIT);
  }
  if (partnerId)
    return stmt<[{ p: string; s: string | null; n: number; scan: number }], MessageSummary>(
      ctx.db.sqlite,
      `SELECT ${COLS} FROM (SELECT * FROM messages INDEXED BY messages_partner WHERE partner_id = @p ORDER BY id DESC LIMIT @scan) m
        WHERE (@s IS NULL OR m.status = @s) ORDER BY m.id DESC LIMIT @n`,
    ).all({ p: partnerId, s: status, n: FIND_LIMIT, scan: status ? STATUS_SCAN : FIND_LIMIT });
  return stmt<[{ scan: number; s: string | null; n: number }], MessageSummary>(
    ctx.db.sqlite,
    `SELECT ${COLS} FROM (SELECT * FROM messages ORDER BY id DESC LIMIT @scan) m WHERE (@s IS NULL OR m.status = @s)
      ORDER BY m.id DESC LIMIT @n`,
  ).all({ scan: STATUS_SCAN, s: status, n: FIND_LIMIT });
}

export type MessageStatusRef = Pick<MessageRow, 'id' | 'status'>;

/** A message's id and status now. */
export function messageStatusOf(ctx: CoreCtx, id: string): MessageStatusRef | undefined {
  return stmt<[string], MessageStatusRef>(ctx.db.sqlite, 'SELECT id, status FROM messages WHERE id = ?').get(id);
}

/** The message, of any partner, a provider's report names by the provider's id, with its status now. */
export function messageStatusByProviderId(ctx: CoreCtx, providerMessageId: string): MessageStatusRef | undefined {
  return stmt<[string], MessageStatusRef>(
    ctx.db.sqlite,
    `SELECT id, status FROM messages INDEXED BY messages_provider
      WHERE provider_message_id = ? AND provider_message_id IS NOT NULL AND provider_id_indexed = 1 LIMIT 1`,
  ).get(providerMessageId);
}

/** msgd's id of the message, of any partner, with this provider id: off the index alone, no row read. */
export function messageIdByProviderId(ctx: CoreCtx, providerMessageId: string): string | undefined {
  return stmt<[string], { id: string }>(
    ctx.db.sqlite,
    `SELECT id FROM messages INDEXED BY messages_provider
      WHERE provider_message_id = ? AND provider_message_id IS NOT NULL AND provider_id_indexed = 1 LIMIT 1`,
  ).get(providerMessageId)?.id;
}
