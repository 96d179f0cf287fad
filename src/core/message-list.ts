import { stmt } from '../db/stmt.js';
import { contactEmail } from '../lib/email.js';
import { idFloor } from '../lib/id-time.js';
import { normalizeE164 } from '../lib/phone.js';
import type { ChannelType, CoreCtx } from './context.js';
import type { MessageRow } from './messages.js';

// A partner's messages, newest first, as a keyset page off messages_partner (partner_id, id):
// ids begin with their creation time, so a date range is an id range on the same index.

export interface MessageFilter {
  channel?: ChannelType;
  status?: string;
  /** A phone number, email address, PSID or IGSID: the messages with that contact, either way. */
  address?: string;
  createdAfter?: number;
  createdBefore?: number;
}

const LIST_COLUMNS = `id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id, contact_id, "to", "from",
  content, status, provider_message_id, provider_id_indexed, price, segments, error_code, error_message, dispatch_uncertain,
  refunded, sent_at, created_at, updated_at`;

export function listPartnerMessages(
  ctx: CoreCtx,
  partnerId: string,
  f: MessageFilter,
  limit: number,
  beforeId?: string | null,
): MessageRow[] {
  const where = ['partner_id = ?'];
  const params: unknown[] = [partnerId];
  if (beforeId) {
    where.push('id < ?');
    params.push(beforeId);
  }
  if (f.createdBefore !== undefined) {
    where.push('id < ?');
    params.push(idFloor('msg', f.createdBefore));
  }
  if (f.createdAfter !== undefined) {
    where.push('id >= ?');
    params.push(idFloor('msg', f.createdAfter));
  }
  if (f.channel) {
    where.push('channel_type = ?');
    params.push(f.channel);
  }
  if (f.status) {
    where.push('status = ?');
    params.push(f.status);
  }
  let index = 'messages_partner';
  if (f.address) {
    // Every message joins its contact's conversation (the accept transaction writes both), so
    // the messages to or from an address are those of its contact's conversations: read off
    // messages_conversation, not found by walking all of the partner's messages.
    const conversations = contactConversations(ctx, partnerId, f.address);
    if (conversations.length === 0) return [];
    where.push(`conversation_id IN (${conversations.map(() => '?').join(', ')})`);
    params.push(...conversations);
    index = 'messages_conversation';
  }
  params.push(limit);
  const sql = `SELECT ${LIST_COLUMNS} FROM messages INDEXED BY ${index} WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT ?`;
  return stmt(ctx.db.sqlite, sql).all(...params) as MessageRow[];
}

/** The conversations of the partner's contact with this phone number, email address, PSID or IGSID. */
function contactConversations(ctx: CoreCtx, partnerId: string, address: string): string[] {
  const a = address.trim();
  const contacts = stmt<[string, string, string, string, string], { id: string }>(
    ctx.db.sqlite,
    'SELECT id FROM contacts WHERE partner_id = ? AND (phone = ? OR email = ? OR psid = ? OR igsid = ?)',
  ).all(partnerId, normalizeE164(a) ?? a, contactEmail(a), a, a);
  const out: string[] = [];
  const of = stmt<[string], { id: string }>(ctx.db.sqlite, 'SELECT id FROM conversations WHERE contact_id = ?');
  for (const c of contacts) for (const conv of of.all(c.id)) out.push(conv.id);
  return out.slice(0, 500);
}

/** Outbound messages by status over the last `hours`, for the Overview. */
export function statusCounts(ctx: CoreCtx, partnerId: string, hours = 24): { status: string; n: number }[] {
  const since = ctx.now() - hours * 3_600_000;
  return stmt(
    ctx.db.sqlite,
    `SELECT status, COUNT(*) AS n FROM messages INDEXED BY messages_partner
      WHERE partner_id = ? AND id >= ? AND direction = 'outbound' GROUP BY status ORDER BY n DESC`,
  ).all(partnerId, idFloor('msg', since)) as { status: string; n: number }[];
}
