import { indexedBy } from '../db/dialect.js';
import { type Dialect, type Sql, sql } from '../db/sql.js';
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

/**
 * Is the window open between this business sender and customer at `now`? One read: the
 * customer's conversations on the channel type with an inbound message in the last day (an
 * inbound message moves last_inbound_at in the same transaction that stores it), and in one of
 * them an inbound message to the number the channel sends from now (the window belongs to the
 * business number too, not to one it used before).
 */
export async function windowOpen(
  ctx: CoreCtx,
  partnerId: string,
  channel: { type: ChannelType; sender: string },
  to: string,
  now: number,
): Promise<boolean> {
  const since = now - WINDOW_MS;
  const q = windowQuery(ctx.store.dialect, contactKeyFor(channel.type));
  const hit = await ctx.store.get(
    bind(q, [channel.type, partnerId, to, partnerId, since, idFloor('msg', since), channel.sender, since]),
  );
  return hit !== undefined;
}

// The window's query, its fragments (the index hints, the contact column) spliced in once per
// dialect and column: a query whose literal parts are the same array on every send is prepared
// once and found by identity (src/db/query.ts), where one flattened anew per send would be
// joined and looked up by its text each time. The values are bound per send (bind).
const windowQueries = new Map<string, Sql>();

function windowQuery(d: Dialect, column: string): Sql {
  const k = `${d}\0${column}`;
  let q = windowQueries.get(k);
  if (!q) {
    const v = null; // a value's place, bound per send
    q = sql`SELECT 1 AS hit FROM contacts ct
          JOIN conversations v ${indexedBy(d, 'conversations_contact')} ON v.contact_id = ct.id AND v.channel_type = ${v}
         WHERE ct.partner_id = ${v} AND ct.${sql.raw(column)} = ${v} AND v.partner_id = ${v} AND v.last_inbound_at >= ${v}
           AND EXISTS (SELECT 1 FROM messages m ${indexedBy(d, 'messages_conversation')}
                        WHERE m.conversation_id = v.id AND m.id >= ${v} AND m.direction = 'inbound' AND m."to" = ${v}
                          AND m.sent_at >= ${v})
         LIMIT 1`;
    windowQueries.set(k, q);
  }
  return q;
}

/** `q` with `values` in the places of its own, in order. */
function bind(q: Sql, values: unknown[]): Sql {
  if (values.length !== q.values.length) throw new Error(`${q.values.length} values expected, ${values.length} given`);
  return { strings: q.strings, values };
}

/**
 * The 400 for a free-form message outside the window, checked after the payload is valid and
 * before it is priced, so nothing is debited.
 */
export async function refuseOutsideWindow(
  ctx: CoreCtx,
  partnerId: string,
  channel: { type: ChannelType; sender: string; enforceWindow: boolean },
  to: string,
  content: MessageContent,
  /** When the message will go: now, or a scheduled send's send_at (the window must still be open then). */
  at: number = ctx.now(),
): Promise<void> {
  if (!channel.enforceWindow || content.kind === 'template') return;
  if (await windowOpen(ctx, partnerId, channel, to, at)) return;
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
