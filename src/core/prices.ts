import type { Row } from '../db/rows.js';
import type { gateways, partners, prices } from '../db/schema.js';
import type { Queryable, Tx } from '../db/query.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { invalid, notFound } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { formatMoney, MAX_MONEY, moneyJson } from '../lib/money.js';
import { smsSegments } from '../lib/segments.js';
import { iso } from '../lib/time.js';
import type { ChannelType, CoreCtx } from './context.js';
import { auditIn } from './audit.js';
import { isChannelType } from './channels.js';
import { readPartner } from './partners.js';
import { getGatewayRow } from './gateways.js';
import { TEMPLATE_CATEGORIES } from './whatsapp-templates.js';

// A price is micro-units per message (per segment for SMS). Which price applies to a message is
// decided in one place, pickPrice(): the most specific of partner+gateway, gateway, partner,
// channel default; a channel with no price at all is free (msgctl doctor warns about it).

export type Price = Row<typeof prices>;

const find = (q: Queryable, channel: string, partnerId: string, gatewayId: string, category: string) =>
  q.get<Price>(
    sql`SELECT * FROM prices
         WHERE channel_type = ${channel} AND partner_id = ${partnerId} AND gateway_id = ${gatewayId} AND category = ${category}`,
  );

// WhatsApp templates may also be priced per Meta category, on every gateway: the partner's
// price for the category, else the default for it, before the prices above
// (src/core/whatsapp-template-send.ts applies them).
function categoryOf(channel: string, category: string | undefined, gateway: string | undefined): string {
  if (category === undefined || category === '') return '';
  if (channel !== 'whatsapp')
    throw invalid('a price per category is for WhatsApp templates only', [
      { field: 'category', message: 'only with the whatsapp channel' },
    ]);
  if (!(TEMPLATE_CATEGORIES as readonly string[]).includes(category))
    throw invalid(`unknown template category "${category}"`, [
      { field: 'category', message: `one of ${TEMPLATE_CATEGORIES.join(', ')}` },
    ]);
  if (gateway)
    throw invalid('a price per template category applies on every gateway: give a category or a gateway', [
      { field: 'category', message: 'not with a gateway' },
    ]);
  return category;
}

/** A price row as precedence sees it: '' for "any partner" / "any gateway". */
export type PriceCandidate = Pick<Price, 'partner_id' | 'gateway_id' | 'amount'>;

/**
 * The unit price of a message from a partner sent through a gateway, from the prices of its
 * channel type: the partner's price for that gateway, else the gateway's price, else the
 * partner's price, else the channel's default, else 0. Every price lookup goes through here.
 */
export function pickPrice(candidates: readonly PriceCandidate[], partnerId: string, gatewayId: string): number {
  let best: PriceCandidate | undefined;
  let bestRank = -1;
  for (const c of candidates) {
    if (c.partner_id !== '' && c.partner_id !== partnerId) continue;
    if (c.gateway_id !== '' && c.gateway_id !== gatewayId) continue;
    // partner+gateway 3, gateway 2, partner 1, default 0.
    const rank = (c.gateway_id !== '' ? 2 : 0) + (c.partner_id !== '' ? 1 : 0);
    if (rank > bestRank) ((best = c), (bestRank = rank));
  }
  return best?.amount ?? 0;
}

/** The prices that can apply to a partner's messages of a type through a gateway, as pickPrice takes them. */
export const PRICE_CANDIDATES_SQL = `SELECT partner_id, gateway_id, amount FROM prices
  WHERE channel_type = ? AND partner_id IN (?, '') AND gateway_id IN (?, '') AND category = ''`;

/**
 * The unit price of a partner's message of a type through a gateway (see pickPrice).
 * Synchronous: dispatch's failover reroute reads it inside the batch's apply (src/core/routes.ts).
 */
export function unitPrice(ctx: CoreCtx, partnerId: string, type: ChannelType, gatewayId: string): number {
  const rows = stmt<[string, string, string], PriceCandidate>(ctx.db.sqlite, PRICE_CANDIDATES_SQL).all(
    type,
    partnerId,
    gatewayId,
  );
  return pickPrice(rows, partnerId, gatewayId);
}

export function setPrice(ctx: CoreCtx, input: Parameters<typeof setPriceIn>[2], actor: string): Promise<Price> {
  return ctx.store.transaction((tx) => setPriceIn(ctx, tx, input, actor));
}

/** setPrice, inside the caller's store transaction. */
export async function setPriceIn(
  ctx: CoreCtx,
  tx: Tx,
  input: { channel: string; amount: number; partner?: string; gateway?: string; category?: string },
  actor: string,
): Promise<Price> {
  if (!isChannelType(input.channel)) throw invalid(`unknown channel type "${input.channel}"`);
  const category = categoryOf(input.channel, input.category, input.gateway);
  if (!Number.isSafeInteger(input.amount) || input.amount < 0) throw invalid('a price must be zero or positive');
  if (input.amount > MAX_MONEY) throw invalid(`a price can be at most ${formatMoney(MAX_MONEY)}`);
  const channel = input.channel;
  const partnerId = input.partner ? (await readPartner(tx, input.partner)).id : '';
  const gateway = input.gateway ? await getGatewayRow(ctx, input.gateway, tx) : undefined;
  if (gateway && !ctx.gatewayKinds.get(gateway.kind).channels.includes(channel))
    throw invalid(`gateway ${gateway.name} (${gateway.kind}) does not send ${channel}`);
  const gatewayId = gateway?.id ?? '';
  const now = ctx.now();
  const existing = await find(tx, channel, partnerId, gatewayId, category);
  let row: Price;
  if (existing) {
    await tx.run(sql`UPDATE prices SET amount = ${input.amount}, updated_at = ${now} WHERE id = ${existing.id}`);
    row = { ...existing, amount: input.amount, updated_at: now };
  } else {
    row = {
      id: newId('prc'),
      channel_type: channel,
      partner_id: partnerId,
      gateway_id: gatewayId,
      category,
      amount: input.amount,
      created_at: now,
      updated_at: now,
    };
    await tx.run(
      sql`INSERT INTO prices (id, channel_type, partner_id, gateway_id, category, amount, created_at, updated_at)
          VALUES (${row.id}, ${row.channel_type}, ${row.partner_id}, ${row.gateway_id}, ${row.category}, ${row.amount},
            ${row.created_at}, ${row.updated_at})`,
    );
  }
  await auditIn(ctx, tx, actor, 'price.set', 'price', row.id, {
    channel,
    partner: input.partner ?? null,
    gateway: gateway?.name ?? null,
    ...(category ? { category } : {}),
    amount: input.amount,
    from: existing?.amount ?? null,
  });
  return row;
}

/** Remove a partner or gateway override (the next price in precedence applies again) or a default price. */
export async function unsetPrice(
  ctx: CoreCtx,
  input: { channel: string; partner?: string; gateway?: string; category?: string },
  actor: string,
): Promise<Price> {
  const category = categoryOf(input.channel, input.category, input.gateway);
  return ctx.store.transaction(async (tx) => {
    const partnerId = input.partner ? (await readPartner(tx, input.partner)).id : '';
    const gatewayId = input.gateway ? (await getGatewayRow(ctx, input.gateway, tx)).id : '';
    const existing = await find(tx, input.channel, partnerId, gatewayId, category);
    if (!existing)
      throw notFound(
        'price',
        `${input.channel}${category ? ` ${category}` : ''}${input.partner ? ` for ${input.partner}` : ''}${input.gateway ? ` through ${input.gateway}` : ''}`,
      );
    await tx.run(sql`DELETE FROM prices WHERE id = ${existing.id}`);
    await auditIn(ctx, tx, actor, 'price.unset', 'price', existing.id, {
      channel: input.channel,
      partner: input.partner ?? null,
      gateway: input.gateway ?? null,
      ...(category ? { category } : {}),
    });
    return existing;
  });
}

/** A price with the slug of the partner and the name of the gateway it is for (null: any, stored as ''). */
export type PriceListRow = Pick<
  Price,
  'channel_type' | 'partner_id' | 'gateway_id' | 'category' | 'amount' | 'updated_at'
> & {
  partner_slug: Row<typeof partners>['slug'] | null;
  gateway_name: Row<typeof gateways>['name'] | null;
};

export async function listPrices(ctx: CoreCtx, opts: { partner?: string } = {}): Promise<PriceListRow[]> {
  const partnerId = opts.partner ? (await readPartner(ctx.store, opts.partner)).id : undefined;
  const rows = await ctx.store.all<PriceListRow>(
    sql`SELECT p.channel_type, p.partner_id, p.gateway_id, p.category, p.amount, p.updated_at, pt.slug AS partner_slug, g.name AS gateway_name
          FROM prices p LEFT JOIN partners pt ON pt.id = p.partner_id LEFT JOIN gateways g ON g.id = p.gateway_id
         ORDER BY p.channel_type, p.partner_id, p.gateway_id, p.category`,
  );
  return rows.filter((r) => partnerId === undefined || r.partner_id === '' || r.partner_id === partnerId);
}

export interface Quote {
  unit: number;
  units: number;
  total: number;
  segments: number;
  encoding?: 'GSM-7' | 'UCS-2';
}

/**
 * Price one message at a unit price (the partner's own, else the default, else 0: read with
 * the send's preflight query): SMS per segment, every other channel per message.
 */
export function quote(unit: number, channel: ChannelType, text?: string): Quote {
  if (channel === 'sms') {
    const s = smsSegments(text ?? '');
    return { unit, units: s.segments, total: unit * s.segments, segments: s.segments, encoding: s.encoding };
  }
  return { unit, units: 1, total: unit, segments: 1 };
}

export function priceJson(p: PriceListRow, currency?: string) {
  return {
    channel: p.channel_type,
    partner_id: p.partner_id || null,
    partner: p.partner_slug,
    gateway_id: p.gateway_id || null,
    gateway: p.gateway_name,
    scope: p.partner_id ? (p.gateway_id ? 'partner_gateway' : 'partner') : p.gateway_id ? 'gateway' : 'default',
    category: p.category || null,
    per: p.channel_type === 'sms' ? 'segment' : 'message',
    amount: moneyJson(p.amount, currency),
    updated_at: iso(p.updated_at),
  };
}
