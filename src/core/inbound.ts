import type { channels } from '../db/schema.js';
import { indexedBy, jsonText } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import type { Row } from '../db/rows.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import type { ChannelType, CoreCtx, GatewayKind } from './context.js';
import { findContactId, findContactIdIn } from './contacts.js';
import { emitEvent, emitEventIn, type EventType } from './events.js';
import type { MessageContent } from './message-content.js';
import {
  createInbound,
  createInboundIn,
  getMessageRow,
  getMessageRowIn,
  recordHistoryIn,
  storeInbound,
  storeInboundIn,
  type MessageRow,
} from './messages.js';
import { applyStatus, applyStatusIn, markDeleted, markDeletedIn, type DeletedTarget } from './message-status.js';
import { canAdvance, type MessageStatus } from './statuses.js';
import {
  applyKeyword,
  applyKeywordIn,
  applySuppressionSignal,
  applySuppressionSignalIn,
  type SuppressionSignal,
} from './suppressions.js';
import { iso } from '../lib/time.js';
import { applyTemplateChange, applyTemplateChangeIn, type TemplateChange } from './whatsapp-templates.js';

// What provider webhooks mean, once src/providers has verified and parsed them, and how it
// lands: dedupe by the provider's own event identity, statuses routed by provider message id
// and moved forward only, watermarks, inbound messages routed by the receiving address.
// Everything here runs inside the caller's transaction: applyProviderEvents on SQLite's
// connection, synchronously (webhook processing's batch, one turn, no await per statement);
// applyProviderEventsIn through a store transaction's Tx, on either store. The two apply the
// same rules, each step written in both forms side by side.

/** Where an inbound event was addressed: identifies the channel, hence the partner. */
export interface Receiver {
  channel: ChannelType;
  /** Candidate sender addresses of the channel as msgd stores them (E.164, page id, IG account id). */
  addresses: string[];
  /**
   * Where a provider names the receiving account by one of its gateway's settings (WhatsApp
   * Cloud's phone_number_id), the channel is one on a gateway of that kind whose setting has
   * this value, rather than one found by address.
   */
  gatewayKey?: ReceiverKey;
}

export interface ReceiverKey {
  kind: GatewayKind;
  /** A top-level key of the gateway's settings. */
  setting: string;
  value: string;
}

export interface StatusRef {
  providerMessageId?: string;
  /** msgd's own id when the provider echoes it back (SendGrid custom_args). */
  messageId?: string;
  /** Narrows a provider id shared by several recipients (SendGrid's X-Message-Id). */
  recipient?: string;
}

/** A provider event in msgd's terms. `key` is the provider's own identity of the event. */
export type ProviderEvent =
  | {
      type: 'status';
      key: string;
      ref: StatusRef;
      /** null: recorded in history only (SendGrid processed, spamreport, ...). */
      status: MessageStatus | null;
      /** For a history-only event the partner is told of all the same (a spam report, an unsubscribe). */
      notify?: EventType;
      /** Provider facts the notification carries along (e.g. SendGrid's asm_group_id). */
      detail?: Record<string, unknown>;
      /** What the event says about the recipient: suppress (a hard bounce, a spam report) or lift. */
      suppress?: SuppressionSignal;
      providerStatus: string;
      errorCode?: string | null;
      errorMessage?: string | null;
      occurredAt: number;
    }
  | {
      type: 'message';
      key: string;
      receiver: Receiver;
      from: string;
      profileName?: string | null;
      /** null: the provider gives the message no id of its own (a Messenger reaction). */
      providerMessageId: string | null;
      content: MessageContent;
      occurredAt: number;
      /** The key an unsend of this message is recorded under: one seen first means it arrives deleted. */
      unsendKey?: string;
    }
  | {
      /** The customer unsent (deleted) a message they sent (Messenger/Instagram is_deleted). */
      type: 'unsend';
      key: string;
      receiver: Receiver;
      from: string;
      providerMessageId: string;
      occurredAt: number;
    }
  | {
      /** Messenger/Instagram: everything sent to `contact` before `watermark` was delivered/read. */
      type: 'watermark';
      key: string;
      receiver: Receiver;
      contact: string;
      status: 'delivered' | 'read';
      watermark: number | null;
      mids: string[];
      occurredAt: number;
    }
  /** A WhatsApp template's status or category changed (src/core/whatsapp-templates.ts). */
  | { type: 'template'; key: string; change: TemplateChange }
  /** Nothing to apply (an echo of our own send, an unsupported type); kept for the log. */
  | { type: 'note'; note: string };

export interface ApplyOptions {
  /** May this webhook touch a gateway's messages and channels (signed by it or the same account)? */
  trusted(gatewayId: string | null): boolean;
  refundOnFailure: boolean;
  /** Last try: a status whose message is still unknown is unroutable instead of waited for. */
  final: boolean;
}

export interface ApplyOutcome {
  processed: number;
  duplicates: number;
  unroutable: string[];
  ignored: string[];
  /** Statuses whose message is not there yet (the webhook beat the dispatch commit). */
  waiting: string[];
}

type Step = { ok: true } | { unroutable: string } | { waiting: string } | { ignored: string };

type ChannelRef = Pick<Row<typeof channels>, 'id' | 'partner_id' | 'gateway_id' | 'type' | 'sender'>;

export function applyProviderEvents(ctx: CoreCtx, events: ProviderEvent[], opts: ApplyOptions): ApplyOutcome {
  const out: ApplyOutcome = { processed: 0, duplicates: 0, unroutable: [], ignored: [], waiting: [] };
  for (const ev of events) {
    if (ev.type === 'note') {
      out.ignored.push(ev.note);
      continue;
    }
    if (stmt(ctx.db.sqlite, 'SELECT 1 FROM provider_event_keys WHERE key = ?').get(ev.key)) {
      out.duplicates++;
      continue;
    }
    const step =
      ev.type === 'status'
        ? status(ctx, ev, opts)
        : ev.type === 'message'
          ? inbound(ctx, ev, opts)
          : ev.type === 'unsend'
            ? unsend(ctx, ev, opts)
            : ev.type === 'template'
              ? template(ctx, ev, opts)
              : watermark(ctx, ev, opts);
    if ('waiting' in step) {
      out.waiting.push(step.waiting);
      continue;
    }
    if ('unroutable' in step) {
      // No key: a redelivery after the operator fixes the routing may still land.
      out.unroutable.push(step.unroutable);
      continue;
    }
    stmt(ctx.db.sqlite, 'INSERT INTO provider_event_keys (key, created_at) VALUES (?, ?)').run(ev.key, ctx.now());
    if ('ignored' in step) out.ignored.push(step.ignored);
    else out.processed++;
  }
  return out;
}

function sameAddress(a: string, b: string): boolean {
  return a.trim().toLowerCase() === b.trim().toLowerCase();
}

interface Found {
  found: MessageRow[];
  /** Whether any message by that id exists at all (trusted or not). */
  exists: boolean;
  /** The named message has no provider id yet: the report may be early (look again) or its only news. */
  early?: MessageRow;
  /** The named message was sent under another provider id: the report is about another attempt's copy. */
  otherCopy?: string;
}

/** Messages a status names. */
function findOutbound(ctx: CoreCtx, ref: StatusRef, trusted: ApplyOptions['trusted']): Found {
  const named = ref.messageId ? getMessageRow(ctx, ref.messageId) : undefined;
  const byName = foundByName(ref, trusted, named);
  if (byName) return byName;
  // Only messages whose reports name them by the provider's id are found by it (the partial
  // messages_provider index); the others' reports name msgd's id, handled above.
  const all = stmt<[string], MessageRow>(
    ctx.db.sqlite,
    'SELECT * FROM messages WHERE provider_message_id = ? AND provider_id_indexed = 1',
  ).all(ref.providerMessageId!);
  return { found: all.filter((m) => fits(ref, trusted, m)), exists: !!named || all.length > 0 };
}

/** findOutbound through the Tx `q`. */
async function findOutboundIn(q: Queryable, ref: StatusRef, trusted: ApplyOptions['trusted']): Promise<Found> {
  const named = ref.messageId ? await getMessageRowIn(q, ref.messageId) : undefined;
  const byName = foundByName(ref, trusted, named);
  if (byName) return byName;
  const all = await q.all<MessageRow>(
    sql`SELECT * FROM messages WHERE provider_message_id = ${ref.providerMessageId!} AND provider_id_indexed = 1 ORDER BY id`,
  );
  return { found: all.filter((m) => fits(ref, trusted, m)), exists: !!named || all.length > 0 };
}

/** Is the message one the status may be about: outbound, of a gateway it may touch, to its recipient? */
function fits(ref: StatusRef, trusted: ApplyOptions['trusted'], m: MessageRow | undefined): m is MessageRow {
  return (
    !!m && m.direction === 'outbound' && trusted(m.gateway_id) && (!ref.recipient || sameAddress(m.to, ref.recipient))
  );
}

/** What the status finds by msgd's own id (`named`); undefined: look it up by the provider's id. */
function foundByName(
  ref: StatusRef,
  trusted: ApplyOptions['trusted'],
  named: MessageRow | undefined,
): Found | undefined {
  if (fits(ref, trusted, named)) {
    // Every attempt at a send reports to the same callback URL (Twilio) or with the same
    // custom_args (SendGrid): a retry after a timeout the provider had in fact taken is a second
    // copy under another provider id, whose reports must not move the message that was sent.
    // A provider id of msgd's own making (SendGrid's 202 without X-Message-Id) says nothing.
    const recorded =
      named.provider_message_id !== null && named.provider_message_id !== named.id ? named.provider_message_id : null;
    const reported = ref.providerMessageId;
    if (!reported || recorded === reported) return { found: [named], exists: true };
    if (recorded !== null) return { found: [], exists: true, otherCopy: `${named.id} was sent as ${recorded}` };
    return { found: [], exists: true, early: named };
  }
  if (!ref.providerMessageId) return { found: [], exists: !!named };
  return undefined;
}

// applyStatus has no history-only path; these events never move a status. Some still concern
// the partner (a recipient complained or unsubscribed): those emit their own event.
function historyOnly(ctx: CoreCtx, m: MessageRow, ev: Extract<ProviderEvent, { type: 'status' }>) {
  stmt(
    ctx.db.sqlite,
    `INSERT INTO message_status_history (message_id, status, provider_status, error_code, error_message, ignored, occurred_at, created_at)
     VALUES (?, ?, ?, ?, ?, 1, ?, ?)`,
  ).run(
    m.id,
    ev.providerStatus,
    ev.providerStatus,
    ev.errorCode ?? null,
    ev.errorMessage ?? null,
    ev.occurredAt,
    ctx.now(),
  );
  if (ev.notify) emitEvent(ctx, m.partner_id, ev.notify, historyOnlyEvent(m, ev));
}

/** What the event of a history-only status carries. */
function historyOnlyEvent(m: MessageRow, ev: Extract<ProviderEvent, { type: 'status' }>) {
  return {
    message_id: m.id,
    channel: m.channel_type,
    to: m.to,
    status: m.status,
    provider_status: ev.providerStatus,
    ...(ev.detail ?? {}),
    occurred_at: iso(ev.occurredAt),
  };
}

function otherCopyNote(ev: Extract<ProviderEvent, { type: 'status' }>, otherCopy: string): string {
  return `${ev.providerStatus} for provider id ${ev.ref.providerMessageId}, another attempt's copy: message ${otherCopy}`;
}

/** A status whose message is not found: unroutable, or (before the last look) waited for. */
function notFound(
  ev: Extract<ProviderEvent, { type: 'status' }>,
  label: string,
  exists: boolean,
  opts: ApplyOptions,
): Step {
  const to = ev.ref.recipient ? ` to ${ev.ref.recipient}` : '';
  // Another gateway's (or recipient's) message under the same id will not become ours by waiting.
  // msgd's own id when the report names it (Twilio's ?message=, SendGrid's custom_args), else the provider's.
  const which = ev.ref.messageId ? `message ${label}` : `message with provider id ${label}`;
  if (exists) return { unroutable: `${which}${to} is not one this webhook's signer sent` };
  const what = `no ${which}${to}`;
  return opts.final ? { unroutable: what } : { waiting: what };
}

function statusChange(ev: Extract<ProviderEvent, { type: 'status' }>, status: MessageStatus, opts: ApplyOptions) {
  return {
    status,
    providerStatus: ev.providerStatus,
    errorCode: ev.errorCode ?? null,
    errorMessage: ev.errorMessage ?? null,
    occurredAt: ev.occurredAt,
    refundOnFailure: opts.refundOnFailure,
  };
}

function status(ctx: CoreCtx, ev: Extract<ProviderEvent, { type: 'status' }>, opts: ApplyOptions): Step {
  const label = ev.ref.messageId ?? ev.ref.providerMessageId;
  if (!label) return { unroutable: `${ev.providerStatus} event names no message` };
  const { found, exists, early, otherCopy } = findOutbound(ctx, ev.ref, opts.trusted);
  if (otherCopy) return { unroutable: otherCopyNote(ev, otherCopy) };
  if (early) {
    // Its dispatch may not have recorded the provider's answer yet: look again, as for a report
    // found by provider id. On the last look the report is all there is (the answer never came:
    // a timeout the provider had taken): it applies, and its provider id is the message's.
    if (!opts.final)
      return { waiting: `message ${early.id} has no provider id yet (reported as ${ev.ref.providerMessageId})` };
    // A retry's note (a timeout) is not the message's error once the provider reports it.
    stmt(
      ctx.db.sqlite,
      `UPDATE messages SET provider_message_id = ?,
         error_code = CASE WHEN status IN ('queued', 'sending') THEN NULL ELSE error_code END,
         error_message = CASE WHEN status IN ('queued', 'sending') THEN NULL ELSE error_message END
       WHERE id = ? AND (provider_message_id IS NULL OR provider_message_id = id)`,
    ).run(ev.ref.providerMessageId!, early.id);
    Object.assign(early, getMessageRow(ctx, early.id));
    found.push(early);
  }
  if (found.length === 0) return notFound(ev, label, exists, opts);
  for (const m of found) {
    if (ev.suppress) applySuppressionSignal(ctx, m, ev.suppress);
    if (ev.status === null) historyOnly(ctx, m, ev);
    else applyStatus(ctx, m, statusChange(ev, ev.status, opts));
  }
  return { ok: true };
}

const CHANNEL_COLUMNS = 'c.id, c.partner_id, c.gateway_id, c.type, c.sender';

function route(ctx: CoreCtx, r: Receiver, trusted: ApplyOptions['trusted']): ChannelRef | string {
  const db = ctx.db.sqlite;
  let found: ChannelRef[];
  const key = r.gatewayKey;
  if (key) {
    found = stmt<[string, string, string, string], ChannelRef>(
      db,
      `SELECT ${CHANNEL_COLUMNS} FROM channels c JOIN gateways g ON g.id = c.gateway_id
        WHERE c.type = ? AND c.status = 'active' AND g.kind = ? AND json_extract(g.settings, ?) = ?`,
    ).all(r.channel, key.kind, `$.${key.setting}`, key.value);
    // One gateway could in principle serve several senders: prefer the address the provider names.
    found.sort((a, b) => Number(r.addresses.includes(b.sender)) - Number(r.addresses.includes(a.sender)));
  } else {
    found = r.addresses.flatMap((addr) =>
      stmt<[string, string], ChannelRef>(
        db,
        `SELECT ${CHANNEL_COLUMNS} FROM channels c WHERE c.type = ? AND c.sender = ? AND c.status = 'active'`,
      ).all(r.channel, addr),
    );
  }
  return routed(r, found, trusted);
}

/** The channel found for the receiver that the webhook may touch, or why there is none. */
function routed(r: Receiver, found: ChannelRef[], trusted: ApplyOptions['trusted']): ChannelRef | string {
  const key = r.gatewayKey;
  const where = key ? `${key.setting} ${key.value}` : r.addresses.join(' / ');
  if (found.length === 0) return `no active ${r.channel} channel for ${where}`;
  const ok = found.find((c) => trusted(c.gateway_id));
  return ok ?? `the ${r.channel} channel for ${where} is on a gateway that did not sign this webhook`;
}

function inboundInput(ch: ChannelRef, ev: Extract<ProviderEvent, { type: 'message' }>) {
  return {
    partnerId: ch.partner_id,
    channel: { id: ch.id, type: ch.type, gatewayId: ch.gateway_id, sender: ch.sender },
    from: ev.from,
    profileName: ev.profileName ?? null,
    providerMessageId: ev.providerMessageId,
    content: ev.content,
    occurredAt: ev.occurredAt,
  };
}

function unsentBeforeNote(ev: Extract<ProviderEvent, { type: 'message' }>): string {
  return `message ${ev.providerMessageId} was unsent before it arrived: stored deleted, content redacted`;
}

function inbound(ctx: CoreCtx, ev: Extract<ProviderEvent, { type: 'message' }>, opts: ApplyOptions): Step {
  const ch = route(ctx, ev.receiver, opts.trusted);
  if (typeof ch === 'string') return { unroutable: ch };
  const input = inboundInput(ch, ev);
  // Its unsend came first (Meta delivers out of order): stored deleted, its content never kept,
  // and not announced, since the partner has nothing to remove.
  const unsent = ev.unsendKey
    ? stmt<[string], { created_at: number }>(
        ctx.db.sqlite,
        'SELECT created_at FROM provider_event_keys WHERE key = ?',
      ).get(ev.unsendKey)
    : undefined;
  if (unsent) {
    storeInbound(ctx, input, unsent.created_at);
    return { ignored: unsentBeforeNote(ev) };
  }
  const created = createInbound(ctx, input);
  // STOP / START: the whole text is a keyword (config suppressions); the message is stored and
  // announced all the same, so the partner sees it.
  if (ch.type === 'sms' && ev.content.kind === 'text') {
    applyKeyword(ctx, {
      messageId: created.message.id,
      partnerId: ch.partner_id,
      from: ev.from,
      to: ch.sender,
      text: ev.content.text,
    });
  }
  return { ok: true };
}

/**
 * The inbound messages an unsend may name: by the provider's id (unique at Meta, so one, or a
 * forged copy's few) on that channel type, whoever's channel it came in on.
 */
export const UNSENT_MESSAGE_SQL = `SELECT id, partner_id, gateway_id, channel_type, "from", "to", conversation_id, provider_message_id, deleted_at
    FROM messages INDEXED BY messages_provider
   WHERE provider_message_id = ? AND provider_id_indexed = 1 AND channel_type = ? AND direction = 'inbound'
   ORDER BY id LIMIT 10`;

function unsend(ctx: CoreCtx, ev: Extract<ProviderEvent, { type: 'unsend' }>, opts: ApplyOptions): Step {
  const mid = ev.providerMessageId;
  // The message is found as Meta names it (its mid, sent to this page or account, by a webhook
  // the gateway it came in on would have signed), not through today's channel: a page since
  // unassigned, or given to another partner, must not keep what the customer took back. It
  // stays its own partner's, who is the one told.
  const named = stmt<[string, string], DeletedTarget & { gateway_id: string | null; deleted_at: number | null }>(
    ctx.db.sqlite,
    UNSENT_MESSAGE_SQL,
  )
    .all(mid, ev.receiver.channel)
    .filter((m) => ev.receiver.addresses.includes(m.to) && opts.trusted(m.gateway_id));
  const m = named.find((x) => x.from === ev.from);
  if (!m) {
    if (named.length) return { ignored: `unsend of ${mid} by ${ev.from}, who did not send it` };
    const ch = route(ctx, ev.receiver, opts.trusted);
    if (typeof ch === 'string') return { unroutable: ch };
    // Its key is kept (8 days, longer than Meta retries): should the message arrive after all, it is stored deleted.
    return { ignored: `unsend of ${mid}, which is not here: if it arrives, it is stored deleted` };
  }
  if (m.deleted_at !== null) return { ignored: `message ${m.id} (${mid}) is deleted already` };
  markDeleted(ctx, m, ev.occurredAt);
  return { ok: true };
}

/** How far msgd's clock may run ahead of the provider's before a watermark misses a message. */
export const WATERMARK_SLACK_MS = 1000;

// Failures are left alone: a watermark says what arrived, and a failed message never did.
const WATERMARKABLE: Record<'delivered' | 'read', string> = {
  delivered: `('sending','sent','deferred')`,
  read: `('sending','sent','deferred','delivered')`,
};

/**
 * The contact's outbound messages a delivery or read watermark covers: its conversations, then
 * each one's messages. Without INDEXED BY the planner walked every message of the partner on
 * messages_partner, once per receipt.
 */
export function watermarkSql(status: 'delivered' | 'read'): string {
  return `SELECT m.* FROM conversations v INDEXED BY conversations_contact JOIN messages m INDEXED BY messages_conversation ON m.conversation_id = v.id
      WHERE v.contact_id = ? AND v.channel_type = ? AND m.partner_id = ? AND m.direction = 'outbound'
        AND m.sent_at IS NOT NULL AND m.sent_at <= ? AND m.status IN ${WATERMARKABLE[status]}
      ORDER BY m.id`;
}

/**
 * A contact's outbound message whose provider call may be under way: claimed (sending), not
 * settled (no sent_at), and touched within a dispatch timeout (one waiting out a retry's backoff
 * was touched by its last attempt's note, longer ago).
 */
const IN_FLIGHT_SQL = `SELECT m.id FROM conversations v INDEXED BY conversations_contact JOIN messages m INDEXED BY messages_conversation ON m.conversation_id = v.id
    WHERE v.contact_id = ? AND v.channel_type = ? AND m.partner_id = ? AND m.direction = 'outbound'
      AND m.status = 'sending' AND m.sent_at IS NULL AND m.updated_at >= ?
    LIMIT 1`;

function watermark(ctx: CoreCtx, ev: Extract<ProviderEvent, { type: 'watermark' }>, opts: ApplyOptions): Step {
  const ch = route(ctx, ev.receiver, opts.trusted);
  if (typeof ch === 'string') return { unroutable: ch };
  const db = ctx.db.sqlite;
  const advance = (m: MessageRow) => {
    if (!canAdvance(m.status, ev.status)) return;
    applyStatus(ctx, m, { status: ev.status, providerStatus: ev.status, occurredAt: ev.occurredAt });
  };
  // A message to this contact still in its provider call has neither its sent_at nor its mid
  // yet, and the receipt may be about it (Meta can report delivery before answering the send).
  // Look again later, as for a status that beats its message: what is covered now is applied
  // now (applying twice changes nothing), the rest when the send has settled.
  const contact = findContactId(ctx, ch.partner_id, ch.type, ev.contact);
  const since = ctx.now() - ctx.config.dispatch.timeoutMs - 2000;
  const inFlight =
    !opts.final && contact
      ? stmt<[string, string, string, number], { id: string }>(db, IN_FLIGHT_SQL).get(
          contact,
          ch.type,
          ch.partner_id,
          since,
        )?.id
      : undefined;
  // The provider's watermark is its own clock's stamp of the newest message covered; sent_at is
  // ours, taken just before the provider call, so normally earlier than that stamp. The slack
  // absorbs a clock running ahead of Meta's.
  let mark = ev.watermark === null ? null : ev.watermark + WATERMARK_SLACK_MS;
  for (const mid of ev.mids) {
    for (const m of findOutbound(ctx, { providerMessageId: mid }, opts.trusted).found) {
      if (m.partner_id !== ch.partner_id) continue;
      advance(m);
      // Instagram reads name one message: everything sent before it was seen too.
      if (ev.watermark === null && m.sent_at !== null) mark = Math.max(mark ?? 0, m.sent_at);
    }
  }
  const later: Step = { waiting: `message ${inFlight} to ${ev.contact} is still being sent` };
  if (mark === null) return inFlight ? later : { ok: true };
  if (!contact) return { ignored: `${ev.status} watermark for ${ev.contact}, who has no messages here` };
  const rows = stmt<[string, string, string, number], MessageRow>(db, watermarkSql(ev.status)).all(
    contact,
    ch.type,
    ch.partner_id,
    mark,
  );
  for (const m of rows) advance(m);
  return inFlight ? later : { ok: true };
}

function template(ctx: CoreCtx, ev: Extract<ProviderEvent, { type: 'template' }>, opts: ApplyOptions): Step {
  return templateStep(
    ev,
    applyTemplateChange(ctx, ev.change, (id) => opts.trusted(id)),
  );
}

function templateStep(
  ev: Extract<ProviderEvent, { type: 'template' }>,
  r: { updated: number } | { unroutable: string },
): Step {
  if ('unroutable' in r) return r;
  const c = ev.change;
  return r.updated > 0
    ? { ok: true }
    : { ignored: `template ${c.name ?? c.metaId} (${c.language ?? '?'}): a newer state is already recorded` };
}

// --- Through a store transaction ---------------------------------------------------------------
// The same rules as above, each step through the Tx `q` (PostgreSQL's webhook processing, or
// SQLite's through its store). Where a step above reads or writes, the one below does the same
// statement in the sql`` form both stores run.

/** applyProviderEvents inside the caller's store transaction `q`, on either store. */
export async function applyProviderEventsIn(
  q: Queryable,
  ctx: CoreCtx,
  events: ProviderEvent[],
  opts: ApplyOptions,
): Promise<ApplyOutcome> {
  const out: ApplyOutcome = { processed: 0, duplicates: 0, unroutable: [], ignored: [], waiting: [] };
  for (const ev of events) {
    if (ev.type === 'note') {
      out.ignored.push(ev.note);
      continue;
    }
    // The event's key is taken first: a transaction applying the same event at the same time
    // (another msgd on the same PostgreSQL) waits on it here, and finds it once that one commits.
    const taken = await q.get(
      sql`INSERT INTO provider_event_keys (key, created_at) VALUES (${ev.key}, ${ctx.now()})
          ON CONFLICT DO NOTHING RETURNING key`,
    );
    if (!taken) {
      out.duplicates++;
      continue;
    }
    const step =
      ev.type === 'status'
        ? await statusIn(q, ctx, ev, opts)
        : ev.type === 'message'
          ? await inboundIn(q, ctx, ev, opts)
          : ev.type === 'unsend'
            ? await unsendIn(q, ctx, ev, opts)
            : ev.type === 'template'
              ? await templateIn(q, ctx, ev, opts)
              : await watermarkIn(q, ctx, ev, opts);
    if ('waiting' in step || 'unroutable' in step) {
      // Not applied: its key goes, so a later look or a redelivery may still land.
      await q.run(sql`DELETE FROM provider_event_keys WHERE key = ${ev.key}`);
      if ('waiting' in step) out.waiting.push(step.waiting);
      else out.unroutable.push(step.unroutable);
      continue;
    }
    if ('ignored' in step) out.ignored.push(step.ignored);
    else out.processed++;
  }
  return out;
}

async function historyOnlyIn(
  q: Queryable,
  ctx: CoreCtx,
  m: MessageRow,
  ev: Extract<ProviderEvent, { type: 'status' }>,
) {
  await recordHistoryIn(q, ctx, m.id, ev.providerStatus, {
    providerStatus: ev.providerStatus,
    errorCode: ev.errorCode ?? null,
    errorMessage: ev.errorMessage ?? null,
    ignored: true,
    at: ev.occurredAt,
  });
  if (ev.notify) await emitEventIn(q, ctx, m.partner_id, ev.notify, historyOnlyEvent(m, ev));
}

async function statusIn(
  q: Queryable,
  ctx: CoreCtx,
  ev: Extract<ProviderEvent, { type: 'status' }>,
  opts: ApplyOptions,
): Promise<Step> {
  const label = ev.ref.messageId ?? ev.ref.providerMessageId;
  if (!label) return { unroutable: `${ev.providerStatus} event names no message` };
  const { found, exists, early, otherCopy } = await findOutboundIn(q, ev.ref, opts.trusted);
  if (otherCopy) return { unroutable: otherCopyNote(ev, otherCopy) };
  if (early) {
    if (!opts.final)
      return { waiting: `message ${early.id} has no provider id yet (reported as ${ev.ref.providerMessageId})` };
    await q.run(
      sql`UPDATE messages SET provider_message_id = ${ev.ref.providerMessageId!},
            error_code = CASE WHEN status IN ('queued', 'sending') THEN NULL ELSE error_code END,
            error_message = CASE WHEN status IN ('queued', 'sending') THEN NULL ELSE error_message END
          WHERE id = ${early.id} AND (provider_message_id IS NULL OR provider_message_id = id)`,
    );
    Object.assign(early, await getMessageRowIn(q, early.id));
    found.push(early);
  }
  if (found.length === 0) return notFound(ev, label, exists, opts);
  for (const m of found) {
    if (ev.suppress) await applySuppressionSignalIn(q, ctx, m, ev.suppress);
    if (ev.status === null) await historyOnlyIn(q, ctx, m, ev);
    else await applyStatusIn(q, ctx, m, statusChange(ev, ev.status, opts));
  }
  return { ok: true };
}

async function routeIn(
  q: Queryable,
  ctx: CoreCtx,
  r: Receiver,
  trusted: ApplyOptions['trusted'],
): Promise<ChannelRef | string> {
  let found: ChannelRef[];
  const key = r.gatewayKey;
  if (key) {
    found = await q.all<ChannelRef>(
      sql`SELECT c.id, c.partner_id, c.gateway_id, c.type, c.sender FROM channels c JOIN gateways g ON g.id = c.gateway_id
          WHERE c.type = ${r.channel} AND c.status = 'active' AND g.kind = ${key.kind}
            AND ${jsonText(ctx.store.dialect, 'g.settings', key.setting)} = ${key.value}
          ORDER BY c.id`,
    );
    found.sort((a, b) => Number(r.addresses.includes(b.sender)) - Number(r.addresses.includes(a.sender)));
  } else {
    found = [];
    for (const addr of r.addresses) {
      found.push(
        ...(await q.all<ChannelRef>(
          sql`SELECT c.id, c.partner_id, c.gateway_id, c.type, c.sender FROM channels c
              WHERE c.type = ${r.channel} AND c.sender = ${addr} AND c.status = 'active' ORDER BY c.id`,
        )),
      );
    }
  }
  return routed(r, found, trusted);
}

async function inboundIn(
  q: Queryable,
  ctx: CoreCtx,
  ev: Extract<ProviderEvent, { type: 'message' }>,
  opts: ApplyOptions,
): Promise<Step> {
  const ch = await routeIn(q, ctx, ev.receiver, opts.trusted);
  if (typeof ch === 'string') return { unroutable: ch };
  const input = inboundInput(ch, ev);
  const unsent = ev.unsendKey
    ? await q.get<{ created_at: number }>(sql`SELECT created_at FROM provider_event_keys WHERE key = ${ev.unsendKey}`)
    : undefined;
  if (unsent) {
    await storeInboundIn(q, ctx, input, unsent.created_at);
    return { ignored: unsentBeforeNote(ev) };
  }
  const created = await createInboundIn(q, ctx, input);
  if (ch.type === 'sms' && ev.content.kind === 'text') {
    await applyKeywordIn(q, ctx, {
      messageId: created.message.id,
      partnerId: ch.partner_id,
      from: ev.from,
      to: ch.sender,
      text: ev.content.text,
    });
  }
  return { ok: true };
}

async function unsendIn(
  q: Queryable,
  ctx: CoreCtx,
  ev: Extract<ProviderEvent, { type: 'unsend' }>,
  opts: ApplyOptions,
): Promise<Step> {
  const mid = ev.providerMessageId;
  const named = (
    await q.all<DeletedTarget & { gateway_id: string | null; deleted_at: number | null }>(
      sql`SELECT id, partner_id, gateway_id, channel_type, "from", "to", conversation_id, provider_message_id, deleted_at
            FROM messages ${indexedBy(ctx.store.dialect, 'messages_provider')}
           WHERE provider_message_id = ${mid} AND provider_id_indexed = 1 AND channel_type = ${ev.receiver.channel}
             AND direction = 'inbound'
           ORDER BY id LIMIT 10`,
    )
  ).filter((m) => ev.receiver.addresses.includes(m.to) && opts.trusted(m.gateway_id));
  const m = named.find((x) => x.from === ev.from);
  if (!m) {
    if (named.length) return { ignored: `unsend of ${mid} by ${ev.from}, who did not send it` };
    const ch = await routeIn(q, ctx, ev.receiver, opts.trusted);
    if (typeof ch === 'string') return { unroutable: ch };
    return { ignored: `unsend of ${mid}, which is not here: if it arrives, it is stored deleted` };
  }
  if (m.deleted_at !== null) return { ignored: `message ${m.id} (${mid}) is deleted already` };
  await markDeletedIn(q, ctx, m, ev.occurredAt);
  return { ok: true };
}

async function watermarkIn(
  q: Queryable,
  ctx: CoreCtx,
  ev: Extract<ProviderEvent, { type: 'watermark' }>,
  opts: ApplyOptions,
): Promise<Step> {
  const ch = await routeIn(q, ctx, ev.receiver, opts.trusted);
  if (typeof ch === 'string') return { unroutable: ch };
  const d = ctx.store.dialect;
  const advance = async (m: MessageRow) => {
    if (!canAdvance(m.status, ev.status)) return;
    await applyStatusIn(q, ctx, m, { status: ev.status, providerStatus: ev.status, occurredAt: ev.occurredAt });
  };
  const contact = await findContactIdIn(q, ch.partner_id, ch.type, ev.contact);
  const since = ctx.now() - ctx.config.dispatch.timeoutMs - 2000;
  const inFlight =
    !opts.final && contact
      ? (
          await q.get<{ id: string }>(
            sql`SELECT m.id FROM conversations v ${indexedBy(d, 'conversations_contact')}
                  JOIN messages m ${indexedBy(d, 'messages_conversation')} ON m.conversation_id = v.id
                WHERE v.contact_id = ${contact} AND v.channel_type = ${ch.type} AND m.partner_id = ${ch.partner_id}
                  AND m.direction = 'outbound' AND m.status = 'sending' AND m.sent_at IS NULL AND m.updated_at >= ${since}
                LIMIT 1`,
          )
        )?.id
      : undefined;
  let mark = ev.watermark === null ? null : ev.watermark + WATERMARK_SLACK_MS;
  for (const mid of ev.mids) {
    for (const m of (await findOutboundIn(q, { providerMessageId: mid }, opts.trusted)).found) {
      if (m.partner_id !== ch.partner_id) continue;
      await advance(m);
      if (ev.watermark === null && m.sent_at !== null) mark = Math.max(mark ?? 0, m.sent_at);
    }
  }
  const later: Step = { waiting: `message ${inFlight} to ${ev.contact} is still being sent` };
  if (mark === null) return inFlight ? later : { ok: true };
  if (!contact) return { ignored: `${ev.status} watermark for ${ev.contact}, who has no messages here` };
  const rows = await q.all<MessageRow>(
    sql`SELECT m.* FROM conversations v ${indexedBy(d, 'conversations_contact')}
          JOIN messages m ${indexedBy(d, 'messages_conversation')} ON m.conversation_id = v.id
        WHERE v.contact_id = ${contact} AND v.channel_type = ${ch.type} AND m.partner_id = ${ch.partner_id}
          AND m.direction = 'outbound' AND m.sent_at IS NOT NULL AND m.sent_at <= ${mark}
          AND m.status IN ${sql.raw(WATERMARKABLE[ev.status])}
        ORDER BY m.id`,
  );
  for (const m of rows) await advance(m);
  return inFlight ? later : { ok: true };
}

async function templateIn(
  q: Queryable,
  ctx: CoreCtx,
  ev: Extract<ProviderEvent, { type: 'template' }>,
  opts: ApplyOptions,
): Promise<Step> {
  return templateStep(ev, await applyTemplateChangeIn(q, ctx, ev.change, (id) => opts.trusted(id)));
}
