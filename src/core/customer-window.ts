import type { Row } from '../db/rows.js';
import type { conversations } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
import { AppError } from '../lib/errors.js';
import { idFloor } from '../lib/id-time.js';
import type { ChannelType, CoreCtx } from './context.js';
import { contactKeyFor } from './contacts.js';
import type { MessageContent } from './message-content.js';

// Meta's customer-service window: WhatsApp, Messenger and Instagram deliver a free-form
// message only within 24 hours of the customer's last message to that business number or
// page. WhatsApp still accepts such a send and reports it failed later (error 131047), after
// the debit; msgd sees every inbound message, so it refuses the send before any cost instead.
// A WhatsApp template is allowed outside the window; on Messenger and Instagram a message tag
// configured on the gateway (messaging_type MESSAGE_TAG) is.

export const WINDOW_MS = 24 * 3_600_000;

/** The channel types the rule applies to. */
export const WINDOW_CHANNELS: readonly ChannelType[] = ['whatsapp', 'messenger', 'instagram'];

/**
 * Whether sends through this gateway are held to the window: its kind says so from its settings
 * (Meta's kinds: unless `customer_service_window` is off, and not for tagged Messenger/Instagram
 * sends); the sandbox and others deliver any time. Unreadable settings are held to it.
 */
export function enforcesWindow(ctx: CoreCtx, kind: string | null, settingsJson: string | null): boolean {
  const rule = kind && ctx.gatewayKinds.has(kind) ? ctx.gatewayKinds.get(kind).customerServiceWindow : undefined;
  if (!rule) return false;
  let settings: Record<string, unknown> = {};
  try {
    settings = JSON.parse(settingsJson ?? '{}') ?? {};
  } catch {
    return true;
  }
  return rule(settings);
}

/** When the window of a conversation's channel closes, from its last inbound message; null if none applies. */
export function windowExpiresAt(channel: ChannelType, lastInboundAt: number | null): number | null {
  if (lastInboundAt === null || !WINDOW_CHANNELS.includes(channel)) return null;
  return lastInboundAt + WINDOW_MS;
}

// The newest inbound time of the customer on this channel type, from its conversations (an
// inbound message moves last_inbound_at in the same transaction that stores it).
const LAST_INBOUND_SQL = (key: string) => `SELECT v.id, v.last_inbound_at FROM contacts ct
    JOIN conversations v INDEXED BY conversations_contact ON v.contact_id = ct.id AND v.channel_type = ?
   WHERE ct.partner_id = ? AND ct.${key} = ? AND v.partner_id = ? AND v.last_inbound_at >= ?
   ORDER BY v.last_inbound_at DESC`;

// The window belongs to the business number too: an inbound message to the number the channel
// sends from now, not to one it used before. Read only within the last day of the conversation.
const INBOUND_TO_SENDER_SQL = `SELECT 1 FROM messages INDEXED BY messages_conversation
   WHERE conversation_id = ? AND id >= ? AND direction = 'inbound' AND "to" = ? AND sent_at >= ? LIMIT 1`;

/** Is the window open between this business sender and customer at `now`? */
export function windowOpen(
  ctx: CoreCtx,
  partnerId: string,
  channel: { type: ChannelType; sender: string },
  to: string,
  now: number,
): boolean {
  const since = now - WINDOW_MS;
  const db = ctx.db.sqlite;
  const convs = stmt<
    [string, string, string, string, number],
    Pick<Row<typeof conversations>, 'id' | 'last_inbound_at'>
  >(db, LAST_INBOUND_SQL(contactKeyFor(channel.type))).all(channel.type, partnerId, to, partnerId, since);
  const floor = idFloor('msg', since);
  const q = stmt<[string, string, string, number], unknown>(db, INBOUND_TO_SENDER_SQL);
  return convs.some((c) => q.get(c.id, floor, channel.sender, since) !== undefined);
}

/**
 * The 400 for a free-form message outside the window, checked after the payload is valid and
 * before it is priced, so nothing is debited.
 */
export function refuseOutsideWindow(
  ctx: CoreCtx,
  partnerId: string,
  channel: { type: ChannelType; sender: string; enforceWindow: boolean },
  to: string,
  content: MessageContent,
  /** When the message will go: now, or a scheduled send's send_at (the window must still be open then). */
  at: number = ctx.now(),
): void {
  if (!channel.enforceWindow || content.kind === 'template') return;
  if (windowOpen(ctx, partnerId, channel, to, at)) return;
  const how =
    channel.type === 'whatsapp'
      ? 'send an approved template (the template field) instead'
      : 'a message tag configured on the gateway by the operator lets it through (messaging_type MESSAGE_TAG)';
  throw new AppError(
    'outside_customer_service_window',
    at > ctx.now()
      ? `the 24-hour window the customer opened by writing to ${channel.sender} on ${channel.type} will have closed at send_at, so a free-form message would not be delivered then: ${how}`
      : `the customer has not written to ${channel.sender} on ${channel.type} in the last 24 hours, so a free-form message would not be delivered: ${how}`,
    [{ field: 'to', message: 'outside the 24-hour customer-service window' }],
  );
}
