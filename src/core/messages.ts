import type { Row } from '../db/rows.js';
import type { messages, messageStatusHistory } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
import { newId } from '../lib/ids.js';
import { moneyJson } from '../lib/money.js';
import { contentRefs, contentText, type MessageContent } from './message-content.js';
import type { ChannelType, CoreCtx } from './context.js';
import { contactIdFor, findOrCreateContact, type ContactRow } from './contacts.js';
import { touchConversation } from './conversations.js';
import { emitEvent, type EventType } from './events.js';
import { debit, InsufficientBalanceError, refund } from './ledger.js';
import { REDACTED_CONTENT_SQL, redactedContent } from './retention.js';
import { canAdvance, isFailure, type MessageStatus } from './statuses.js';
import { idFloor, idTime } from '../lib/id-time.js';
import { iso } from '../lib/time.js';

/** A message as `SELECT *` returns it; its status is one the state machine knows. */
export type MessageRow = Row<typeof messages> & { status: MessageStatus };

export type HistoryRow = Row<typeof messageStatusHistory>;

const INSERT_MESSAGE = `INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id,
  contact_id, "to", "from", content, status, provider_message_id, provider_id_indexed, price, segments, error_code, error_message,
  dispatch_uncertain, refunded, sent_at, created_at, updated_at, deleted_at, send_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

function insertMessage(ctx: CoreCtx, r: MessageRow) {
  stmt(ctx.db.sqlite, INSERT_MESSAGE).run(
    r.id,
    r.partner_id,
    r.direction,
    r.channel_type,
    r.channel_id,
    r.gateway_id,
    r.conversation_id,
    r.contact_id,
    r.to,
    r.from,
    r.content,
    r.status,
    r.provider_message_id,
    r.provider_id_indexed,
    r.price,
    r.segments,
    r.error_code,
    r.error_message,
    r.dispatch_uncertain,
    r.refunded,
    r.sent_at,
    r.created_at,
    r.updated_at,
    r.deleted_at,
    r.send_at,
  );
}

const INSERT_HISTORY = `INSERT INTO message_status_history (message_id, status, provider_status, error_code, error_message, ignored, occurred_at, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;

export function history(
  ctx: CoreCtx,
  messageId: string,
  status: string,
  opts: {
    providerStatus?: string | null;
    errorCode?: string | null;
    errorMessage?: string | null;
    ignored?: boolean;
    at?: number;
  } = {},
) {
  const now = ctx.now();
  stmt(ctx.db.sqlite, INSERT_HISTORY).run(
    messageId,
    status,
    opts.providerStatus ?? null,
    opts.errorCode ?? null,
    opts.errorMessage ?? null,
    opts.ignored ? 1 : 0,
    opts.at ?? now,
    now,
  );
}

export interface CreateOutboundInput {
  partnerId: string;
  channel: { id: string; type: ChannelType; gatewayId: string; sender: string };
  to: string;
  content: MessageContent;
  price: number;
  /** Why the price is what it is, in the ledger (a WhatsApp template's category). */
  priceNote?: string;
  segments: number;
  actor: string;
  /** Partner's low-balance threshold in micro-units (null: none). */
  lowBalanceThreshold: number | null;
  /** A scheduled send's time (ms): the message is created 'scheduled', debited all the same. */
  sendAt?: number;
}

/**
 * The money rule's write half: debit, message (queued), contact and conversation, all in
 * the caller's transaction (which also enqueues the dispatch job). Throws
 * InsufficientBalanceError with nothing written if funds do not cover the price.
 */
export function createOutbound(ctx: CoreCtx, input: CreateOutboundInput): MessageRow {
  const id = newId('msg');
  const after = debit(ctx, input.partnerId, input.price, id, 'send', input.priceNote ?? null);
  const before = after + input.price;
  const contactId = contactIdFor(ctx, input.partnerId, input.channel.type, input.to);
  const conv = touchConversation(ctx, input.partnerId, contactId, input.channel.type, input.channel.id);
  const now = ctx.now();
  const row: MessageRow = {
    id,
    partner_id: input.partnerId,
    direction: 'outbound',
    channel_type: input.channel.type,
    channel_id: input.channel.id,
    gateway_id: input.channel.gatewayId,
    conversation_id: conv.id,
    contact_id: contactId,
    to: input.to,
    from: input.channel.sender,
    content: JSON.stringify(input.content),
    status: input.sendAt === undefined ? 'queued' : 'scheduled',
    provider_message_id: null,
    provider_id_indexed: 1,
    price: input.price,
    segments: input.segments,
    error_code: null,
    error_message: null,
    dispatch_uncertain: 0,
    dispatch_in_flight: 0,
    refunded: 0,
    sent_at: null,
    created_at: now,
    updated_at: now,
    deleted_at: null,
    send_at: input.sendAt ?? null,
  };
  // No 'queued' history row: messageHistory derives it from created_at (one write fewer per send).
  insertMessage(ctx, row);
  if (input.lowBalanceThreshold !== null && before >= input.lowBalanceThreshold && after < input.lowBalanceThreshold) {
    emitEvent(ctx, input.partnerId, 'partner.balance_low', {
      partner_id: input.partnerId,
      balance: moneyJson(after),
      threshold: moneyJson(input.lowBalanceThreshold),
    });
  }
  return row;
}

export interface InboundInput {
  partnerId: string;
  channel: { id: string; type: ChannelType; gatewayId: string; sender: string };
  from: string;
  profileName?: string | null;
  providerMessageId: string | null;
  content: MessageContent;
  occurredAt: number;
}

/**
 * Store an inbound message, its contact and conversation, announcing nothing. With deletedAt
 * (the customer unsent it before it reached msgd) it is stored deleted, its content redacted.
 */
export function storeInbound(
  ctx: CoreCtx,
  input: InboundInput,
  deletedAt: number | null = null,
): { message: MessageRow; contact: ContactRow; content: MessageContent } {
  const { contact } = findOrCreateContact(ctx, input.partnerId, input.channel.type, input.from, {
    name: input.profileName ?? null,
    inboundAt: input.occurredAt,
  });
  const conv = touchConversation(ctx, input.partnerId, contact.id, input.channel.type, input.channel.id, {
    inbound: true,
    at: input.occurredAt,
  });
  // A reply or reaction names the other message by the provider's id; the partner knows it by ours.
  const content = structuredClone(input.content);
  for (const ref of contentRefs(content))
    ref.message_id = messageIdFor(ctx, input.partnerId, input.channel.type, ref.provider_message_id);
  const now = ctx.now();
  const row: MessageRow = {
    id: newId('msg'),
    partner_id: input.partnerId,
    direction: 'inbound',
    channel_type: input.channel.type,
    channel_id: input.channel.id,
    gateway_id: input.channel.gatewayId,
    conversation_id: conv.id,
    contact_id: contact.id,
    to: input.channel.sender,
    from: input.from,
    content: JSON.stringify(deletedAt === null ? content : redactedContent(content.kind, now)),
    status: 'received',
    provider_message_id: input.providerMessageId,
    provider_id_indexed: 1,
    price: 0,
    segments: 1,
    error_code: null,
    error_message: null,
    dispatch_uncertain: 0,
    dispatch_in_flight: 0,
    refunded: 0,
    sent_at: input.occurredAt,
    created_at: now,
    updated_at: now,
    deleted_at: deletedAt,
    send_at: null,
  };
  insertMessage(ctx, row);
  history(ctx, row.id, 'received', { at: input.occurredAt });
  return { message: row, contact, content };
}

/** Store an inbound message, its contact and conversation, and the message.received event. */
export function createInbound(
  ctx: CoreCtx,
  input: InboundInput,
): { message: MessageRow; contact: ContactRow; eventId: string } {
  const { message: row, contact, content } = storeInbound(ctx, input);
  const ev = emitEvent(ctx, input.partnerId, 'message.received', {
    channel: input.channel.type,
    from: input.from,
    body: contentText(content),
    message_id: row.id,
    conversation_id: row.conversation_id,
    to: input.channel.sender,
    media: content.kind === 'media' ? content.media : [],
    contact: { id: contact.id, name: contact.name, phone: contact.phone, email: contact.email },
    received_at: iso(input.occurredAt),
    // The whole content, as GET /v1/messages/{id} shows it: kind, the option picked, reply_to, ...
    content,
  });
  return { message: row, contact, eventId: ev.id };
}

/** The message.received event of a message, found by the partner and a short id range, loses its content. */
export const REDACT_RECEIVED_EVENT_SQL = `UPDATE events INDEXED BY events_partner
    SET payload = json_set(payload, '$.body', '', '$.media', json('[]'), '$.content', json(?))
  WHERE partner_id = ? AND id >= ? AND id < ? AND type = 'message.received' AND json_extract(payload, '$.message_id') = ?
  RETURNING id`;

/**
 * What partner endpoints answered to an event's deliveries: an answer may quote the request (an
 * echo, a framework's debug error page), and the log keeps its first KiB for the operator.
 */
export const DROP_DELIVERY_ANSWERS_SQL = `UPDATE webhook_attempts SET response_snippet = NULL
  WHERE response_snippet IS NOT NULL AND delivery_id IN (SELECT id FROM webhook_deliveries WHERE event_id = ?)`;

/** What markDeleted needs of the message. */
export type DeletedTarget = Pick<
  MessageRow,
  'id' | 'partner_id' | 'channel_type' | 'from' | 'to' | 'conversation_id' | 'provider_message_id'
>;

/**
 * The customer unsent an inbound message (Messenger/Instagram is_deleted): it is marked deleted
 * (deleted_at, when the customer unsent it) and its content redacted as retention redacts it;
 * who, when, its conversation and its history stay. Its message.received event, kept in the
 * outbox for retries and replays, loses the content too, and so do its deliveries' logged
 * answers (one may quote the request). The partner is told with
 * message.deleted. Returns false, with nothing written, when it was deleted already.
 */
export function markDeleted(ctx: CoreCtx, m: DeletedTarget, at: number): boolean {
  const db = ctx.db.sqlite;
  const now = ctx.now();
  const moved = stmt(
    db,
    `UPDATE messages SET content = CASE WHEN json_extract(content, '$.kind') IS 'redacted' THEN content ELSE ${REDACTED_CONTENT_SQL} END,
       deleted_at = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL`,
  ).run(iso(now), at, now, m.id);
  if (moved.changes === 0) return false;
  const content = stmt<[string], { content: string }>(db, 'SELECT content FROM messages WHERE id = ?').get(
    m.id,
  )!.content;
  // Emitted in the message's own transaction, just after it: its id's time is at or after the
  // message id's (both by the wall clock), so events_partner finds it in a short id range.
  const born = idTime(m.id);
  const announced = stmt<[string, string, string, string, string], { id: string }>(db, REDACT_RECEIVED_EVENT_SQL).all(
    content,
    m.partner_id,
    idFloor('evt', born),
    idFloor('evt', born + 60_000),
    m.id,
  );
  for (const ev of announced) stmt(db, DROP_DELIVERY_ANSWERS_SQL).run(ev.id);
  emitEvent(ctx, m.partner_id, 'message.deleted', {
    message_id: m.id,
    channel: m.channel_type,
    from: m.from,
    to: m.to,
    conversation_id: m.conversation_id,
    provider_message_id: m.provider_message_id,
    deleted_at: iso(at),
  });
  return true;
}

// INDEXED BY: the planner otherwise walks all the partner's messages on messages_partner.
export const MESSAGE_BY_PROVIDER_ID_SQL =
  'SELECT id FROM messages INDEXED BY messages_provider WHERE provider_message_id = ? AND provider_id_indexed = 1 AND partner_id = ? AND channel_type = ? ORDER BY id LIMIT 1';

/** msgd's id of the partner's message on that channel with this provider id (either direction), if any. */
function messageIdFor(ctx: CoreCtx, partnerId: string, channel: ChannelType, providerMessageId: string): string | null {
  const r = stmt<[string, string, string], { id: string }>(ctx.db.sqlite, MESSAGE_BY_PROVIDER_ID_SQL).get(
    providerMessageId,
    partnerId,
    channel,
  );
  return r?.id ?? null;
}

export function getMessageRow(ctx: CoreCtx, id: string): MessageRow | undefined {
  return stmt<[string], MessageRow>(ctx.db.sqlite, 'SELECT * FROM messages WHERE id = ?').get(id);
}

/** A message without its content: what a status change reads and writes. */
export type MessageState = Omit<MessageRow, 'content'>;

const STATE_COLUMNS = `id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id, contact_id, "to", "from",
  status, provider_message_id, provider_id_indexed, price, segments, error_code, error_message, dispatch_uncertain, dispatch_in_flight, refunded, sent_at, created_at, updated_at, deleted_at, send_at`;

/** The message as a status change needs it: every column but the content, which may be a long email. */
export function getMessageState(ctx: CoreCtx, id: string): MessageState | undefined {
  return stmt<[string], MessageState>(ctx.db.sqlite, `SELECT ${STATE_COLUMNS} FROM messages WHERE id = ?`).get(id);
}

/**
 * A message's status history, oldest first. An outbound message's first entry, 'queued' (or
 * 'scheduled') at its creation, is not stored (a send writes one row fewer): it is derived
 * here, unless a database written before that change holds it.
 */
export function messageHistory(
  ctx: CoreCtx,
  id: string,
  message?: Pick<MessageRow, 'direction' | 'created_at' | 'send_at'>,
): HistoryRow[] {
  const rows = stmt<[string], HistoryRow>(
    ctx.db.sqlite,
    'SELECT * FROM message_status_history WHERE message_id = ? ORDER BY id',
  ).all(id);
  const m =
    message ??
    stmt<[string], Pick<MessageRow, 'direction' | 'created_at' | 'send_at'>>(
      ctx.db.sqlite,
      'SELECT direction, created_at, send_at FROM messages WHERE id = ?',
    ).get(id);
  const first = m?.send_at != null ? 'scheduled' : 'queued';
  if (!m || m.direction !== 'outbound' || rows[0]?.status === first) return rows;
  const queued: HistoryRow = {
    id: 0,
    message_id: id,
    status: first,
    provider_status: null,
    error_code: null,
    error_message: null,
    ignored: 0,
    occurred_at: m.created_at,
    created_at: m.created_at,
  };
  return [queued, ...rows];
}

const EVENT_FOR: Partial<Record<MessageStatus, EventType>> = {
  sent: 'message.sent',
  delivered: 'message.delivered',
  read: 'message.read',
  failed: 'message.failed',
  undelivered: 'message.undelivered',
  bounced: 'message.bounced',
  opened: 'message.opened',
  clicked: 'message.clicked',
  deferred: 'message.deferred',
  dropped: 'message.dropped',
  canceled: 'message.canceled',
};

export interface StatusChange {
  status: MessageStatus;
  providerStatus?: string | null;
  providerMessageId?: string | null;
  /** With providerMessageId: whether reports will name the message by it (see SendResult). */
  namedInReports?: boolean;
  errorCode?: string | null;
  errorMessage?: string | null;
  occurredAt?: number;
  /**
   * Refund the price if this moves the message to a failure (or cancels it). Dispatch failures
   * (the provider never accepted) always refund; provider-reported failures follow billing config.
   */
  refundOnFailure?: boolean;
}

export interface StatusResult {
  changed: boolean;
  from: MessageStatus;
  to: MessageStatus;
  refunded: boolean;
  /** Charged again: proof it arrived came after its price was refunded. */
  charged: boolean;
}

/**
 * Record a status event in history and move the message forward if the state machine
 * allows; emit its event and apply a refund at most once. Inside the caller's transaction.
 */
export function applyStatus(ctx: CoreCtx, msg: MessageState, change: StatusChange): StatusResult {
  const advance = canAdvance(msg.status, change.status);
  history(ctx, msg.id, change.status, {
    providerStatus: change.providerStatus,
    errorCode: change.errorCode,
    errorMessage: change.errorMessage,
    ignored: !advance,
    at: change.occurredAt,
  });
  if (!advance) {
    if (change.providerMessageId && !msg.provider_message_id) {
      stmt(ctx.db.sqlite, 'UPDATE messages SET provider_message_id = ?, provider_id_indexed = ? WHERE id = ?').run(
        change.providerMessageId,
        change.namedInReports ? 0 : 1,
        msg.id,
      );
    }
    return { changed: false, from: msg.status, to: msg.status, refunded: false, charged: false };
  }
  const now = ctx.now();
  const from = msg.status;
  const failing = isFailure(change.status);
  const doRefund =
    (failing || change.status === 'canceled') && !!change.refundOnFailure && msg.refunded === 0 && msg.price > 0;
  // Out of a failure only proof it arrived moves a message (delivered, read, opened). If its
  // price was refunded (the provider reported the failure, or dispatch ran out of retries with
  // the outcome unknown), the partner is charged again, as for any delivered message, unless
  // that would take it past its credit limit: it then stays refunded.
  const charged =
    isFailure(from) && !failing && msg.refunded === 1 && msg.price > 0 && chargeAgain(ctx, msg, change.status);
  // The message's error is its failure's: taken with a failure, dropped when it arrived after all
  // (the history keeps it), otherwise left (a retry's note while it waits).
  const errors = failing ? 1 : isFailure(from) ? 2 : 0;
  stmt(
    ctx.db.sqlite,
    `UPDATE messages SET status = ?, provider_message_id = COALESCE(?, provider_message_id),
       provider_id_indexed = COALESCE(?, provider_id_indexed), error_code = CASE ? WHEN 1 THEN ? WHEN 2 THEN NULL ELSE error_code END,
       error_message = CASE ? WHEN 1 THEN ? WHEN 2 THEN NULL ELSE error_message END,
       refunded = ?, sent_at = COALESCE(sent_at, ?), updated_at = ? WHERE id = ?`,
  ).run(
    change.status,
    change.providerMessageId ?? null,
    change.providerMessageId ? (change.namedInReports ? 0 : 1) : null,
    errors,
    change.errorCode ?? null,
    errors,
    change.errorMessage ?? null,
    doRefund ? 1 : charged ? 0 : msg.refunded,
    change.status === 'sent' ? (change.occurredAt ?? now) : null,
    now,
    msg.id,
  );
  if (doRefund)
    refund(
      ctx,
      msg.partner_id,
      msg.price,
      msg.id,
      `refund: ${change.status}${change.errorCode ? ` (${change.errorCode})` : ''}`,
      'system',
    );
  emitStatusEvent(ctx, msg, from, change, change.occurredAt ?? now);
  msg.status = change.status;
  if (doRefund) msg.refunded = 1;
  if (charged) msg.refunded = 0;
  return { changed: true, from, to: change.status, refunded: doRefund, charged };
}

/** The debit for a refunded message that arrived after all; false, with nothing written, if funds do not cover it. */
function chargeAgain(ctx: CoreCtx, msg: MessageState, status: MessageStatus): boolean {
  try {
    debit(ctx, msg.partner_id, msg.price, msg.id, 'system', `charged again: ${status} after the refund`);
    return true;
  } catch (e) {
    if (e instanceof InsufficientBalanceError) return false;
    throw e;
  }
}

/** What a status event and markSent need of the message: columns no status change alters. */
export type SentTarget = Pick<MessageRow, 'id' | 'partner_id' | 'channel_type' | 'to'>;

/** The partner's event for a message that moved from `from` to change.status, if it has one. */
function emitStatusEvent(
  ctx: CoreCtx,
  msg: SentTarget,
  from: MessageStatus,
  change: Pick<StatusChange, 'status' | 'providerStatus' | 'errorCode' | 'errorMessage'>,
  at: number,
) {
  const type = EVENT_FOR[change.status];
  if (!type) return;
  emitEvent(ctx, msg.partner_id, type, {
    message_id: msg.id,
    channel: msg.channel_type,
    to: msg.to,
    status: change.status,
    previous_status: from,
    provider_status: change.providerStatus ?? null,
    error: isFailure(change.status) ? { code: change.errorCode ?? null, message: change.errorMessage ?? null } : null,
    occurred_at: iso(at),
  });
}

/**
 * The provider accepted a message that dispatch marked 'sending': applyStatus's result for
 * that one move, in one statement that also clears a retry's leftover error note and, when
 * an attempt may have reached the provider before, sets dispatch_uncertain. It reads nothing
 * first: the UPDATE only matches a message still 'sending'. Returns false, with nothing
 * written, when it is not (a provider report or an operator got there first); the caller
 * then goes through applyStatus with a fresh read.
 */
export function markSent(
  ctx: CoreCtx,
  m: SentTarget,
  change: {
    providerMessageId: string;
    namedInReports: boolean;
    providerStatus: string | null;
    occurredAt: number;
    uncertain: boolean;
  },
): boolean {
  const now = ctx.now();
  const moved = stmt(
    ctx.db.sqlite,
    `UPDATE messages SET status = 'sent', provider_message_id = ?, provider_id_indexed = ?, error_code = NULL,
       error_message = NULL, dispatch_uncertain = MAX(dispatch_uncertain, ?), dispatch_in_flight = 0, sent_at = COALESCE(sent_at, ?), updated_at = ?
     WHERE id = ? AND status = 'sending'`,
  ).run(
    change.providerMessageId,
    change.namedInReports ? 0 : 1,
    change.uncertain ? 1 : 0,
    change.occurredAt,
    now,
    m.id,
  );
  if (moved.changes === 0) return false;
  history(ctx, m.id, 'sent', { providerStatus: change.providerStatus, at: change.occurredAt });
  emitStatusEvent(ctx, m, 'sending', { status: 'sent', providerStatus: change.providerStatus }, change.occurredAt);
  return true;
}

/** Flag a message whose provider call may have been in flight when the process died. */
export function flagUncertain(ctx: CoreCtx, messageId: string) {
  stmt(ctx.db.sqlite, 'UPDATE messages SET dispatch_uncertain = 1, updated_at = ? WHERE id = ?').run(
    ctx.now(),
    messageId,
  );
}

/** Content as the API shows it: snake_case, as the partner wrote from_name and reply_to. */
function contentJson(content: MessageContent): object {
  if (content.kind !== 'email') return content;
  const { fromName, replyTo, ...rest } = content;
  return {
    ...rest,
    ...(fromName !== undefined ? { from_name: fromName } : {}),
    ...(replyTo !== undefined ? { reply_to: replyTo } : {}),
  };
}

export function messageJson(m: MessageRow, hist?: HistoryRow[]) {
  const content = contentJson(JSON.parse(m.content) as MessageContent);
  return {
    id: m.id,
    direction: m.direction,
    channel: m.channel_type,
    to: m.to,
    from: m.from,
    status: m.status,
    content,
    price: moneyJson(m.price),
    segments: m.segments,
    refunded: m.refunded === 1,
    provider_message_id: m.provider_message_id,
    error: m.error_code || m.error_message ? { code: m.error_code, message: m.error_message } : null,
    possible_duplicate: m.dispatch_uncertain === 1,
    conversation_id: m.conversation_id,
    contact_id: m.contact_id,
    // Inbound: when the customer sent it (the provider's timestamp); outbound: when msgd handed
    // it to the provider. created_at is when msgd stored the message.
    sent_at: m.sent_at === null ? null : iso(m.sent_at),
    created_at: iso(m.created_at),
    updated_at: iso(m.updated_at),
    // When the customer unsent it (inbound Messenger/Instagram); its content is then redacted.
    deleted_at: m.deleted_at === null ? null : iso(m.deleted_at),
    // A scheduled send's time; null for a message sent at once.
    send_at: m.send_at === null ? null : iso(m.send_at),
    ...(hist
      ? {
          history: hist.map((h) => ({
            status: h.status,
            provider_status: h.provider_status,
            error: h.error_code || h.error_message ? { code: h.error_code, message: h.error_message } : null,
            applied: h.ignored === 0,
            occurred_at: iso(h.occurred_at),
            recorded_at: iso(h.created_at),
          })),
        }
      : {}),
  };
}
