import type { Row } from '../db/rows.js';
import type { messages, messageStatusHistory } from '../db/schema.js';
import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { newId } from '../lib/ids.js';
import { moneyJson } from '../lib/money.js';
import { contentRefs, contentText, type MessageContent } from './message-content.js';
import type { ChannelType, CoreCtx } from './context.js';
import { indexedBy } from '../db/dialect.js';
import { contactIdFor, findOrCreateContact, findOrCreateContactIn, type ContactRow } from './contacts.js';
import { touchConversation, touchConversationIn, type ConversationRow } from './conversations.js';
import { emitEvent, emitEventIn } from './events.js';
import { debit } from './ledger.js';
import { redactedContent } from './retention.js';
import type { MessageStatus } from './statuses.js';
import { iso } from '../lib/time.js';

/** A message as `SELECT *` returns it; its status is one the state machine knows. */
export type MessageRow = Row<typeof messages> & { status: MessageStatus };

export type HistoryRow = Row<typeof messageStatusHistory>;

const INSERT_MESSAGE = `INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id,
  contact_id, "to", "from", content, status, provider_message_id, provider_id_indexed, price, segments, error_code, error_message,
  dispatch_uncertain, refunded, sent_at, created_at, updated_at, deleted_at, send_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** insertMessage in the caller's store transaction `q`, on either store. */
export async function insertMessageIn(q: Queryable, r: MessageRow): Promise<void> {
  await q.run(
    sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id,
          contact_id, "to", "from", content, status, provider_message_id, provider_id_indexed, price, segments, error_code,
          error_message, dispatch_uncertain, refunded, sent_at, created_at, updated_at, deleted_at, send_at)
        VALUES (${r.id}, ${r.partner_id}, ${r.direction}, ${r.channel_type}, ${r.channel_id}, ${r.gateway_id},
          ${r.conversation_id}, ${r.contact_id}, ${r.to}, ${r.from}, ${r.content}, ${r.status}, ${r.provider_message_id},
          ${r.provider_id_indexed}, ${r.price}, ${r.segments}, ${r.error_code}, ${r.error_message}, ${r.dispatch_uncertain},
          ${r.refunded}, ${r.sent_at}, ${r.created_at}, ${r.updated_at}, ${r.deleted_at}, ${r.send_at})`,
  );
}

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

// Creating and reading messages. Status transitions (and every other change to a message) are
// in message-status.ts; the API's JSON of a message in message-json.ts.

const INSERT_HISTORY = `INSERT INTO message_status_history (message_id, status, provider_status, error_code, error_message, ignored, occurred_at, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;

/** A history row's details: the provider's word, the error, whether the state machine ignored it, when it happened. */
export interface HistoryOpts {
  providerStatus?: string | null;
  errorCode?: string | null;
  errorMessage?: string | null;
  ignored?: boolean;
  at?: number;
}

export function recordHistory(ctx: CoreCtx, messageId: string, status: string, opts: HistoryOpts = {}) {
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

/** recordHistory, inside the caller's store transaction `q`, on either store. */
export async function recordHistoryIn(
  q: Queryable,
  ctx: CoreCtx,
  messageId: string,
  status: string,
  opts: HistoryOpts = {},
): Promise<void> {
  const now = ctx.now();
  await q.run(
    sql`INSERT INTO message_status_history (message_id, status, provider_status, error_code, error_message, ignored, occurred_at, created_at)
        VALUES (${messageId}, ${status}, ${opts.providerStatus ?? null}, ${opts.errorCode ?? null}, ${opts.errorMessage ?? null},
          ${opts.ignored ? 1 : 0}, ${opts.at ?? now}, ${now})`,
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
  const row = inboundRow(ctx, input, contact, conv, content, deletedAt);
  insertMessage(ctx, row);
  recordHistory(ctx, row.id, 'received', { at: input.occurredAt });
  return { message: row, contact, content };
}

/** The row of an inbound message: 'received', its content redacted when it arrives deleted. */
function inboundRow(
  ctx: CoreCtx,
  input: InboundInput,
  contact: ContactRow,
  conv: ConversationRow,
  content: MessageContent,
  deletedAt: number | null,
): MessageRow {
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
  return row;
}

/** Store an inbound message, its contact and conversation, and the message.received event. */
export function createInbound(
  ctx: CoreCtx,
  input: InboundInput,
): { message: MessageRow; contact: ContactRow; eventId: string } {
  const { message: row, contact, content } = storeInbound(ctx, input);
  const ev = emitEvent(ctx, input.partnerId, 'message.received', receivedEvent(input, row, contact, content));
  return { message: row, contact, eventId: ev.id };
}

/** What message.received carries. */
function receivedEvent(input: InboundInput, row: MessageRow, contact: ContactRow, content: MessageContent) {
  return {
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
  };
}

/** storeInbound inside the caller's store transaction `q`, on either store. */
export async function storeInboundIn(
  q: Queryable,
  ctx: CoreCtx,
  input: InboundInput,
  deletedAt: number | null = null,
): Promise<{ message: MessageRow; contact: ContactRow; content: MessageContent }> {
  const { contact } = await findOrCreateContactIn(q, ctx, input.partnerId, input.channel.type, input.from, {
    name: input.profileName ?? null,
    inboundAt: input.occurredAt,
  });
  const conv = await touchConversationIn(q, ctx, input.partnerId, contact.id, input.channel.type, input.channel.id, {
    inbound: true,
    at: input.occurredAt,
  });
  const content = structuredClone(input.content);
  for (const ref of contentRefs(content))
    ref.message_id = await messageIdForIn(q, ctx, input.partnerId, input.channel.type, ref.provider_message_id);
  const r = inboundRow(ctx, input, contact, conv, content, deletedAt);
  await insertMessageIn(q, r);
  await recordHistoryIn(q, ctx, r.id, 'received', { at: input.occurredAt });
  return { message: r, contact, content };
}

/** createInbound inside the caller's store transaction `q`, on either store. */
export async function createInboundIn(
  q: Queryable,
  ctx: CoreCtx,
  input: InboundInput,
): Promise<{ message: MessageRow; contact: ContactRow; eventId: string }> {
  const { message: row, contact, content } = await storeInboundIn(q, ctx, input);
  const ev = await emitEventIn(
    q,
    ctx,
    input.partnerId,
    'message.received',
    receivedEvent(input, row, contact, content),
  );
  return { message: row, contact, eventId: ev.id };
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

async function messageIdForIn(
  q: Queryable,
  ctx: CoreCtx,
  partnerId: string,
  channel: ChannelType,
  providerMessageId: string,
): Promise<string | null> {
  const r = await q.get<{ id: string }>(
    sql`SELECT id FROM messages ${indexedBy(ctx.store.dialect, 'messages_provider')}
        WHERE provider_message_id = ${providerMessageId} AND provider_id_indexed = 1 AND partner_id = ${partnerId}
          AND channel_type = ${channel} ORDER BY id LIMIT 1`,
  );
  return r?.id ?? null;
}

export function getMessageRow(ctx: CoreCtx, id: string): MessageRow | undefined {
  return stmt<[string], MessageRow>(ctx.db.sqlite, 'SELECT * FROM messages WHERE id = ?').get(id);
}

/** getMessageRow, through `q` (the store, or a transaction's Tx), on either store. */
export function getMessageRowIn(q: Queryable, id: string): Promise<MessageRow | undefined> {
  return q.get<MessageRow>(sql`SELECT * FROM messages WHERE id = ${id}`);
}

/** A message without its content: what a status change reads and writes. */
export type MessageState = Omit<MessageRow, 'content'>;

export const STATE_COLUMNS = `id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id, contact_id, "to", "from",
  status, provider_message_id, provider_id_indexed, price, segments, error_code, error_message, dispatch_uncertain, dispatch_in_flight, refunded, sent_at, created_at, updated_at, deleted_at, send_at`;

/** The message as a status change needs it: every column but the content, which may be a long email. */
export function getMessageState(ctx: CoreCtx, id: string): MessageState | undefined {
  return stmt<[string], MessageState>(ctx.db.sqlite, `SELECT ${STATE_COLUMNS} FROM messages WHERE id = ?`).get(id);
}

/** getMessageState, through `q` (the store, or a transaction's Tx), on either store. */
export function getMessageStateIn(q: Queryable, id: string): Promise<MessageState | undefined> {
  // STATE_COLUMNS written out: a literal template is one prepared statement per store.
  return q.get<MessageState>(
    sql`SELECT id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id, contact_id, "to", "from",
          status, provider_message_id, provider_id_indexed, price, segments, error_code, error_message, dispatch_uncertain,
          dispatch_in_flight, refunded, sent_at, created_at, updated_at, deleted_at, send_at
        FROM messages WHERE id = ${id}`,
  );
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
    stmt<[string], HistoryHead>(ctx.db.sqlite, 'SELECT direction, created_at, send_at FROM messages WHERE id = ?').get(
      id,
    );
  return withFirstEntry(id, rows, m);
}

/** messageHistory, through `q` (the store, or a transaction's Tx), on either store. */
export async function messageHistoryIn(q: Queryable, id: string, message?: HistoryHead): Promise<HistoryRow[]> {
  const rows = await q.all<HistoryRow>(sql`SELECT * FROM message_status_history WHERE message_id = ${id} ORDER BY id`);
  const m =
    message ?? (await q.get<HistoryHead>(sql`SELECT direction, created_at, send_at FROM messages WHERE id = ${id}`));
  return withFirstEntry(id, rows, m);
}

type HistoryHead = Pick<MessageRow, 'direction' | 'created_at' | 'send_at'>;

/** The stored history with the derived first entry of an outbound message ahead of it. */
function withFirstEntry(id: string, rows: HistoryRow[], m: HistoryHead | undefined): HistoryRow[] {
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
