import type { Row } from '../db/rows.js';
import type { suppressions } from '../db/schema.js';
import { escapeLike, indexedBy, likeFold } from '../db/dialect.js';
import type { Queryable, Store } from '../db/query.js';
import { syncSqlite } from '../db/queue-statements.js';
import { type Sql, sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { contactEmail, normalizeEmail } from '../lib/email.js';
import { AppError, invalid } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { normalizeE164 } from '../lib/phone.js';
import { iso } from '../lib/time.js';
import { auditEventIn } from './audit.js';
import type { ChannelType, CoreCtx } from './context.js';
import { emitEvent, emitEventIn } from './events.js';
import type { MessageContent } from './message-content.js';

// Recipients a partner must not send to: filled from what msgd sees (an SMS STOP, a hard
// bounce, a spam report, a provider refusing a send because the customer opted out) and by
// the partner. A send to one is refused after the payload is valid and before it is priced,
// so nothing is debited (refuseSuppressed). docs/suppressions.md is the partner-facing rule.

export const SUPPRESSION_REASONS = [
  'opt_out_keyword',
  'hard_bounce',
  'spam_report',
  'unsubscribe',
  'group_unsubscribe',
  'manual',
  'provider_refused',
] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

export type SuppressionRow = Row<typeof suppressions>;

export const OPT_OUT_SCOPES = ['sender', 'partner'] as const;
export type OptOutScope = (typeof OPT_OUT_SCOPES)[number];

/** An E.164 number, also with Twilio's whatsapp: prefix; a leading + is required, as on the send API. */
function phone(raw: string): string | null {
  const t = raw
    .trim()
    .replace(/^whatsapp:/i, '')
    .trim();
  if (!/^\+[1-9]\d{1,14}$/.test(t)) return null;
  // The send path stores libphonenumber's form; a number it does not know stays as written.
  return normalizeE164(t) ?? t;
}

/**
 * A recipient address in the one form suppressions are stored and looked up in: E.164 for
 * sms and whatsapp, the lowercased email address, the PSID/IGSID (digits) on messenger and
 * instagram. Null when it is not one.
 */
export function normalizeAddress(channel: ChannelType, raw: string): string | null {
  if (typeof raw !== 'string' || raw.length > 320) return null;
  if (channel === 'sms' || channel === 'whatsapp') return phone(raw);
  if (channel === 'email') return normalizeEmail(raw) === null ? null : contactEmail(raw);
  const t = raw.trim();
  return /^\d{1,64}$/.test(t) ? t : null;
}

export interface NewSuppression {
  partnerId: string;
  channel: ChannelType;
  /** Normalized (normalizeAddress). */
  address: string;
  reason: SuppressionReason;
  /** The sender address it applies to; null or '': every sender. */
  scope?: string | null;
  groupId?: string | null;
  source: string;
  detail?: string | null;
}

/** The body of suppression.created / .deleted and of /v1. */
export function suppressionJson(s: SuppressionRow) {
  return {
    id: s.id,
    channel: s.channel as ChannelType,
    address: s.address,
    reason: s.reason,
    sender: s.scope === '' ? null : s.scope,
    group_id: s.group_id === '' ? null : s.group_id,
    source: s.source,
    detail: s.detail,
    created_at: iso(s.created_at),
  };
}

// The rows a new suppression writes and finds, for addSuppression() (on the connection, inside
// the synchronous transactions of webhook processing and dispatch) and addSuppressionIn()
// (through the store).
function insertSuppression(ctx: CoreCtx, s: NewSuppression): Sql {
  return sql`INSERT INTO suppressions (id, partner_id, channel, address, scope, reason, group_id, source, detail, created_at)
    VALUES (${newId('sup')}, ${s.partnerId}, ${s.channel}, ${s.address}, ${s.scope ?? ''}, ${s.reason}, ${s.groupId ?? ''},
      ${s.source}, ${s.detail ? s.detail.slice(0, 500) : null}, ${ctx.now()})
    ON CONFLICT DO NOTHING RETURNING *`;
}

function sameSuppression(s: NewSuppression): Sql {
  return sql`SELECT * FROM suppressions WHERE partner_id = ${s.partnerId} AND channel = ${s.channel}
    AND address = ${s.address} AND scope = ${s.scope ?? ''} AND reason = ${s.reason} AND group_id = ${s.groupId ?? ''}`;
}

/**
 * Record a suppression inside the caller's transaction; an identical one (same address,
 * scope, reason and group) is kept as it was, first source and time. The partner hears of a
 * new one (suppression.created).
 */
export function addSuppression(ctx: CoreCtx, s: NewSuppression): { row: SuppressionRow; created: boolean } {
  const onConnection = syncSqlite(ctx.db.sqlite);
  const inserted = onConnection.get<SuppressionRow>(insertSuppression(ctx, s));
  if (inserted) {
    emitEvent(ctx, s.partnerId, 'suppression.created', { suppression: suppressionJson(inserted) });
    return { row: inserted, created: true };
  }
  return { row: onConnection.get<SuppressionRow>(sameSuppression(s))!, created: false };
}

/** addSuppression() through the store: in `tx`, the caller's transaction. */
export async function addSuppressionIn(
  tx: Queryable,
  ctx: CoreCtx,
  s: NewSuppression,
): Promise<{ row: SuppressionRow; created: boolean }> {
  const inserted = await tx.get<SuppressionRow>(insertSuppression(ctx, s));
  if (inserted) {
    await emitEventIn(tx, ctx, s.partnerId, 'suppression.created', { suppression: suppressionJson(inserted) });
    return { row: inserted, created: true };
  }
  return { row: (await tx.get<SuppressionRow>(sameSuppression(s)))!, created: false };
}

export interface SuppressionInput {
  channel: ChannelType;
  /** As the partner wrote it: normalized here. */
  address: string;
  reason?: Exclude<SuppressionReason, 'provider_refused' | 'group_unsubscribe'>;
  /** One of the partner's sender addresses on the channel; null: every sender. */
  sender?: string | null;
  detail?: string | null;
}

/**
 * Add a suppression for a partner (its API, console or the operator). The address is
 * normalized for its channel and refused with a 400 when it is none; a sender must be one of
 * the partner's channels of that type. Returns whether it is new; the same entry twice is no
 * second entry.
 */
export async function createSuppression(
  ctx: CoreCtx,
  partnerId: string,
  input: SuppressionInput,
  actor: string,
): Promise<{ row: SuppressionRow; created: boolean }> {
  const address = normalizeAddress(input.channel, input.address);
  if (address === null) {
    throw invalid('the address is not one of this channel', [
      { field: 'address', message: addressProblem(input.channel) },
    ]);
  }
  let scope = '';
  if (input.sender != null && input.sender.trim() !== '') {
    const s = normalizeAddress(input.channel, input.sender) ?? input.sender.trim();
    const own = await ctx.store.get<{ id: string }>(
      sql`SELECT id FROM channels WHERE partner_id = ${partnerId} AND type = ${input.channel} AND sender = ${s} LIMIT 1`,
    );
    if (!own) {
      throw invalid('the sender is not one of this partner’s channels', [
        { field: 'sender', message: `must be the sender address of one of your ${input.channel} channels, or omitted` },
      ]);
    }
    scope = s;
  }
  const detail = input.detail?.trim() ? input.detail.trim() : null;
  return ctx.store.transaction(async (tx) => {
    const r = await addSuppressionIn(tx, ctx, {
      partnerId,
      channel: input.channel,
      address,
      reason: input.reason ?? 'manual',
      scope,
      source: actor,
      detail,
    });
    if (r.created)
      await auditEventIn(ctx, tx, actor, 'suppression.add', 'suppression', r.row.id, {
        partner_id: partnerId,
        channel: input.channel,
        address,
        reason: r.row.reason,
      });
    return r;
  });
}

/** What a valid address is on a channel, for a 400's details. */
export function addressProblem(channel: ChannelType): string {
  if (channel === 'sms' || channel === 'whatsapp')
    return 'must be a phone number in E.164 format with a leading +, e.g. +14155550123';
  if (channel === 'email') return 'must be a valid email address';
  return `must be the ${channel === 'messenger' ? 'page-scoped (PSID)' : 'Instagram-scoped (IGSID)'} recipient id (digits)`;
}

function deleteRow(ctx: CoreCtx, row: SuppressionRow, actor: string) {
  stmt(ctx.db.sqlite, 'DELETE FROM suppressions WHERE id = ?').run(row.id);
  emitEvent(ctx, row.partner_id, 'suppression.deleted', { suppression: suppressionJson(row), deleted_by: actor });
}

export function getSuppression(ctx: CoreCtx, partnerId: string, id: string): Promise<SuppressionRow | undefined> {
  return ctx.store.get<SuppressionRow>(sql`SELECT * FROM suppressions WHERE id = ${id} AND partner_id = ${partnerId}`);
}

export interface RemoveOptions {
  /** Who removes it: token:…, user:…, operator:…. */
  actor: string;
  /**
   * A customer's own opt-out (a STOP keyword) is only lifted on their renewed consent: the
   * remover must say they hold it, and that is audited.
   */
  consentConfirmed?: boolean;
}

/** Remove one suppression by id; not found (also: another partner's) is a 404. */
export async function removeSuppression(
  ctx: CoreCtx,
  partnerId: string,
  id: string,
  opts: RemoveOptions,
): Promise<SuppressionRow> {
  const row = await getSuppression(ctx, partnerId, id);
  if (!row) throw new AppError('not_found', `suppression ${id} not found`);
  const customerMade = row.reason === 'opt_out_keyword';
  if (customerMade && !opts.consentConfirmed) {
    throw new AppError(
      'consent_required',
      `the customer opted out by replying with a keyword on ${iso(row.created_at)}; remove it only with their renewed consent, and say so (consent_confirmed)`,
      [
        {
          field: 'consent_confirmed',
          code: 'consent_required',
          message: 'must be true to remove an opt-out the customer made',
        },
      ],
    );
  }
  const consent = customerMade ? { consent_confirmed_by: opts.actor } : {};
  await ctx.store.transaction(async (tx) => {
    // Removed by a request racing this one: it was that one's to remove (one event, one audit entry).
    const { changes } = await tx.run(sql`DELETE FROM suppressions WHERE id = ${row.id}`);
    if (changes === 0) throw new AppError('not_found', `suppression ${id} not found`);
    await emitEventIn(tx, ctx, row.partner_id, 'suppression.deleted', {
      suppression: suppressionJson(row),
      deleted_by: opts.actor,
      ...consent,
    });
    await auditEventIn(ctx, tx, opts.actor, 'suppression.remove', 'suppression', row.id, {
      partner_id: partnerId,
      channel: row.channel,
      address: row.address,
      reason: row.reason,
      ...(customerMade ? { consent_confirmed: true } : {}),
    });
  });
  return row;
}

export interface ListFilter {
  channel?: ChannelType;
  reason?: SuppressionReason;
  /** Normalized address, or a fragment to search for (search: true). */
  address?: string;
  search?: boolean;
  /** Newest first; rows with ids below this one. */
  before?: string;
  limit: number;
}

/** The partner's suppressions, newest first, keyset-paged on id. */
export function listSuppressions(ctx: CoreCtx, partnerId: string, f: ListFilter): Promise<SuppressionRow[]> {
  const where: Sql[] = [sql`partner_id = ${partnerId}`];
  if (f.channel) where.push(sql`channel = ${f.channel}`);
  if (f.reason) where.push(sql`reason = ${f.reason}`);
  if (f.address !== undefined && f.address !== '') {
    if (f.search) {
      where.push(likeFold(ctx.store.dialect, 'address', `%${escapeLike(f.address)}%`));
    } else where.push(sql`address = ${f.address}`);
  }
  if (f.before) where.push(sql`id < ${f.before}`);
  // At most 2^4 shapes of the query, each cached once.
  return ctx.store.all<SuppressionRow>(
    sql`SELECT * FROM suppressions WHERE ${sql.join(where, ' AND ')} ORDER BY id DESC LIMIT ${f.limit}`,
  );
}

/**
 * The partner's opt-out scope, on the connection: read inside the synchronous transactions of
 * webhook processing and dispatch (a keyword or a carrier's block). readOptOutScope() is the
 * same through the store.
 */
export function partnerOptOutScope(ctx: CoreCtx, partnerId: string): OptOutScope {
  const r = stmt<[string], { opt_out_scope: OptOutScope }>(
    ctx.db.sqlite,
    'SELECT opt_out_scope FROM partners WHERE id = ?',
  ).get(partnerId);
  return r?.opt_out_scope ?? 'sender';
}

/** The partner's opt-out scope (sender when the partner is not found, as a keyword reads it). */
export async function readOptOutScope(ctx: CoreCtx, partnerId: string): Promise<OptOutScope> {
  const r = await ctx.store.get<{ opt_out_scope: OptOutScope }>(
    sql`SELECT opt_out_scope FROM partners WHERE id = ${partnerId}`,
  );
  return r?.opt_out_scope ?? 'sender';
}

export async function setOptOutScope(
  ctx: CoreCtx,
  partnerId: string,
  scope: OptOutScope,
  actor: string,
): Promise<void> {
  if (!(OPT_OUT_SCOPES as readonly string[]).includes(scope))
    throw invalid(`opt-out scope must be sender or partner, not "${scope}"`);
  await ctx.store.transaction(async (tx) => {
    const r = await tx.run(
      sql`UPDATE partners SET opt_out_scope = ${scope}, updated_at = ${ctx.now()} WHERE id = ${partnerId}`,
    );
    if (r.changes === 0) throw new AppError('not_found', `partner ${partnerId} not found`);
    await auditEventIn(ctx, tx, actor, 'partner.opt_out_scope', 'partner', partnerId, { scope });
  });
}

// ---- at send time

type Hit = Pick<SuppressionRow, 'reason' | 'scope' | 'group_id' | 'created_at'>;

// Rows for the address on this channel, partner-wide or for this sender: one seek on the leading
// columns of suppressions_address that usually finds nothing. The scope is checked on the rows
// found (+scope): as an index term, its IN list is an ephemeral table built on every run, which
// costs twice the seek.
export const SUPPRESSION_HITS_SQL = `SELECT reason, scope, group_id, created_at FROM suppressions INDEXED BY suppressions_address
   WHERE partner_id = ? AND channel = ? AND address = ? AND +scope IN ('', ?)`;

/** A WhatsApp template's category as the partner named it (Meta's: AUTHENTICATION, MARKETING, UTILITY). */
function templateCategory(content: MessageContent): string | null {
  return content.kind === 'template' ? (content.template.category ?? null) : null;
}

/**
 * Whether an entry stops this send. A group unsubscribe stops mail of that SendGrid group only,
 * and msgd's email send names no group: SendGrid itself holds mail sent with one. On WhatsApp,
 * a one-time passcode the customer just asked for (an AUTHENTICATION template) passes every
 * entry but a `manual` one, the partner's own "never"; Meta's marketing opt-out (error 131050,
 * recorded as provider_refused) stops marketing templates (and templates of no named
 * category), not utility templates and not replies within the customer-service window.
 */
export function blocks(hit: Pick<Hit, 'reason'>, channel: ChannelType, content: MessageContent): boolean {
  if (hit.reason === 'group_unsubscribe') return false;
  if (channel !== 'whatsapp') return true;
  const category = templateCategory(content);
  if (category === 'AUTHENTICATION') return hit.reason === 'manual';
  if (hit.reason === 'provider_refused') return content.kind === 'template' && category !== 'UTILITY';
  return true;
}

const REASON_WORDS: Record<SuppressionReason, string> = {
  opt_out_keyword: 'the recipient opted out by replying with a keyword (e.g. STOP)',
  hard_bounce: 'mail to this address bounced permanently',
  spam_report: 'the recipient reported a message as spam',
  unsubscribe: 'the recipient unsubscribed',
  group_unsubscribe: 'the recipient unsubscribed from an unsubscribe group',
  manual: 'the address was added to the suppression list',
  provider_refused: 'the provider refused a send because the recipient opted out or blocked the sender',
};

/**
 * 400 recipient_suppressed when the recipient is on the partner's suppression list for this
 * channel (partner-wide or for this sender). Called after payload validation and before the
 * price, so nothing is debited; one indexed lookup.
 */
export function refuseSuppressed(
  ctx: CoreCtx,
  partnerId: string,
  channel: { type: ChannelType; sender: string },
  to: string,
  content: MessageContent,
): void {
  const address = normalizeAddress(channel.type, to);
  if (address === null) return;
  const hits = stmt<[string, string, string, string], Hit>(ctx.db.sqlite, SUPPRESSION_HITS_SQL).all(
    partnerId,
    channel.type,
    address,
    channel.sender,
  );
  const refusal = suppressionRefusal(hits, channel.type, to, content);
  if (refusal) throw refusal;
}

/**
 * refuseSuppressed, read through `q` (the store, or the caller's transaction) on either store:
 * the same lookup and the same refusal.
 */
export async function refuseSuppressedIn(
  q: Queryable,
  dialect: Store['dialect'],
  partnerId: string,
  channel: { type: ChannelType; sender: string },
  to: string,
  content: MessageContent,
): Promise<void> {
  const address = normalizeAddress(channel.type, to);
  if (address === null) return;
  const hits = await q.all<Hit>(
    sql`SELECT reason, scope, group_id, created_at FROM suppressions ${indexedBy(dialect, 'suppressions_address')}
         WHERE partner_id = ${partnerId} AND channel = ${channel.type} AND address = ${address} AND scope IN ('', ${channel.sender})`,
  );
  const refusal = suppressionRefusal(hits, channel.type, to, content);
  if (refusal) throw refusal;
}

/** A suppression entry as the send's lookup (SUPPRESSION_HITS_SQL) reads it. */
export type SuppressionHit = Hit;

/**
 * The 400 recipient_suppressed for a send to `to`, from the entries found for its address on the
 * channel (partner-wide or for its sender); null when none of them stops it.
 */
export function suppressionRefusal(
  hits: readonly Hit[],
  channel: ChannelType,
  to: string,
  content: MessageContent,
): AppError | null {
  if (hits.length === 0) return null;
  const stopping = hits.filter((h) => blocks(h, channel, content)).sort((a, b) => a.created_at - b.created_at);
  if (stopping.length === 0) return null;
  return new AppError(
    'recipient_suppressed',
    `${to} is on this partner's suppression list for ${channel}: nothing was sent or charged`,
    stopping.map((h) => ({
      field: 'to',
      code: h.reason,
      message: `${REASON_WORDS[h.reason]}, since ${iso(h.created_at)}${h.scope ? ` (for sender ${h.scope})` : ''}`,
    })),
  );
}

// ---- filled from what providers say

/**
 * What a provider's answer or report says about the recipient, in msgd's terms: the provider
 * adapters and webhook parsers set it (src/providers), since only they know the codes.
 */
export interface SuppressionSignal {
  reason: SuppressionReason;
  /**
   * sender: only for the sender the message went from (Meta's per-number marketing opt-out);
   * partner: every sender (an email address that bounced); opt_out: as the partner's opt-out
   * scope says (a carrier's STOP block, Twilio 21610).
   */
  scope: 'sender' | 'partner' | 'opt_out';
  groupId?: string | null;
  /** Lifts the matching entry instead (SendGrid group_resubscribe). */
  lift?: boolean;
  /** The provider's words, kept as the entry's detail. */
  detail?: string | null;
}

/** The message a signal is about: its partner, channel, recipient and sender. */
export interface SignalTarget {
  id: string;
  partner_id: string;
  channel_type: ChannelType;
  to: string;
  from: string;
}

function scopeOf(ctx: CoreCtx, partnerId: string, scope: SuppressionSignal['scope'], sender: string): string {
  if (scope === 'partner') return '';
  if (scope === 'sender') return sender;
  return partnerOptOutScope(ctx, partnerId) === 'sender' ? sender : '';
}

/** Apply a provider's signal about a message's recipient, inside the caller's transaction. */
export function applySuppressionSignal(ctx: CoreCtx, m: SignalTarget, sig: SuppressionSignal): void {
  const address = normalizeAddress(m.channel_type, m.to);
  if (address === null) return;
  const scope = scopeOf(ctx, m.partner_id, sig.scope, m.from);
  if (sig.lift) {
    const rows = stmt<[string, string, string, string, string, string], SuppressionRow>(
      ctx.db.sqlite,
      `SELECT * FROM suppressions WHERE partner_id = ? AND channel = ? AND address = ? AND scope = ? AND reason = ? AND group_id = ?`,
    ).all(m.partner_id, m.channel_type, address, scope, sig.reason, sig.groupId ?? '');
    for (const r of rows) deleteRow(ctx, r, m.id);
    return;
  }
  addSuppression(ctx, {
    partnerId: m.partner_id,
    channel: m.channel_type,
    address,
    reason: sig.reason,
    scope,
    groupId: sig.groupId ?? null,
    source: m.id,
    detail: sig.detail ?? null,
  });
}

/** applySuppressionSignal, inside the caller's store transaction `q`, on either store. */
export async function applySuppressionSignalIn(
  q: Queryable,
  ctx: CoreCtx,
  m: SignalTarget,
  sig: SuppressionSignal,
): Promise<void> {
  const address = normalizeAddress(m.channel_type, m.to);
  if (address === null) return;
  let scope = '';
  if (sig.scope === 'sender') scope = m.from;
  else if (sig.scope === 'opt_out') {
    const r = await q.get<{ opt_out_scope: OptOutScope }>(
      sql`SELECT opt_out_scope FROM partners WHERE id = ${m.partner_id}`,
    );
    scope = (r?.opt_out_scope ?? 'sender') === 'sender' ? m.from : '';
  }
  if (sig.lift) {
    const rows = await q.all<SuppressionRow>(
      sql`SELECT * FROM suppressions WHERE partner_id = ${m.partner_id} AND channel = ${m.channel_type} AND address = ${address}
            AND scope = ${scope} AND reason = ${sig.reason} AND group_id = ${sig.groupId ?? ''} ORDER BY id`,
    );
    for (const r of rows) {
      await q.run(sql`DELETE FROM suppressions WHERE id = ${r.id}`);
      await emitEventIn(q, ctx, r.partner_id, 'suppression.deleted', {
        suppression: suppressionJson(r),
        deleted_by: m.id,
      });
    }
    return;
  }
  await addSuppressionIn(q, ctx, {
    partnerId: m.partner_id,
    channel: m.channel_type,
    address,
    reason: sig.reason,
    scope,
    groupId: sig.groupId ?? null,
    source: m.id,
    detail: sig.detail ?? null,
  });
}

/** What an inbound SMS's text says, by the operator's keyword lists (config suppressions). */
export function keywordOf(ctx: CoreCtx, text: string): 'opt_out' | 'opt_in' | null {
  const word = text.trim().toUpperCase();
  if (word === '' || word.length > 40) return null;
  const k = ctx.config.suppressions;
  if (k.optOutKeywords.includes(word)) return 'opt_out';
  if (k.optInKeywords.includes(word)) return 'opt_in';
  return null;
}

/**
 * An inbound SMS that is an opt-out or opt-in keyword: the customer (`from`) opts out of the
 * partner's number `to` (or every number, as the partner's opt-out scope says), or back in.
 * Opting in lifts their keyword opt-out and a carrier's refusal (provider_refused) for that
 * number and partner-wide: Twilio lifts its own block on START too.
 */
export function applyKeyword(
  ctx: CoreCtx,
  inbound: { messageId: string; partnerId: string; from: string; to: string; text: string },
): void {
  const kw = keywordOf(ctx, inbound.text);
  if (!kw) return;
  const address = normalizeAddress('sms', inbound.from);
  if (address === null) return;
  if (kw === 'opt_out') {
    addSuppression(ctx, {
      partnerId: inbound.partnerId,
      channel: 'sms',
      address,
      reason: 'opt_out_keyword',
      scope: partnerOptOutScope(ctx, inbound.partnerId) === 'sender' ? inbound.to : '',
      source: inbound.messageId,
      detail: `replied "${inbound.text.trim().slice(0, 40)}" to ${inbound.to}`,
    });
    return;
  }
  const rows = stmt<[string, string, string], SuppressionRow>(
    ctx.db.sqlite,
    `SELECT * FROM suppressions WHERE partner_id = ? AND channel = 'sms' AND address = ? AND scope IN ('', ?)
       AND reason IN ('opt_out_keyword', 'provider_refused')`,
  ).all(inbound.partnerId, address, inbound.to);
  for (const r of rows) deleteRow(ctx, r, inbound.messageId);
}

/** applyKeyword inside the caller's store transaction `q`, on either store. */
export async function applyKeywordIn(
  q: Queryable,
  ctx: CoreCtx,
  inbound: { messageId: string; partnerId: string; from: string; to: string; text: string },
): Promise<void> {
  const kw = keywordOf(ctx, inbound.text);
  if (!kw) return;
  const address = normalizeAddress('sms', inbound.from);
  if (address === null) return;
  if (kw === 'opt_out') {
    const r = await q.get<{ opt_out_scope: OptOutScope }>(
      sql`SELECT opt_out_scope FROM partners WHERE id = ${inbound.partnerId}`,
    );
    await addSuppressionIn(q, ctx, {
      partnerId: inbound.partnerId,
      channel: 'sms',
      address,
      reason: 'opt_out_keyword',
      scope: (r?.opt_out_scope ?? 'sender') === 'sender' ? inbound.to : '',
      source: inbound.messageId,
      detail: `replied "${inbound.text.trim().slice(0, 40)}" to ${inbound.to}`,
    });
    return;
  }
  const rows = await q.all<SuppressionRow>(
    sql`SELECT * FROM suppressions WHERE partner_id = ${inbound.partnerId} AND channel = 'sms' AND address = ${address}
          AND scope IN ('', ${inbound.to}) AND reason IN ('opt_out_keyword', 'provider_refused') ORDER BY id`,
  );
  for (const r of rows) {
    await q.run(sql`DELETE FROM suppressions WHERE id = ${r.id}`);
    await emitEventIn(q, ctx, r.partner_id, 'suppression.deleted', {
      suppression: suppressionJson(r),
      deleted_by: inbound.messageId,
    });
  }
}
