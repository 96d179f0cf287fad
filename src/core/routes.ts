import type { Row } from '../db/rows.js';
import type { channels, messages } from '../db/schema.js';
import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { formatMoney, moneyJson } from '../lib/money.js';
import { iso } from '../lib/time.js';
import { FAILOVER_TYPES, routeOrder, routeOrderIn, type ChannelWithGateway } from './channels.js';
import type { ChannelType, CoreCtx } from './context.js';
import { emitEvent, emitEventIn } from './events.js';
import { debit, debitIn, InsufficientBalanceError, refund, refundIn } from './ledger.js';
import { getMessageState, getMessageStateIn, recordHistoryIn, type MessageRow } from './messages.js';
import { applyStatus, applyStatusIn } from './message-status.js';
import { pickPrice, type PriceCandidate, unitPrice } from './prices.js';

// A message's route: the gateway of its partner's channel order that sends it (src/core/channels.ts
// keeps the order). Moving a message to the next gateway is one transaction: the price of the new
// gateway is charged (the difference debited, or refunded, with the reason), the message names
// its new gateway, channel and sender, its history says which gateway it left and why, and the
// partner gets message.rerouted. The debit commits before the new gateway is called: the money
// rule holds for every route. When the partner's funds no longer cover a dearer route the message
// fails with insufficient_balance and its price is refunded: waiting for the cheaper gateway
// could hold it for hours, and the partner can send it again once topped up.

/** What rerouting reads of a message. */
export type RouteTarget = Pick<MessageRow, 'id' | 'partner_id' | 'channel_type' | 'channel_id' | 'gateway_id'>;

type ChannelPosition = Pick<Row<typeof channels>, 'position'>;
type Priced = Pick<Row<typeof messages>, 'price' | 'segments' | 'status'>;

/**
 * The gateways after the message's current one in its partner's order (SMS and email only),
 * active and taking calls (`usable`: the circuit breaker's word), first first.
 */
export function nextRoutes(ctx: CoreCtx, m: RouteTarget, usable: (gatewayId: string) => boolean): ChannelWithGateway[] {
  if (!FAILOVER_TYPES.includes(m.channel_type) || !m.channel_id) return [];
  // The place of the channel it is on, even if that channel was unassigned since.
  const here = stmt<[string], ChannelPosition>(ctx.db.sqlite, 'SELECT position FROM channels WHERE id = ?').get(
    m.channel_id,
  );
  if (!here) return [];
  return routeOrder(ctx, m.partner_id, m.channel_type as ChannelType).filter(
    (c) =>
      c.position > here.position &&
      c.gateway_id !== m.gateway_id &&
      c.gateway_status === 'active' &&
      usable(c.gateway_id),
  );
}

/** nextRoutes, read through `q` (the store, or the caller's transaction), on either store. */
export async function nextRoutesIn(
  q: Queryable,
  m: RouteTarget,
  usable: (gatewayId: string) => boolean,
): Promise<ChannelWithGateway[]> {
  if (!FAILOVER_TYPES.includes(m.channel_type) || !m.channel_id) return [];
  const here = await q.get<ChannelPosition>(sql`SELECT position FROM channels WHERE id = ${m.channel_id}`);
  if (!here) return [];
  return (await routeOrderIn(q, m.partner_id, m.channel_type as ChannelType)).filter(
    (c) =>
      c.position > here.position &&
      c.gateway_id !== m.gateway_id &&
      c.gateway_status === 'active' &&
      usable(c.gateway_id),
  );
}

/** Whether the partner has any fallback for this message's channel (so a message may wait for one). */
export function hasFallbacks(ctx: CoreCtx, m: RouteTarget): boolean {
  return nextRoutes(ctx, m, () => true).length > 0;
}

export type RerouteOutcome =
  | { kind: 'rerouted'; difference: number; price: number }
  /** The new route costs more than the partner's funds cover: failed and refunded. */
  | { kind: 'failed' }
  /** The message was no longer waiting for its dispatch (a report or an operator settled it). */
  | { kind: 'settled' };

/**
 * Move a message waiting for its dispatch to `to`, charging that gateway's price. Inside the
 * caller's transaction (the dispatch job's outcome commits with it).
 */
export function reroute(
  ctx: CoreCtx,
  m: RouteTarget,
  from: { id: string; name: string },
  to: ChannelWithGateway,
  why: { code: string; message: string },
): RerouteOutcome {
  const now = ctx.now();
  const cur = stmt<[string], Priced>(ctx.db.sqlite, 'SELECT price, segments, status FROM messages WHERE id = ?').get(
    m.id,
  );
  if (!cur || (cur.status !== 'queued' && cur.status !== 'sending')) return { kind: 'settled' };
  const price = unitPrice(ctx, m.partner_id, m.channel_type as ChannelType, to.gateway_id) * cur.segments;
  const difference = price - cur.price;
  const moved = `${from.name} → ${to.gateway_name}`;
  if (difference > 0) {
    try {
      debit(ctx, m.partner_id, difference, m.id, 'system', differenceNote(moved, why));
    } catch (e) {
      if (!(e instanceof InsufficientBalanceError)) throw e;
      applyStatus(ctx, getMessageState(ctx, m.id)!, unaffordable(from, to, why, price, difference));
      return { kind: 'failed' };
    }
  } else if (difference < 0) {
    refund(ctx, m.partner_id, -difference, m.id, differenceNote(moved, why), 'system');
  }
  stmt(
    ctx.db.sqlite,
    `UPDATE messages SET gateway_id = ?, channel_id = ?, "from" = ?, price = ?, status = 'queued', dispatch_in_flight = 0,
       error_code = NULL, error_message = NULL, updated_at = ? WHERE id = ?`,
  ).run(to.gateway_id, to.id, to.sender, price, now, m.id);
  stmt(
    ctx.db.sqlite,
    `INSERT INTO message_status_history (message_id, status, provider_status, error_code, error_message, ignored, occurred_at, created_at)
     VALUES (?, 'rerouted', NULL, ?, ?, 0, ?, ?)`,
  ).run(m.id, why.code, `${moved}: ${why.message}`, now, now);
  emitEvent(ctx, m.partner_id, 'message.rerouted', reroutedEvent(m, to, why, price, difference, now));
  return { kind: 'rerouted', difference, price };
}

/** reroute, inside the caller's store transaction `q`, on either store. */
export async function rerouteIn(
  q: Queryable,
  ctx: CoreCtx,
  m: RouteTarget,
  from: { id: string; name: string },
  to: ChannelWithGateway,
  why: { code: string; message: string },
): Promise<RerouteOutcome> {
  const now = ctx.now();
  const cur = await q.get<Priced>(sql`SELECT price, segments, status FROM messages WHERE id = ${m.id}`);
  if (!cur || (cur.status !== 'queued' && cur.status !== 'sending')) return { kind: 'settled' };
  const candidates = await q.all<PriceCandidate>(
    sql`SELECT partner_id, gateway_id, amount FROM prices
         WHERE channel_type = ${m.channel_type} AND partner_id IN (${m.partner_id}, '') AND gateway_id IN (${to.gateway_id}, '')
           AND category = ''`,
  );
  const price = pickPrice(candidates, m.partner_id, to.gateway_id) * cur.segments;
  const difference = price - cur.price;
  const moved = `${from.name} → ${to.gateway_name}`;
  if (difference > 0) {
    try {
      await debitIn(q, ctx, m.partner_id, difference, m.id, 'system', differenceNote(moved, why));
    } catch (e) {
      if (!(e instanceof InsufficientBalanceError)) throw e;
      await applyStatusIn(q, ctx, (await getMessageStateIn(q, m.id))!, unaffordable(from, to, why, price, difference));
      return { kind: 'failed' };
    }
  } else if (difference < 0) {
    await refundIn(q, ctx, m.partner_id, -difference, m.id, differenceNote(moved, why), 'system');
  }
  await q.run(
    sql`UPDATE messages SET gateway_id = ${to.gateway_id}, channel_id = ${to.id}, "from" = ${to.sender}, price = ${price},
          status = 'queued', dispatch_in_flight = 0, error_code = NULL, error_message = NULL, updated_at = ${now}
        WHERE id = ${m.id}`,
  );
  await recordHistoryIn(q, ctx, m.id, 'rerouted', {
    errorCode: why.code,
    errorMessage: `${moved}: ${why.message}`,
    at: now,
  });
  await emitEventIn(q, ctx, m.partner_id, 'message.rerouted', reroutedEvent(m, to, why, price, difference, now));
  return { kind: 'rerouted', difference, price };
}

const differenceNote = (moved: string, why: { code: string }) => `rerouted ${moved} (${why.code}): price difference`;

/** The failure of a message whose fallback costs more than the partner's funds cover. */
function unaffordable(
  from: { name: string },
  to: ChannelWithGateway,
  why: { code: string; message: string },
  price: number,
  difference: number,
) {
  return {
    status: 'failed' as const,
    errorCode: 'insufficient_balance',
    errorMessage: `${from.name} did not take it (${why.code}: ${why.message}), and the fallback ${to.gateway_name} costs ${formatMoney(price)}, ${formatMoney(difference)} more than the funds cover (refunded)`,
    refundOnFailure: true,
  };
}

function reroutedEvent(
  m: RouteTarget,
  to: ChannelWithGateway,
  why: { code: string; message: string },
  price: number,
  difference: number,
  now: number,
) {
  return {
    message_id: m.id,
    channel: m.channel_type,
    from_channel_id: m.channel_id,
    channel_id: to.id,
    position: to.position,
    provider: to.gateway_kind,
    sender: to.sender,
    reason: why,
    price: moneyJson(price),
    price_difference: moneyJson(difference),
    occurred_at: iso(now),
  };
}

/**
 * Whether an earlier attempt of the message may have reached a provider: a timeout or reset after
 * sending (dispatch_uncertain), or a call in flight when msgd died (`inFlightLeft`). Such a message
 * never moves to another gateway: that could deliver it twice.
 */
export function mayHaveReachedProvider(ctx: CoreCtx, messageId: string, inFlightLeft: boolean): boolean {
  if (inFlightLeft) return true;
  const r = stmt<[string], Pick<Row<typeof messages>, 'dispatch_uncertain'>>(
    ctx.db.sqlite,
    'SELECT dispatch_uncertain FROM messages WHERE id = ?',
  ).get(messageId);
  return r?.dispatch_uncertain === 1;
}

/**
 * A message waiting for its gateway's circuit to let calls through again; it keeps its place. A
 * call in flight when msgd died may have reached the provider: that mark becomes
 * dispatch_uncertain, so the message never moves to another gateway and stays flagged.
 */
export function noteCircuitWait(ctx: CoreCtx, messageId: string, note: string): void {
  stmt(
    ctx.db.sqlite,
    `UPDATE messages SET status = 'queued', error_code = 'gateway_circuit_open', error_message = ?,
       dispatch_uncertain = MAX(dispatch_uncertain, dispatch_in_flight), dispatch_in_flight = 0, updated_at = ?
      WHERE id = ? AND status IN ('queued', 'sending')`,
  ).run(note, ctx.now(), messageId);
}

/** mayHaveReachedProvider, read through `q`. */
export async function mayHaveReachedProviderIn(
  q: Queryable,
  messageId: string,
  inFlightLeft: boolean,
): Promise<boolean> {
  if (inFlightLeft) return true;
  const r = await q.get<Pick<Row<typeof messages>, 'dispatch_uncertain'>>(
    sql`SELECT dispatch_uncertain FROM messages WHERE id = ${messageId}`,
  );
  return r?.dispatch_uncertain === 1;
}

/** noteCircuitWait, in `q`. */
export async function noteCircuitWaitIn(q: Queryable, ctx: CoreCtx, messageId: string, note: string): Promise<void> {
  await q.run(
    sql`UPDATE messages SET status = 'queued', error_code = 'gateway_circuit_open', error_message = ${note},
          dispatch_uncertain = CASE WHEN dispatch_in_flight = 1 THEN 1 ELSE dispatch_uncertain END, dispatch_in_flight = 0,
          updated_at = ${ctx.now()}
        WHERE id = ${messageId} AND status IN ('queued', 'sending')`,
  );
}
