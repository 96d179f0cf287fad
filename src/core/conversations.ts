import type { conversations } from '../db/schema.js';
import { indexedBy } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import type { Row } from '../db/rows.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { newId } from '../lib/ids.js';
import type { ChannelType, CoreCtx } from './context.js';

export type ConversationRow = Row<typeof conversations>;

// INDEXED BY: without ANALYZE statistics the planner may take conversations_partner and walk
// every conversation of the partner, newest first, until this contact's: a cost that grows
// with every new recipient.
export const OPEN_CONVERSATION_SQL = `SELECT * FROM conversations INDEXED BY conversations_contact
  WHERE contact_id = ? AND channel_type = ? AND status = 'open' AND partner_id = ?
  ORDER BY id DESC LIMIT 1`;

/** The open conversation's activity moved to `at`, or a new open conversation: what both forms write. */
function touched(
  open: ConversationRow | undefined,
  partnerId: string,
  contactId: string,
  channel: ChannelType,
  channelId: string | null,
  inbound: boolean | undefined,
  at: number,
  now: number,
): ConversationRow {
  if (open) {
    const lastInbound = inbound ? Math.max(at, open.last_inbound_at ?? 0) : open.last_inbound_at;
    const lastMessage = Math.max(at, open.last_message_at ?? 0);
    return { ...open, last_message_at: lastMessage, last_inbound_at: lastInbound, updated_at: now };
  }
  return {
    id: newId('conv'),
    partner_id: partnerId,
    contact_id: contactId,
    channel_type: channel,
    channel_id: channelId,
    status: 'open',
    last_message_at: at,
    last_inbound_at: inbound ? at : null,
    created_at: now,
    updated_at: now,
  };
}

/**
 * The contact's open conversation on a channel, created if there is none; its activity
 * times move with every message. Runs inside the caller's transaction.
 */
export function touchConversation(
  ctx: CoreCtx,
  partnerId: string,
  contactId: string,
  channel: ChannelType,
  channelId: string | null,
  opts: { inbound?: boolean; at?: number } = {},
): ConversationRow {
  const db = ctx.db.sqlite;
  const now = ctx.now();
  const at = opts.at ?? now;
  const open = stmt<[string, string, string], ConversationRow>(db, OPEN_CONVERSATION_SQL).get(
    contactId,
    channel,
    partnerId,
  );
  const row = touched(open, partnerId, contactId, channel, channelId, opts.inbound, at, now);
  if (open) {
    stmt(db, `UPDATE conversations SET last_message_at = ?, last_inbound_at = ?, updated_at = ? WHERE id = ?`).run(
      row.last_message_at,
      row.last_inbound_at,
      now,
      open.id,
    );
    return row;
  }
  stmt(
    db,
    `INSERT INTO conversations (id, partner_id, contact_id, channel_type, channel_id, status, last_message_at, last_inbound_at, created_at, updated_at)
     VALUES (@id, @partner_id, @contact_id, @channel_type, @channel_id, @status, @last_message_at, @last_inbound_at, @created_at, @updated_at)`,
  ).run(row);
  return row;
}

/**
 * touchConversation inside the caller's store transaction `q`, on either store. Its callers
 * hold the contact's row (read for update), so two transactions do not open two conversations.
 */
export async function touchConversationIn(
  q: Queryable,
  ctx: CoreCtx,
  partnerId: string,
  contactId: string,
  channel: ChannelType,
  channelId: string | null,
  opts: { inbound?: boolean; at?: number } = {},
): Promise<ConversationRow> {
  const now = ctx.now();
  const at = opts.at ?? now;
  const open = await q.get<ConversationRow>(
    sql`SELECT * FROM conversations ${indexedBy(ctx.store.dialect, 'conversations_contact')}
        WHERE contact_id = ${contactId} AND channel_type = ${channel} AND status = 'open' AND partner_id = ${partnerId}
        ORDER BY id DESC LIMIT 1`,
  );
  const row = touched(open, partnerId, contactId, channel, channelId, opts.inbound, at, now);
  if (open) {
    await q.run(
      sql`UPDATE conversations SET last_message_at = ${row.last_message_at}, last_inbound_at = ${row.last_inbound_at}, updated_at = ${now}
          WHERE id = ${open.id}`,
    );
    return row;
  }
  await q.run(
    sql`INSERT INTO conversations (id, partner_id, contact_id, channel_type, channel_id, status, last_message_at, last_inbound_at, created_at, updated_at)
        VALUES (${row.id}, ${row.partner_id}, ${row.contact_id}, ${row.channel_type}, ${row.channel_id}, ${row.status},
          ${row.last_message_at}, ${row.last_inbound_at}, ${row.created_at}, ${row.updated_at})`,
  );
  return row;
}
