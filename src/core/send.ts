import type { idempotencyKeys, channels, gateways, partners } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { createHash } from 'node:crypto';
import { indexedBy } from '../db/dialect.js';
import type { Batcher, Store } from '../db/query.js';
import { sql } from '../db/sql.js';
import { AppError } from '../lib/errors.js';
import { type AcceptBatchDeps, type AcceptItem, acceptBatch, idempotencyKeyReused, ruledContent } from './accept.js';
import type { ChannelType, CoreCtx } from './context.js';
import type { MessageContent, TemplateCategory } from './message-content.js';
import { enforcesWindow, refuseOutsideWindow } from './customer-window.js';
import type { MessageRow } from './messages.js';
import { exhaustedError, fundsRefusal } from './ledger.js';
import { pickPrice, quote, type PriceCandidate, type Quote } from './prices.js';
import type { AuthPrincipal } from './tokens.js';
import { StoreSettingsCache } from './settings-version.js';
import { templatePreflight } from './whatsapp-template-send.js';
import { normalizeAddress, type SuppressionHit, suppressionRefusal } from './suppressions.js';

// Sending a message: the send rules in the spec's order (sendMessage, below), then the money
// rule made code: price it, then in ONE transaction check funds, debit, write the message
// (queued) and its dispatch job. No provider is called before that commit. Concurrent accepts
// share a group commit (the store's batcher, src/db/batch.ts): the batch is decided and written
// by acceptBatch (src/core/accept.ts); one send that fails takes back only its own writes. The
// dispatch job is written by the enqueue the caller passes in (src/jobs/dispatch.ts), inside the
// same transaction.

export interface Preflight {
  channel: { id: string; type: ChannelType; gatewayId: string; sender: string; enforceWindow: boolean };
  partner: { lowBalanceThreshold: number | null };
  /** The partner's unit price on this channel's primary gateway (pickPrice's precedence). */
  unitPrice: number;
  /** A WhatsApp template send checked against the catalogue: checked again in the accept transaction. */
  template?: {
    check: { name: string; language: string; components?: unknown[] };
    note: string;
    /** The template's category in the catalogue, as Meta names it (MARKETING, UTILITY, AUTHENTICATION). */
    category: TemplateCategory;
  };
}

type Channel = Row<typeof channels>;
/** The partner's row joined LEFT to its channel of a type and that channel's gateway: either may be missing. */
interface PreflightRow {
  channel_id: Channel['id'] | null;
  channel_type: Channel['type'] | null;
  gateway_id: Channel['gateway_id'] | null;
  sender: Channel['sender'] | null;
  gateway_status: Row<typeof gateways>['status'] | null;
  gateway_kind: Row<typeof gateways>['kind'] | null;
  gateway_settings: Row<typeof gateways>['settings'] | null;
  low_balance_threshold: Row<typeof partners>['low_balance_threshold'];
  /** pickPrice over the prices that may apply, read with the row. */
  unit_price: number;
}

// Per store: the partner's channel, gateway and prices for a channel type, kept until the
// settings version moves (src/core/settings-version.ts). A valid send reads no table here at all.
const preflightRows = new WeakMap<Store, StoreSettingsCache<string, PreflightRow | null>>();

async function loadPreflightRow(ctx: CoreCtx, partner: string, channel: string): Promise<PreflightRow | null> {
  const row = await ctx.store.get<Omit<PreflightRow, 'unit_price'>>(
    sql`SELECT c.id AS channel_id, c.type AS channel_type, c.gateway_id, c.sender, g.status AS gateway_status,
               g.kind AS gateway_kind, g.settings AS gateway_settings, p.low_balance_threshold
          FROM partners p
          LEFT JOIN channels c ON c.partner_id = p.id AND c.type = ${channel} AND c.status = 'active' AND c.position = 0
          LEFT JOIN gateways g ON g.id = c.gateway_id
         WHERE p.id = ${partner}`,
  );
  if (!row) return null;
  const gatewayId = row.gateway_id ?? '';
  const candidates = await ctx.store.all<PriceCandidate>(
    sql`SELECT partner_id, gateway_id, amount FROM prices
         WHERE channel_type = ${channel} AND partner_id IN (${partner}, '') AND gateway_id IN (${gatewayId}, '')
           AND category = ''`,
  );
  return { ...row, unit_price: pickPrice(candidates, partner, gatewayId) };
}

function preflightRow(ctx: CoreCtx, partnerId: string, type: ChannelType): Promise<PreflightRow | null> {
  let cache = preflightRows.get(ctx.store);
  if (!cache) {
    cache = new StoreSettingsCache(ctx.store, (key: string) => {
      const [partner, channel] = key.split('\0');
      return loadPreflightRow(ctx, partner, channel);
    });
    preflightRows.set(ctx.store, cache);
  }
  return cache.get(`${partnerId}\0${type}`);
}

/**
 * The 403 that comes before payload validation in the spec's order: the partner has no active
 * channel of this type, or its gateway is disabled. It reads only memory (a settings-keyed cache).
 * The 402 for exhausted funds, next in that order, needs the balance, and only a request about to
 * be refused reads it here (checkSend): a valid one meets it in the send transaction, whose debit
 * refuses an exhausted partner with the same answer (src/core/accept.ts). That is one query
 * fewer per send, and the check that counts is the one inside the transaction anyway.
 */
export async function preflight(ctx: CoreCtx, principal: AuthPrincipal, type: ChannelType): Promise<Preflight> {
  const row = await preflightRow(ctx, principal.partnerId, type);
  if (!row || !row.channel_id) {
    throw new AppError(
      'channel_not_assigned',
      `no ${type} gateway is assigned to this partner; ask the operator to assign one`,
    );
  }
  if (row.gateway_status !== 'active') {
    throw new AppError('channel_not_assigned', `the ${type} gateway assigned to this partner is disabled`);
  }
  return {
    channel: {
      id: row.channel_id,
      type: row.channel_type!,
      gatewayId: row.gateway_id!,
      sender: row.sender!,
      enforceWindow: enforcesWindow(ctx, row.gateway_kind, row.gateway_settings),
    },
    partner: { lowBalanceThreshold: row.low_balance_threshold },
    unitPrice: row.unit_price,
  };
}

type Funds = Pick<Row<typeof partners>, 'balance' | 'credit_limit'>;

/** The partner's balance and credit limit as they stand, read through the store. */
function readFunds(ctx: CoreCtx, partnerId: string): Promise<Funds | undefined> {
  return ctx.store.get<Funds>(sql`SELECT balance, credit_limit FROM partners WHERE id = ${partnerId}`);
}

/**
 * 402 when the partner's balance and credit limit are used up (balance + credit <= 0), whatever
 * a message would cost: the send API's rule 3 (as src/core/ledger.ts's refuseIfExhausted).
 */
async function refuseExhausted(ctx: CoreCtx, partnerId: string): Promise<void> {
  const f = await readFunds(ctx, partnerId);
  if (f && f.balance + f.credit_limit <= 0) throw exhaustedError(f.balance, f.credit_limit);
}

/**
 * The partner-wide half of preflight, for a request that names no channel yet (unparseable
 * JSON on the WhatsApp endpoint or POST /v1/messages): 403 when the partner has no active
 * gateway for any of the channels the endpoint can send on (it can never send there, as
 * preflight would say for a named channel), then 402 when balance and credit are exhausted.
 */
export async function fundsCheck(
  ctx: CoreCtx,
  principal: AuthPrincipal,
  anyOf: readonly ChannelType[] = [],
): Promise<void> {
  if (anyOf.length > 0) {
    const usable = (await ctx.store.get<{ n: number }>(
      sql`SELECT count(*) AS n FROM channels c JOIN gateways g ON g.id = c.gateway_id
           WHERE c.partner_id = ${principal.partnerId} AND c.status = 'active' AND g.status = 'active'
             AND c.type IN (${sql.join(anyOf.map((t) => sql`${t}`))})`,
    ))!;
    if (Number(usable.n) === 0) {
      const names = anyOf.length === 1 ? anyOf[0] : `${anyOf.slice(0, -1).join(', ')} or ${anyOf[anyOf.length - 1]}`;
      throw new AppError(
        'channel_not_assigned',
        `no active ${names} gateway is assigned to this partner; ask the operator to assign one`,
      );
    }
  }
  await refuseExhausted(ctx, principal.partnerId);
}

/** What a send on a channel would cost the partner, read without writing (POST /v1/messages/quote). */
export interface SendCost {
  /** The partner's gateway for the channel, when one is assigned. */
  gateway: { id: string; name: string } | null;
  sender: string | null;
  quote: Quote;
  currency: string;
  /** Balance plus credit limit, in micro-units. */
  available: number;
  /** Balance and credit are used up: a send is refused 402 before its payload is read. */
  exhausted: boolean;
  /** The 402 the send's debit would answer, or null when current funds and credit cover it. */
  fundsRefusal: AppError | null;
}

/**
 * The price of a send as accept() would compute it (pickPrice on the channel's primary gateway:
 * the partner's own price, else the default, else free; SMS per segment) and whether the
 * partner's funds cover it now. Reads only: the same tables and cache the send uses, no
 * message, debit or job written.
 */
export async function sendCost(
  ctx: CoreCtx,
  partnerId: string,
  type: ChannelType,
  priceText?: string,
): Promise<SendCost> {
  const row = await preflightRow(ctx, partnerId, type);
  const q = quote(row?.unit_price ?? 0, type, priceText);
  const gateway = row?.gateway_id
    ? ((await ctx.store.get<{ id: string; name: string }>(
        sql`SELECT id, name FROM gateways WHERE id = ${row.gateway_id}`,
      )) ?? null)
    : null;
  const f = await ctx.store.get<Funds & { currency: string }>(
    sql`SELECT balance, credit_limit, currency FROM partners WHERE id = ${partnerId}`,
  );
  return {
    gateway,
    sender: row?.sender ?? null,
    quote: q,
    currency: f?.currency ?? 'USD',
    available: f ? f.balance + f.credit_limit : 0,
    exhausted: !f || f.balance + f.credit_limit <= 0,
    fundsRefusal: fundsRefusal(f && { balance: f.balance, credit_limit: f.credit_limit }, q.total),
  };
}

/**
 * What the send's debit would answer for `price` on the partner's funds as they stand now: null
 * when they cover it, else its 402 (the accept decides with the same rule, src/core/accept.ts).
 */
export async function coverRefusal(ctx: CoreCtx, partnerId: string, price: number): Promise<AppError | null> {
  return fundsRefusal(await readFunds(ctx, partnerId), price);
}

export interface IdempotencyInput {
  key: string;
  /** Hash of method, path and canonical body. */
  hash: string;
}

/** What a request came to, as stored for an Idempotency-Key: each surface maps it to its answer's status. */
export type SendOutcomeKind = Row<typeof idempotencyKeys>['outcome'];

/**
 * `answer` is what the surface rendered (render, below) for the request that was accepted: core
 * stores it as an opaque JSON value beside the outcome kind and hands it back unchanged on a
 * replay, so a retry gets the same bytes from either API without core knowing an HTTP status.
 */
export type SendOutcome<A = unknown> =
  | { kind: 'accepted'; message: MessageRow; quote: Quote; answer: A }
  | { kind: 'replay'; outcome: SendOutcomeKind; answer: A };

/** What the accept needs: the context, the dispatch job's enqueue, the low-balance default, the key's lifetime. */
export type AcceptDeps = AcceptBatchDeps;

/** Canonical JSON (sorted keys) so whitespace and key order do not change the request hash. */
export function canonicalHash(method: string, path: string, body: unknown): string {
  const canon = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canon)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v as object)
              .sort()
              .map((k) => [k, canon((v as any)[k])]),
          )
        : v;
  return createHash('sha256')
    .update(`${method} ${path}\n${JSON.stringify(canon(body))}`)
    .digest('hex');
}

type IdemRow = Pick<Row<typeof idempotencyKeys>, 'request_hash' | 'outcome' | 'response_body' | 'created_at'>;

/** The stored outcome for this key, or null; throws if the key was used with another body. */
export async function findIdempotent(
  ctx: CoreCtx,
  partnerId: string,
  idem: IdempotencyInput,
  ttlMs: number,
): Promise<Extract<SendOutcome, { kind: 'replay' }> | null> {
  const row = await ctx.store.get<IdemRow>(
    sql`SELECT request_hash, outcome, response_body, created_at FROM idempotency_keys
         WHERE partner_id = ${partnerId} AND key = ${idem.key}`,
  );
  if (!row || row.created_at < ctx.now() - ttlMs) return null;
  if (row.request_hash !== idem.hash) throw idempotencyKeyReused();
  return { kind: 'replay', outcome: row.outcome, answer: JSON.parse(row.response_body) };
}

// ---------------------------------------------------------------------------------------------
// The send rules, in the spec's order. The surface authenticates first (401, and 403 for a
// suspended partner or a missing scope: src/http/auth.ts), then hands a SendRequest to
// sendMessage, which runs:
//   replay      an Idempotency-Key seen before answers with its first outcome (even if the
//               money has run out since: the first request was the one that paid)
//   403         channel_not_assigned: no active channel of the type, or its gateway disabled
//   402         insufficient_balance: balance and credit exhausted (read only for a request
//               about to be refused; a valid one meets it in the debit)
//   400         the payload (SendRequest.build), then each SEND_RULES rule in turn
//   price       the quote
//   402         insufficient_balance: the message costs more than is left (the debit, inside
//               the accept transaction)
// checkSend runs everything up to the price and writes nothing (a quote); accept writes.
// ---------------------------------------------------------------------------------------------

/** The message a surface built from its payload. */
export interface SendPlan {
  to: string;
  content: MessageContent;
  /** The text SMS segments are counted on. */
  priceText?: string;
  /** A scheduled send's time (ms), from the body's send_at: the message waits 'scheduled' until then, debited now. */
  sendAt?: number;
}

/** A send as the surface hands it over, after authentication. */
export interface SendRequest {
  principal: AuthPrincipal;
  /** The channel the request names; null when it names none we know (or the body could not be parsed). */
  channel: ChannelType | null;
  /** The channels the surface sends on: with no channel named, 403 unless one of them is assigned. */
  channels: readonly ChannelType[];
  /**
   * Validates the payload and builds the message, throwing the 400 (invalid_request) when it
   * cannot. Called after the 403 and 402 checks; a surface whose body could not even be parsed
   * throws that 400 here, so it too waits for them.
   */
  build(channel: ChannelType | null): SendPlan;
  /** Set when the request carries an Idempotency-Key. */
  idempotency?: IdempotencyInput;
}

/** A send that passed every rule and is priced: what accept writes, or what a quote shows. */
export interface CheckedSend {
  principal: AuthPrincipal;
  /** With a WhatsApp template's category price and catalogue check, when it is one. */
  preflight: Preflight;
  to: string;
  content: MessageContent;
  quote: Quote;
  sendAt?: number;
}

/** What a rule about the message itself sees. */
export interface SendRuleInput {
  partnerId: string;
  channel: Preflight['channel'];
  to: string;
  content: MessageContent;
  /** When the message will go: a scheduled send's send_at, else now. */
  sendAt?: number;
}

/** A rule run after the payload is valid and before the price: rejects with an AppError to refuse the message. */
export type SendRule = (ctx: CoreCtx, send: SendRuleInput) => Promise<void>;

/** 400 recipient_suppressed: the recipient opted out, bounced or complained (src/core/suppressions.ts). */
const suppressionRule: SendRule = async (ctx, s) => {
  const address = normalizeAddress(s.channel.type, s.to);
  if (address === null) return;
  // One seek on the leading columns of suppressions_address; the scope is checked on the rows found.
  const hits = await ctx.store.all<SuppressionHit>(
    sql`SELECT reason, scope, group_id, created_at FROM suppressions ${indexedBy(ctx.store.dialect, 'suppressions_address')}
         WHERE partner_id = ${s.partnerId} AND channel = ${s.channel.type} AND address = ${address}
           AND (scope || '') IN ('', ${s.channel.sender})`,
  );
  const refusal = suppressionRefusal(hits, s.channel.type, s.to, s.content);
  if (refusal) throw refusal;
};

/**
 * The rules about the message itself, in order, after payload validation and before the price.
 * A refusal from any of them still comes after exhausted funds (402), as a payload's 400 does.
 * A new rule (about the recipient, the content) goes here in its place in the order.
 */
export const SEND_RULES: readonly SendRule[] = [
  suppressionRule,
  // 400 outside_customer_service_window: a free-form message to a customer silent for 24 hours.
  // (at send_at for a scheduled send: the window must still be open then).
  (ctx, s) => refuseOutsideWindow(ctx, s.partnerId, s.channel, s.to, s.content, s.sendAt),
];

/**
 * Every rule up to and including the price, in the spec's order, writing nothing: the 402 for a
 * message that costs more than is left is decided by the debit when it is written (accept).
 */
export function checkSend(ctx: CoreCtx, req: SendRequest): Promise<CheckedSend> {
  return checkRules(ctx, req, false);
}

/**
 * checkSend's rules. With `suppressionInAccept` (a send accept() writes next) the suppression
 * list is left to the accept transaction, which must read it before the debit anyway (an opt-out
 * committed meanwhile refuses the send there): it is read here only when a later rule refuses, so
 * that refusal still comes after recipient_suppressed. A valid send then reads the list once, in
 * the transaction it already holds, and no read of its own is made for it.
 */
async function checkRules(ctx: CoreCtx, req: SendRequest, suppressionInAccept: boolean): Promise<CheckedSend> {
  const { principal } = req;
  // 403 channel not assigned / gateway disabled; with no channel named, 403 unless one of the
  // surface's is assigned, then 402 funds exhausted.
  let pre: Preflight | null = null;
  if (req.channel) pre = await preflight(ctx, principal, req.channel);
  else await fundsCheck(ctx, principal, req.channels);
  // A refusal after this point is a 400, and exhausted funds (402) come before it. Only a request
  // about to be refused reads the balance for it here; a valid one meets it in the debit.
  const refuse = async (e: unknown): Promise<never> => {
    if (pre) await refuseExhausted(ctx, principal.partnerId);
    throw e;
  };
  let plan: SendPlan;
  try {
    plan = req.build(req.channel);
  } catch (e) {
    return refuse(e);
  }
  if (!pre) throw new AppError('invalid_request', 'the request names no channel');
  const input: SendRuleInput = {
    partnerId: principal.partnerId,
    channel: pre.channel,
    to: plan.to,
    content: plan.content,
    sendAt: plan.sendAt,
  };
  let priced: Preflight;
  try {
    // 400 template_invalid against the WhatsApp catalogue, and the template category's price.
    priced =
      plan.content.kind === 'template'
        ? await templatePreflight(ctx, principal.partnerId, pre, plan.to, plan.content)
        : pre;
    input.content = ruledContent({ preflight: priced, content: plan.content });
    for (const rule of SEND_RULES) {
      if (rule === suppressionRule && suppressionInAccept) continue;
      try {
        await rule(ctx, input);
      } catch (e) {
        // A later rule's refusal: the list comes first in the order.
        if (suppressionInAccept) await suppressionRule(ctx, input);
        throw e;
      }
    }
  } catch (e) {
    return refuse(e);
  }
  return {
    principal,
    preflight: priced,
    to: plan.to,
    content: plan.content,
    quote: quote(priced.unitPrice, priced.channel.type, plan.priceText),
    sendAt: plan.sendAt,
  };
}

/**
 * The one way a partner's message is sent: the send rules in order (checkSend), then the money
 * rule (accept). `render` builds the surface's answer from the accepted message; an
 * Idempotency-Key stores it and a retry gets it back (kind 'replay'). Refusals are AppErrors
 * with their codes; the surface maps codes and outcome kinds to its statuses.
 */
export async function sendMessage<A>(
  deps: AcceptDeps,
  req: SendRequest,
  render: (m: MessageRow) => A,
): Promise<SendOutcome<A>> {
  let checked: CheckedSend;
  try {
    checked = await checkRules(deps.ctx, req, true);
  } catch (e) {
    // A replay answers before any refusal. The key is looked up here only for a request the
    // rules refuse: accept() looks it up first in its transaction, which a valid request's
    // replay meets there, without a read transaction of its own here.
    if (req.idempotency) {
      const hit = await findIdempotent(deps.ctx, req.principal.partnerId, req.idempotency, deps.idempotencyTtlMs);
      if (hit) return hit as SendOutcome<A>;
    }
    throw e;
  }
  return accept(deps, checked, { idempotency: req.idempotency, render });
}

const acceptors = new WeakMap<AcceptDeps, Batcher<AcceptItem, SendOutcome>>();

/** The group commit of these deps' accepts: one batcher per deps object, on its context's store. */
function acceptor(deps: AcceptDeps): Batcher<AcceptItem, SendOutcome> {
  let b = acceptors.get(deps);
  if (!b) {
    b = deps.ctx.store.batcher('accept', (tx, items) => acceptBatch(deps, tx, items));
    acceptors.set(deps, b);
  }
  return b;
}

/** What the accept's group commit has done: batches, sends in them, batches run again send by send. */
export function acceptStats(deps: AcceptDeps) {
  return acceptor(deps).stats;
}

/**
 * Writes a checked send: in one transaction shared by the accepts submitted with it (the store's
 * batcher; acceptBatch decides and writes them), the debit, the message (queued or scheduled),
 * its dispatch job and the Idempotency-Key's stored outcome. Settles after the COMMIT.
 */
export async function accept<A>(
  deps: AcceptDeps,
  send: CheckedSend,
  opts: { idempotency?: IdempotencyInput; render: (m: MessageRow) => A },
): Promise<SendOutcome<A>> {
  return (await acceptor(deps).run({ send, idempotency: opts.idempotency, render: opts.render })) as SendOutcome<A>;
}
