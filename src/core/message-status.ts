import { indexedBy, inList, jsonText, redactedContent, unsentPayload } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import { type Dialect, sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { idFloor, idTime } from '../lib/id-time.js';
import { iso } from '../lib/time.js';
import type { CoreCtx } from './context.js';
import { emitEvent, emitEventIn, type EventType } from './events.js';
import { debit, debitIn, InsufficientBalanceError, refund, refundIn } from './ledger.js';
import { recordHistory, recordHistoryIn, type MessageRow, type MessageState } from './messages.js';
import { REDACTED_CONTENT_SQL } from './retention.js';
import { canAdvance, isFailure, type MessageStatus } from './statuses.js';

// Every change to a stored message: its status transitions (the state machine is
// src/core/statuses.ts), the marks dispatch keeps on it while it waits or is in flight, and a
// customer's unsend. Nothing outside src/core writes a message.

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
  emitEvent(ctx, m.partner_id, 'message.deleted', deletedEvent(m, at));
  return true;
}

/** What message.deleted carries, written by markDeleted and markDeletedIn. */
function deletedEvent(m: DeletedTarget, at: number) {
  return {
    message_id: m.id,
    channel: m.channel_type,
    from: m.from,
    to: m.to,
    conversation_id: m.conversation_id,
    provider_message_id: m.provider_message_id,
    deleted_at: iso(at),
  };
}

/** markDeleted in a store transaction (or on the store), on either store. */
export async function markDeletedIn(q: Queryable, ctx: CoreCtx, m: DeletedTarget, at: number): Promise<boolean> {
  const d = ctx.store.dialect;
  const now = ctx.now();
  const moved = await q.run(
    sql`UPDATE messages SET content = CASE WHEN ${jsonText(d, 'content', 'kind')} = 'redacted' THEN content
         ELSE ${redactedContent(d, 'content', iso(now))} END, deleted_at = ${at}, updated_at = ${now}
       WHERE id = ${m.id} AND deleted_at IS NULL`,
  );
  if (moved.changes === 0) return false;
  const { content } = (await q.get<{ content: string }>(sql`SELECT content FROM messages WHERE id = ${m.id}`))!;
  // In the message's own transaction, just after it, as markDeleted: a short id range of events_partner.
  const born = idTime(m.id);
  const announced = await q.all<{ id: string }>(
    sql`UPDATE events ${indexedBy(d, 'events_partner')} SET payload = ${unsentPayload(d, 'payload', content)}
        WHERE partner_id = ${m.partner_id} AND id >= ${idFloor('evt', born)} AND id < ${idFloor('evt', born + 60_000)}
          AND type = 'message.received' AND ${jsonText(d, 'payload', 'message_id')} = ${m.id}
        RETURNING id`,
  );
  for (const ev of announced) {
    await q.run(
      sql`UPDATE webhook_attempts SET response_snippet = NULL
          WHERE response_snippet IS NOT NULL AND delivery_id IN (SELECT id FROM webhook_deliveries WHERE event_id = ${ev.id})`,
    );
  }
  await emitEventIn(q, ctx, m.partner_id, 'message.deleted', deletedEvent(m, at));
  return true;
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

/** What a status change does to a message, decided before anything is written (both forms of applyStatus). */
interface StatusMove {
  advance: boolean;
  failing: boolean;
  /** Refund its price (at most once). */
  refund: boolean;
  /** Charge it again if funds allow: proof it arrived came after its price was refunded. */
  mayCharge: boolean;
  /** The message's error: 1 take the failure's, 2 drop it (it arrived after all), 0 leave it. */
  errors: 0 | 1 | 2;
}

function statusMove(msg: MessageState, change: StatusChange): StatusMove {
  const advance = canAdvance(msg.status, change.status);
  const failing = isFailure(change.status);
  const from = msg.status;
  return {
    advance,
    failing,
    refund:
      advance &&
      (failing || change.status === 'canceled') &&
      !!change.refundOnFailure &&
      msg.refunded === 0 &&
      msg.price > 0,
    // Out of a failure only proof it arrived moves a message (delivered, read, opened). If its
    // price was refunded (the provider reported the failure, or dispatch ran out of retries with
    // the outcome unknown), the partner is charged again, as for any delivered message, unless
    // that would take it past its credit limit: it then stays refunded.
    mayCharge: advance && isFailure(from) && !failing && msg.refunded === 1 && msg.price > 0,
    // The message's error is its failure's: taken with a failure, dropped when it arrived after all
    // (the history keeps it), otherwise left (a retry's note while it waits).
    errors: failing ? 1 : isFailure(from) ? 2 : 0,
  };
}

const historyOf = (change: StatusChange, ignored: boolean) => ({
  providerStatus: change.providerStatus,
  errorCode: change.errorCode,
  errorMessage: change.errorMessage,
  ignored,
  at: change.occurredAt,
});

const refundNote = (change: StatusChange) =>
  `refund: ${change.status}${change.errorCode ? ` (${change.errorCode})` : ''}`;
const chargeNote = (status: MessageStatus) => `charged again: ${status} after the refund`;

/** The message as it is after the move (the caller's object is updated, as the row was). */
function moved(msg: MessageState, change: StatusChange, m: StatusMove, charged: boolean): StatusResult {
  const from = msg.status;
  msg.status = change.status;
  if (m.refund) msg.refunded = 1;
  if (charged) msg.refunded = 0;
  return { changed: true, from, to: change.status, refunded: m.refund, charged };
}

const unchanged = (msg: MessageState): StatusResult => ({
  changed: false,
  from: msg.status,
  to: msg.status,
  refunded: false,
  charged: false,
});

/**
 * Record a status event in history and move the message forward if the state machine
 * allows; emit its event and apply a refund at most once. Inside the caller's transaction.
 */
export function applyStatus(ctx: CoreCtx, msg: MessageState, change: StatusChange): StatusResult {
  const m = statusMove(msg, change);
  recordHistory(ctx, msg.id, change.status, historyOf(change, !m.advance));
  if (!m.advance) {
    if (change.providerMessageId && !msg.provider_message_id) {
      stmt(ctx.db.sqlite, 'UPDATE messages SET provider_message_id = ?, provider_id_indexed = ? WHERE id = ?').run(
        change.providerMessageId,
        change.namedInReports ? 0 : 1,
        msg.id,
      );
    }
    return unchanged(msg);
  }
  const now = ctx.now();
  const charged = m.mayCharge && chargeAgain(ctx, msg, change.status);
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
    m.errors,
    change.errorCode ?? null,
    m.errors,
    change.errorMessage ?? null,
    m.refund ? 1 : charged ? 0 : msg.refunded,
    change.status === 'sent' ? (change.occurredAt ?? now) : null,
    now,
    msg.id,
  );
  if (m.refund) refund(ctx, msg.partner_id, msg.price, msg.id, refundNote(change), 'system');
  emitStatusEvent(ctx, msg, msg.status, change, change.occurredAt ?? now);
  return moved(msg, change, m, charged);
}

/** applyStatus, inside the caller's store transaction `q`, on either store. */
export async function applyStatusIn(
  q: Queryable,
  ctx: CoreCtx,
  msg: MessageState,
  change: StatusChange,
): Promise<StatusResult> {
  const m = statusMove(msg, change);
  await recordHistoryIn(q, ctx, msg.id, change.status, historyOf(change, !m.advance));
  if (!m.advance) {
    if (change.providerMessageId && !msg.provider_message_id) {
      await q.run(
        sql`UPDATE messages SET provider_message_id = ${change.providerMessageId},
              provider_id_indexed = ${change.namedInReports ? 0 : 1} WHERE id = ${msg.id}`,
      );
    }
    return unchanged(msg);
  }
  const now = ctx.now();
  const charged = m.mayCharge && (await chargeAgainIn(q, ctx, msg, change.status));
  const pmid = change.providerMessageId ?? null;
  const indexed = change.providerMessageId ? (change.namedInReports ? 0 : 1) : null;
  await q.run(
    sql`UPDATE messages SET status = ${change.status}, provider_message_id = COALESCE(${pmid}, provider_message_id),
          provider_id_indexed = COALESCE(${indexed}, provider_id_indexed),
          error_code = CASE WHEN ${m.errors} = 1 THEN ${change.errorCode ?? null} WHEN ${m.errors} = 2 THEN NULL ELSE error_code END,
          error_message = CASE WHEN ${m.errors} = 1 THEN ${change.errorMessage ?? null} WHEN ${m.errors} = 2 THEN NULL ELSE error_message END,
          refunded = ${m.refund ? 1 : charged ? 0 : msg.refunded},
          sent_at = COALESCE(sent_at, ${change.status === 'sent' ? (change.occurredAt ?? now) : null}), updated_at = ${now}
        WHERE id = ${msg.id}`,
  );
  if (m.refund) await refundIn(q, ctx, msg.partner_id, msg.price, msg.id, refundNote(change), 'system');
  await emitStatusEventIn(q, ctx, msg, msg.status, change, change.occurredAt ?? now);
  return moved(msg, change, m, charged);
}

/** The debit for a refunded message that arrived after all; false, with nothing written, if funds do not cover it. */
function chargeAgain(ctx: CoreCtx, msg: MessageState, status: MessageStatus): boolean {
  try {
    debit(ctx, msg.partner_id, msg.price, msg.id, 'system', chargeNote(status));
    return true;
  } catch (e) {
    if (e instanceof InsufficientBalanceError) return false;
    throw e;
  }
}

async function chargeAgainIn(q: Queryable, ctx: CoreCtx, msg: MessageState, status: MessageStatus): Promise<boolean> {
  try {
    await debitIn(q, ctx, msg.partner_id, msg.price, msg.id, 'system', chargeNote(status));
    return true;
  } catch (e) {
    if (e instanceof InsufficientBalanceError) return false;
    throw e;
  }
}

/** What a status event and markSent need of the message: columns no status change alters. */
export type SentTarget = Pick<MessageRow, 'id' | 'partner_id' | 'channel_type' | 'to'>;

type StatusEventChange = Pick<StatusChange, 'status' | 'providerStatus' | 'errorCode' | 'errorMessage'>;

/** The partner's event for a message that moved from `from` to change.status: its data. */
function statusEventData(msg: SentTarget, from: MessageStatus, change: StatusEventChange, at: number) {
  return {
    message_id: msg.id,
    channel: msg.channel_type,
    to: msg.to,
    status: change.status,
    previous_status: from,
    provider_status: change.providerStatus ?? null,
    error: isFailure(change.status) ? { code: change.errorCode ?? null, message: change.errorMessage ?? null } : null,
    occurred_at: iso(at),
  };
}

/** The partner's event for a message that moved from `from` to change.status, if it has one. */
function emitStatusEvent(ctx: CoreCtx, msg: SentTarget, from: MessageStatus, change: StatusEventChange, at: number) {
  const type = EVENT_FOR[change.status];
  if (type) emitEvent(ctx, msg.partner_id, type, statusEventData(msg, from, change, at));
}

async function emitStatusEventIn(
  q: Queryable,
  ctx: CoreCtx,
  msg: SentTarget,
  from: MessageStatus,
  change: StatusEventChange,
  at: number,
): Promise<void> {
  const type = EVENT_FOR[change.status];
  if (type) await emitEventIn(q, ctx, msg.partner_id, type, statusEventData(msg, from, change, at));
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
  recordHistory(ctx, m.id, 'sent', { providerStatus: change.providerStatus, at: change.occurredAt });
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

// The marks dispatch (src/jobs/dispatch.ts) keeps on a message between its acceptance and its
// provider's answer. Each is one cached statement, written in the claim or settle transaction
// dispatch is in.

/** The columns of a message its dispatch reads (a claim returns only these). */
export type DispatchRow = Pick<
  MessageRow,
  | 'id'
  | 'partner_id'
  | 'channel_type'
  | 'channel_id'
  | 'gateway_id'
  | 'to'
  | 'from'
  | 'content'
  | 'status'
  | 'created_at'
  | 'dispatch_in_flight'
>;

const CLAIM_FOR_DISPATCH_SQL = `UPDATE messages SET status = 'sending', updated_at = ? WHERE id = ? AND status = 'queued'
  RETURNING id, partner_id, channel_type, channel_id, gateway_id, "to", "from", content, status, created_at, dispatch_in_flight`;

/** queued → sending, for a claimed dispatch job; undefined, with nothing written, when it is not queued. */
export function claimForDispatch(ctx: CoreCtx, id: string, now: number): DispatchRow | undefined {
  return stmt<[number, string], DispatchRow>(ctx.db.sqlite, CLAIM_FOR_DISPATCH_SQL).get(now, id);
}

/** Its provider request may leave msgd from now on: committed before the call (cleared by its outcome). */
export function markDispatchInFlight(ctx: CoreCtx, id: string): void {
  stmt<[string]>(ctx.db.sqlite, 'UPDATE messages SET dispatch_in_flight = 1 WHERE id = ?').run(id);
}

/** Its gateway is disabled: back to 'queued' (if still waiting for dispatch), saying why in its error. */
export function holdForDisabledGateway(ctx: CoreCtx, id: string, note: string): void {
  stmt<[string, number, string]>(
    ctx.db.sqlite,
    `UPDATE messages SET status = 'queued', error_code = 'gateway_disabled', error_message = ?, updated_at = ? WHERE id = ? AND status IN ('queued', 'sending')`,
  ).run(note, ctx.now(), id);
}

/**
 * Waiting for its gateway's rate: sending → queued. A note that its gateway was disabled is
 * old news then, and is cleared; another (a retry's) stays.
 */
export function requeueForRate(ctx: CoreCtx, id: string): void {
  stmt<[number, string]>(
    ctx.db.sqlite,
    `UPDATE messages SET status = 'queued', error_code = CASE WHEN error_code = 'gateway_disabled' THEN NULL ELSE error_code END,
       error_message = CASE WHEN error_code = 'gateway_disabled' THEN NULL ELSE error_message END, updated_at = ? WHERE id = ? AND status = 'sending'`,
  ).run(ctx.now(), id);
}

/** The error an earlier retry left on a message that has now been sent: not its error any more. */
export function clearDispatchError(ctx: CoreCtx, id: string): void {
  stmt<[string]>(ctx.db.sqlite, 'UPDATE messages SET error_code = NULL, error_message = NULL WHERE id = ?').run(id);
}

/**
 * An attempt that will be retried: its error is noted and nothing is in flight any more. Only
 * a message still waiting for its dispatch: a provider report may have settled it.
 */
export function noteDispatchRetry(ctx: CoreCtx, id: string, code: string, message: string): void {
  stmt<[string, string, number, string]>(
    ctx.db.sqlite,
    `UPDATE messages SET error_code = ?, error_message = ?, dispatch_in_flight = 0, updated_at = ? WHERE id = ? AND status IN ('queued', 'sending')`,
  ).run(code, message, ctx.now(), id);
}

/** The error code of a message a restore holds (src/jobs/restore-hold.ts) until the operator releases it. */
export const HELD_AFTER_RESTORE = 'held_after_restore';

const HELD_NOTE =
  'held after a restore: the server the backup was taken from may have sent it already; the operator releases it (msgctl messages release-held)';

/**
 * A restored message still waiting for its dispatch is held: back to 'queued' ('sending' was
 * the old server's claim: nothing of it is in flight here), saying why. False when it was not waiting.
 */
export function holdAfterRestore(ctx: CoreCtx, id: string, now: number): boolean {
  return (
    stmt<[string, string, number, string]>(
      ctx.db.sqlite,
      `UPDATE messages SET status = 'queued', error_code = ?, error_message = ?, updated_at = ?
       WHERE id = ? AND status IN ('queued', 'sending')`,
    ).run(HELD_AFTER_RESTORE, HELD_NOTE, now, id).changes > 0
  );
}

/** A held message is released: flagged possible_duplicate (the old server may have sent it). False when it was not held. */
export function releaseAfterRestore(ctx: CoreCtx, id: string, now: number): boolean {
  return (
    stmt<[number, string, string]>(
      ctx.db.sqlite,
      `UPDATE messages SET dispatch_uncertain = 1, error_code = NULL, error_message = NULL, updated_at = ?
       WHERE id = ? AND status = 'queued' AND error_code = ?`,
    ).run(now, id, HELD_AFTER_RESTORE).changes > 0
  );
}

// The same writers inside a store transaction `q`, on either store: each the statement of its
// synchronous form above, which stays for the synchronous transactions that still call it
// (SQLite's dispatch batch, the webhook intake).

/** markSent, in `q`. */
export async function markSentIn(
  q: Queryable,
  ctx: CoreCtx,
  m: SentTarget,
  change: {
    providerMessageId: string;
    namedInReports: boolean;
    providerStatus: string | null;
    occurredAt: number;
    uncertain: boolean;
  },
): Promise<boolean> {
  const now = ctx.now();
  const update = sql`UPDATE messages SET status = 'sent', provider_message_id = ${change.providerMessageId},
          provider_id_indexed = ${change.namedInReports ? 0 : 1}, error_code = NULL, error_message = NULL,
          dispatch_uncertain = CASE WHEN ${change.uncertain ? 1 : 0} = 1 THEN 1 ELSE dispatch_uncertain END,
          dispatch_in_flight = 0, sent_at = COALESCE(sent_at, ${change.occurredAt}), updated_at = ${now}
        WHERE id = ${m.id} AND status = 'sending'`;
  if (ctx.store.dialect === 'postgres') {
    // One round trip on PostgreSQL: the history row is written by the statement that moves the
    // message, and only when it moved (the rows inserted are the rows updated).
    const moved = await q.run(
      sql`WITH moved AS (${update} RETURNING id)
          INSERT INTO message_status_history (message_id, status, provider_status, error_code, error_message, ignored, occurred_at, created_at)
          SELECT id, 'sent', CAST(${change.providerStatus} AS TEXT), NULL, NULL, 0, CAST(${change.occurredAt} AS BIGINT),
            CAST(${now} AS BIGINT) FROM moved`,
    );
    if (moved.changes === 0) return false;
  } else {
    const moved = await q.run(update);
    if (moved.changes === 0) return false;
    await recordHistoryIn(q, ctx, m.id, 'sent', { providerStatus: change.providerStatus, at: change.occurredAt });
  }
  await emitStatusEventIn(
    q,
    ctx,
    m,
    'sending',
    { status: 'sent', providerStatus: change.providerStatus },
    change.occurredAt,
  );
  return true;
}

/** flagUncertain, in `q`. */
export async function flagUncertainIn(q: Queryable, ctx: CoreCtx, messageId: string): Promise<void> {
  await q.run(sql`UPDATE messages SET dispatch_uncertain = 1, updated_at = ${ctx.now()} WHERE id = ${messageId}`);
}

/** claimForDispatch, in `q`. */
export function claimForDispatchIn(q: Queryable, id: string, now: number): Promise<DispatchRow | undefined> {
  return q.get<DispatchRow>(
    sql`UPDATE messages SET status = 'sending', updated_at = ${now} WHERE id = ${id} AND status = 'queued'
        RETURNING id, partner_id, channel_type, channel_id, gateway_id, "to", "from", content, status, created_at, dispatch_in_flight`,
  );
}

/**
 * claimForDispatch for many messages in one statement (a claimed batch on PostgreSQL): the
 * rows moved queued → sending, by id. A message not queued is left out, with nothing written.
 */
export async function claimManyForDispatchIn(
  q: Queryable,
  dialect: Dialect,
  ids: readonly string[],
  now: number,
): Promise<Map<string, DispatchRow>> {
  const rows =
    ids.length === 0
      ? []
      : await q.all<DispatchRow>(
          sql`UPDATE messages SET status = 'sending', updated_at = ${now} WHERE ${inList(dialect, 'id', ids)} AND status = 'queued'
              RETURNING id, partner_id, channel_type, channel_id, gateway_id, "to", "from", content, status, created_at, dispatch_in_flight`,
        );
  return new Map(rows.map((r) => [r.id, r]));
}

/** markDispatchInFlight for many messages in one statement. */
export async function markManyInFlightIn(q: Queryable, dialect: Dialect, ids: readonly string[]): Promise<void> {
  if (ids.length > 0) await q.run(sql`UPDATE messages SET dispatch_in_flight = 1 WHERE ${inList(dialect, 'id', ids)}`);
}

/** markDispatchInFlight, in `q`. */
export async function markDispatchInFlightIn(q: Queryable, id: string): Promise<void> {
  await q.run(sql`UPDATE messages SET dispatch_in_flight = 1 WHERE id = ${id}`);
}

/** holdForDisabledGateway, in `q`. */
export async function holdForDisabledGatewayIn(q: Queryable, ctx: CoreCtx, id: string, note: string): Promise<void> {
  await q.run(
    sql`UPDATE messages SET status = 'queued', error_code = 'gateway_disabled', error_message = ${note}, updated_at = ${ctx.now()}
        WHERE id = ${id} AND status IN ('queued', 'sending')`,
  );
}

/** requeueForRate, in `q`. */
export async function requeueForRateIn(q: Queryable, ctx: CoreCtx, id: string): Promise<void> {
  await q.run(
    sql`UPDATE messages SET status = 'queued', error_code = CASE WHEN error_code = 'gateway_disabled' THEN NULL ELSE error_code END,
          error_message = CASE WHEN error_code = 'gateway_disabled' THEN NULL ELSE error_message END, updated_at = ${ctx.now()}
        WHERE id = ${id} AND status = 'sending'`,
  );
}

/** clearDispatchError, in `q`. */
export async function clearDispatchErrorIn(q: Queryable, id: string): Promise<void> {
  await q.run(sql`UPDATE messages SET error_code = NULL, error_message = NULL WHERE id = ${id}`);
}

/** noteDispatchRetry, in `q`. */
export async function noteDispatchRetryIn(
  q: Queryable,
  ctx: CoreCtx,
  id: string,
  code: string,
  message: string,
): Promise<void> {
  await q.run(
    sql`UPDATE messages SET error_code = ${code}, error_message = ${message}, dispatch_in_flight = 0, updated_at = ${ctx.now()}
        WHERE id = ${id} AND status IN ('queued', 'sending')`,
  );
}

/** holdAfterRestore, in `q`. */
export async function holdAfterRestoreIn(q: Queryable, id: string, now: number): Promise<boolean> {
  const r = await q.run(
    sql`UPDATE messages SET status = 'queued', error_code = ${HELD_AFTER_RESTORE}, error_message = ${HELD_NOTE}, updated_at = ${now}
        WHERE id = ${id} AND status IN ('queued', 'sending')`,
  );
  return r.changes > 0;
}

/** releaseAfterRestore, in `q`. */
export async function releaseAfterRestoreIn(q: Queryable, id: string, now: number): Promise<boolean> {
  const r = await q.run(
    sql`UPDATE messages SET dispatch_uncertain = 1, error_code = NULL, error_message = NULL, updated_at = ${now}
        WHERE id = ${id} AND status = 'queued' AND error_code = ${HELD_AFTER_RESTORE}`,
  );
  return r.changes > 0;
}
