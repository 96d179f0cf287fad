import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { AppError } from '../lib/errors.js';
import type { ChannelType, CoreCtx } from './context.js';
import type { MessageContent } from './message-content.js';
import { refuseSuppressed, refuseSuppressedIn } from './suppressions.js';
import { catalogueCategory, catalogueCategoryIn } from './whatsapp-template-send.js';
import { auditEventIn } from './audit.js';
import { applyStatus, applyStatusIn } from './message-status.js';
import { getMessageState, getMessageStateIn, recordHistory, recordHistoryIn, type MessageState } from './messages.js';
import type { Queryable } from '../db/query.js';

// Scheduled sends. A message accepted with send_at passes every check of a send at once (token,
// channel, funds, payload, window) and is debited then, as any send is (the money rule); it
// waits as 'scheduled' with its dispatch job due at send_at. Two things end the wait, each a
// conditional write on status = 'scheduled', so exactly one of them wins:
//   - its dispatch job comes due: release() moves it to 'queued' (after checking again what
//     may have changed since: the partner suspended, the channel unassigned), and dispatch
//     goes on as for any message, in its gateway's line;
//   - the partner cancels it: cancel() moves it to 'canceled' and refunds the price.
// A canceled message's job finds nothing to send when it comes due.

/** How far ahead send_at may be, in ms (config messages.schedule). */
export interface ScheduleLimits {
  minAheadMs: number;
  maxAheadMs: number;
}

/**
 * The time a send_at names, checked against the limits; a 400 naming the field otherwise.
 * `value` is what the body held: an ISO 8601 time with an offset (or Z).
 */
export function parseSendAt(value: string, now: number, limits: ScheduleLimits, field = 'send_at'): number {
  // An offset is required: a time without one would be read in the server's zone. A day the
  // month does not have (11-31, 02-30) is refused: Date.parse would roll it into the next month.
  const m = /^(\d{4})-(\d{2})-(\d{2})T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i.exec(value);
  const at = m && Number(m[3]) <= daysIn(Number(m[1]), Number(m[2])) ? Date.parse(value) : Number.NaN;
  if (!Number.isFinite(at)) {
    throw new AppError('invalid_request', `${field} must be an ISO 8601 time with an offset`, [
      { field, message: 'an ISO 8601 time with an offset, e.g. 2026-12-01T09:00:00+01:00' },
    ]);
  }
  const ahead = at - now;
  if (ahead < limits.minAheadMs || ahead > limits.maxAheadMs) {
    const range = `between ${describe(limits.minAheadMs)} and ${describe(limits.maxAheadMs)} from now`;
    throw new AppError('invalid_request', `${field} must be ${range}`, [{ field, message: range }]);
  }
  return at;
}

/** The days of a month (1-12) of a year; 0 for a month that is none, so every day is refused. */
function daysIn(year: number, month: number): number {
  return month >= 1 && month <= 12 ? new Date(Date.UTC(year, month, 0)).getUTCDate() : 0;
}

function describe(ms: number): string {
  if (ms % 86_400_000 === 0 && ms >= 86_400_000) return `${ms / 86_400_000} day${ms === 86_400_000 ? '' : 's'}`;
  if (ms % 3_600_000 === 0 && ms >= 3_600_000) return `${ms / 3_600_000} hour${ms === 3_600_000 ? '' : 's'}`;
  if (ms % 60_000 === 0 && ms >= 60_000) return `${ms / 60_000} minute${ms === 60_000 ? '' : 's'}`;
  const s = Math.round(ms / 1000);
  return `${s} second${s === 1 ? '' : 's'}`;
}

interface ReleaseCheck {
  partner_status: string | null;
  channel_status: string | null;
}

/**
 * A scheduled message's dispatch job has come due: move it to 'queued' so dispatch takes it,
 * unless what allowed the send has changed since its acceptance (the partner suspended, the
 * channel unassigned, the recipient suppressed), in which case it fails with
 * that reason and its price is refunded. Returns false when the message is not (or no longer)
 * scheduled: canceled, or already released by an earlier attempt. Inside the caller's
 * transaction (the dispatch claim).
 */
export function releaseScheduled(ctx: CoreCtx, id: string): boolean {
  const now = ctx.now();
  const released = stmt<
    [number, string],
    {
      partner_id: string;
      channel_id: string | null;
      gateway_id: string | null;
      channel_type: ChannelType;
      from: string;
      to: string;
      content: string;
    }
  >(
    ctx.db.sqlite,
    `UPDATE messages SET status = 'queued', updated_at = ? WHERE id = ? AND status = 'scheduled'
     RETURNING partner_id, channel_id, gateway_id, channel_type, "from", "to", content`,
  ).get(now, id);
  if (!released) return false;
  recordHistory(ctx, id, 'queued', { at: now });
  const check = stmt<[string | null, string], ReleaseCheck>(
    ctx.db.sqlite,
    `SELECT p.status AS partner_status, c.status AS channel_status
       FROM partners p LEFT JOIN channels c ON c.id = ? WHERE p.id = ?`,
  ).get(released.channel_id, released.partner_id);
  const refusal =
    check?.partner_status !== 'active'
      ? { code: 'partner_suspended', message: 'the partner was suspended before the scheduled time' }
      : check.channel_status !== 'active'
        ? { code: 'channel_not_assigned', message: 'the channel was unassigned before the scheduled time' }
        : suppressedSince(ctx, released);
  if (refusal) {
    const m = getMessageState(ctx, id)!;
    applyStatus(ctx, m, {
      status: 'failed',
      errorCode: refusal.code,
      errorMessage: refusal.message,
      refundOnFailure: true,
    });
  }
  return true;
}

/**
 * The recipient's suppression (an opt-out or bounce since acceptance) as a refusal, or null. A
 * template is judged by the catalogue's category, as at acceptance, not by the one the request named.
 */
function suppressedSince(
  ctx: CoreCtx,
  m: {
    partner_id: string;
    gateway_id: string | null;
    channel_type: ChannelType;
    from: string;
    to: string;
    content: string;
  },
): { code: string; message: string } | null {
  const content = JSON.parse(m.content) as MessageContent;
  const category = catalogueCategory(ctx, m.gateway_id, content);
  const ruled =
    category !== null && content.kind === 'template'
      ? { ...content, template: { ...content.template, category } }
      : content;
  try {
    refuseSuppressed(ctx, m.partner_id, { type: m.channel_type, sender: m.from }, m.to, ruled);
    return null;
  } catch (e) {
    if (e instanceof AppError && e.code === 'recipient_suppressed')
      return { code: e.code, message: `before the scheduled time: ${e.details[0]?.message ?? e.message}` };
    throw e;
  }
}

/** releaseScheduled, inside the caller's store transaction `q` (the dispatch claim), on either store. */
export async function releaseScheduledIn(q: Queryable, ctx: CoreCtx, id: string): Promise<boolean> {
  const now = ctx.now();
  const released = await q.get<Released>(
    sql`UPDATE messages SET status = 'queued', updated_at = ${now} WHERE id = ${id} AND status = 'scheduled'
        RETURNING partner_id, channel_id, gateway_id, channel_type, "from", "to", content`,
  );
  if (!released) return false;
  await recordHistoryIn(q, ctx, id, 'queued', { at: now });
  const check = await q.get<ReleaseCheck>(
    sql`SELECT p.status AS partner_status, c.status AS channel_status
          FROM partners p LEFT JOIN channels c ON c.id = ${released.channel_id} WHERE p.id = ${released.partner_id}`,
  );
  const refusal =
    refusalOf(check) ??
    (await suppressedSinceIn(q, ctx.store.dialect, released).catch((e: unknown) => suppressionFailure(e)));
  if (refusal) {
    const m = (await getMessageStateIn(q, id))!;
    await applyStatusIn(q, ctx, m, {
      status: 'failed',
      errorCode: refusal.code,
      errorMessage: refusal.message,
      refundOnFailure: true,
    });
  }
  return true;
}

/** What a released message is checked with. */
interface Released {
  partner_id: string;
  channel_id: string | null;
  gateway_id: string | null;
  channel_type: ChannelType;
  from: string;
  to: string;
  content: string;
}

/** The partner suspended or the channel unassigned since acceptance, as a refusal; null when neither. */
function refusalOf(check: ReleaseCheck | undefined): { code: string; message: string } | null {
  if (check?.partner_status !== 'active')
    return { code: 'partner_suspended', message: 'the partner was suspended before the scheduled time' };
  if (check.channel_status !== 'active')
    return { code: 'channel_not_assigned', message: 'the channel was unassigned before the scheduled time' };
  return null;
}

/** suppressedSince, read through `q`: null when the recipient may still be sent to. */
async function suppressedSinceIn(
  q: Queryable,
  dialect: CoreCtx['store']['dialect'],
  m: Released,
): Promise<{ code: string; message: string } | null> {
  const content = JSON.parse(m.content) as MessageContent;
  const category = await catalogueCategoryIn(q, m.gateway_id, content);
  await refuseSuppressedIn(
    q,
    dialect,
    m.partner_id,
    { type: m.channel_type, sender: m.from },
    m.to,
    ruledBy(content, category),
  );
  return null;
}

/** A recipient_suppressed refusal as the release's failure; anything else is thrown on. */
function suppressionFailure(e: unknown): { code: string; message: string } {
  if (e instanceof AppError && e.code === 'recipient_suppressed')
    return { code: e.code, message: `before the scheduled time: ${e.details[0]?.message ?? e.message}` };
  throw e;
}

/** The content a suppression is judged on: a template with the catalogue's category, as at acceptance. */
function ruledBy(content: MessageContent, category: ReturnType<typeof catalogueCategory>): MessageContent {
  return category !== null && content.kind === 'template'
    ? { ...content, template: { ...content.template, category } }
    : content;
}

/**
 * Cancel a scheduled message of this partner: 'canceled', its price refunded, event
 * message.canceled. 404 for a message that is not the partner's; 409 message_not_cancelable
 * with its status once it has left 'scheduled' (released to dispatch, sent, or canceled).
 * Inside one transaction, so it and the release cannot both win.
 */
export function cancelScheduled(
  ctx: CoreCtx,
  partnerId: string | null,
  id: string,
  actor: string,
): Promise<MessageState> {
  return ctx.store.transaction(async (tx) => {
    // The row first (a no-op write): on PostgreSQL a release committing meanwhile is waited
    // for and then read, so the release and the cancel cannot both win.
    await tx.run(sql`UPDATE messages SET updated_at = updated_at WHERE id = ${id}`);
    const m = await getMessageStateIn(tx, id);
    if (!m || (partnerId !== null && m.partner_id !== partnerId) || m.direction !== 'outbound') {
      throw new AppError('not_found', `message "${id}" not found`);
    }
    if (m.status !== 'scheduled') {
      throw new AppError(
        'message_not_cancelable',
        `only a scheduled message can be canceled; this one is ${m.status}`,
        [{ field: 'status', message: m.status }],
      );
    }
    await applyStatusIn(tx, ctx, m, { status: 'canceled', refundOnFailure: true });
    await auditEventIn(ctx, tx, actor, 'message.cancel', 'message', id, { partner_id: m.partner_id });
    return (await getMessageStateIn(tx, id))!;
  });
}

/** The scheduled messages still waiting, for the operator (msgctl doctor, the TUI). */
export async function countScheduled(ctx: CoreCtx): Promise<number> {
  const r = await ctx.store.get<{ n: number }>(
    sql`SELECT CAST(count(*) AS BIGINT) AS n FROM messages WHERE status = 'scheduled'`,
  );
  return r!.n;
}

export type { MessageState };
