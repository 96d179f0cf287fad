import { type Sql, sql } from '../db/sql.js';
import { indexedBy } from '../db/dialect.js';
import { invalid } from '../lib/errors.js';
import type { CoreCtx } from './context.js';
import type { MessageRow } from './messages.js';
import { readPartner } from './partners.js';
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

/** At most FIND_LIMIT messages, newest first, matching every field given. */
export async function findOperatorMessages(ctx: CoreCtx, q: MessageQuery): Promise<MessageSummary[]> {
  const status = q.status?.trim() || null;
  if (status && !(status in STATUS_RANK))
    throw invalid(`unknown status "${status}"`, [
      { field: 'status', message: `one of ${Object.keys(STATUS_RANK).join(', ')}` },
    ]);
  const d = ctx.store.dialect;
  if (q.id?.trim()) {
    const m = await ctx.store.get<MessageSummary>(
      sql`SELECT m.id, m.partner_id, m.direction, m.channel_type, m."to", m."from", m.status, m.price, m.error_code, m.created_at
          FROM messages m WHERE m.id = ${q.id.trim()}`,
    );
    return m ? [m] : [];
  }
  const partnerId = q.partner?.trim() ? (await readPartner(ctx.store, q.partner.trim())).id : null;
  const withStatus = status ? sql` AND m.status = ${status}` : sql``;
  const recipient = q.recipient?.trim();
  if (recipient) {
    const partners = partnerId
      ? [partnerId]
      : (await ctx.store.all<{ id: string }>(sql`SELECT id FROM partners ORDER BY id`)).map((p) => p.id);
    const out: MessageSummary[] = [];
    for (const p of partners) {
      const contacts = await ctx.store.all<{ id: string }>(
        sql`SELECT id FROM contacts WHERE partner_id = ${p} AND phone = ${recipient}
            UNION SELECT id FROM contacts WHERE partner_id = ${p} AND email = lower(CAST(${recipient} AS TEXT))
            UNION SELECT id FROM contacts WHERE partner_id = ${p} AND psid = ${recipient}
            UNION SELECT id FROM contacts WHERE partner_id = ${p} AND igsid = ${recipient}`,
      );
      for (const c of contacts) {
        const conversations = await ctx.store.all<{ id: string }>(
          sql`SELECT id FROM conversations ${indexedBy(d, 'conversations_contact')} WHERE contact_id = ${c.id}`,
        );
        // One conversation at a time, newest first off (conversation_id, id): no sort of a
        // contact's whole history.
        for (const conv of conversations)
          out.push(
            ...(await ctx.store.all<MessageSummary>(
              sql`SELECT m.id, m.partner_id, m.direction, m.channel_type, m."to", m."from", m.status, m.price, m.error_code, m.created_at
                  FROM messages m ${indexedBy(d, 'messages_conversation')}
                  WHERE m.conversation_id = ${conv.id}${withStatus} ORDER BY m.id DESC LIMIT ${FIND_LIMIT}`,
            )),
          );
      }
    }
    return out.sort((a, b) => (a.id < b.id ? 1 : -1)).slice(0, FIND_LIMIT);
  }
  if (partnerId)
    return ctx.store.all<MessageSummary>(
      sql`SELECT m.id, m.partner_id, m.direction, m.channel_type, m."to", m."from", m.status, m.price, m.error_code, m.created_at
          FROM (SELECT * FROM messages ${indexedBy(d, 'messages_partner')} WHERE partner_id = ${partnerId}
                ORDER BY id DESC LIMIT ${status ? STATUS_SCAN : FIND_LIMIT}) m
          WHERE 1 = 1${withStatus} ORDER BY m.id DESC LIMIT ${FIND_LIMIT}`,
    );
  return ctx.store.all<MessageSummary>(
    sql`SELECT m.id, m.partner_id, m.direction, m.channel_type, m."to", m."from", m.status, m.price, m.error_code, m.created_at
        FROM (SELECT * FROM messages ORDER BY id DESC LIMIT ${STATUS_SCAN}) m
        WHERE 1 = 1${withStatus} ORDER BY m.id DESC LIMIT ${FIND_LIMIT}`,
  );
}

export type MessageStatusRef = Pick<MessageRow, 'id' | 'status'>;

/** A message's id and status now. */
export function messageStatusOf(ctx: CoreCtx, id: string): Promise<MessageStatusRef | undefined> {
  return ctx.store.get<MessageStatusRef>(sql`SELECT id, status FROM messages WHERE id = ${id}`);
}

/** The message, of any partner, a provider's report names by the provider's id, with its status now. */
export function messageStatusByProviderId(
  ctx: CoreCtx,
  providerMessageId: string,
): Promise<MessageStatusRef | undefined> {
  return ctx.store.get<MessageStatusRef>(
    sql`SELECT id, status FROM messages ${indexedBy(ctx.store.dialect, 'messages_provider')}
        WHERE provider_message_id = ${providerMessageId} AND provider_message_id IS NOT NULL AND provider_id_indexed = 1
        LIMIT 1`,
  );
}

/** msgd's id of the message, of any partner, with this provider id: off the index alone, no row read. */
export async function messageIdByProviderId(ctx: CoreCtx, providerMessageId: string): Promise<string | undefined> {
  const row = await ctx.store.get<{ id: string }>(
    sql`SELECT id FROM messages ${indexedBy(ctx.store.dialect, 'messages_provider')}
        WHERE provider_message_id = ${providerMessageId} AND provider_message_id IS NOT NULL AND provider_id_indexed = 1
        LIMIT 1`,
  );
  return row?.id;
}
