import { and, asc, eq } from 'drizzle-orm';
import { partners, prices } from '../db/schema.js';
import { invalid, notFound } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { formatMoney, MAX_MONEY, moneyJson } from '../lib/money.js';
import { smsSegments } from '../lib/segments.js';
import { iso } from '../lib/time.js';
import type { ChannelType, CoreCtx } from './context.js';
import { audit } from './audit.js';
import { isChannelType } from './channels.js';
import { getPartner } from './partners.js';

// A price is micro-units per message (per segment for SMS). A partner override beats the
// default; a channel with no price at all is free (msgctl doctor warns about it).

export type Price = typeof prices.$inferSelect;

export function setPrice(
  ctx: CoreCtx,
  input: { channel: string; amount: number; partner?: string },
  actor: string,
): Price {
  if (!isChannelType(input.channel)) throw invalid(`unknown channel type "${input.channel}"`);
  if (!Number.isSafeInteger(input.amount) || input.amount < 0) throw invalid('a price must be zero or positive');
  if (input.amount > MAX_MONEY) throw invalid(`a price can be at most ${formatMoney(MAX_MONEY)}`);
  const channel = input.channel;
  return ctx.db.sqlite
    .transaction(() => {
      const partnerId = input.partner ? getPartner(ctx, input.partner).id : '';
      const now = ctx.now();
      const existing = ctx.db.orm
        .select()
        .from(prices)
        .where(and(eq(prices.channelType, channel), eq(prices.partnerId, partnerId)))
        .get();
      let row: Price;
      if (existing) {
        ctx.db.orm.update(prices).set({ amount: input.amount, updatedAt: now }).where(eq(prices.id, existing.id)).run();
        row = { ...existing, amount: input.amount, updatedAt: now };
      } else {
        row = {
          id: newId('prc'),
          channelType: channel,
          partnerId,
          amount: input.amount,
          createdAt: now,
          updatedAt: now,
        };
        ctx.db.orm.insert(prices).values(row).run();
      }
      audit(ctx, actor, 'price.set', 'price', row.id, {
        channel,
        partner: input.partner ?? null,
        amount: input.amount,
        from: existing?.amount ?? null,
      });
      return row;
    })
    .immediate();
}

/** Remove a partner override (the default applies again) or a default price. */
export function unsetPrice(ctx: CoreCtx, input: { channel: string; partner?: string }, actor: string): Price {
  return ctx.db.sqlite
    .transaction(() => {
      const partnerId = input.partner ? getPartner(ctx, input.partner).id : '';
      const existing = ctx.db.orm
        .select()
        .from(prices)
        .where(and(eq(prices.channelType, input.channel as ChannelType), eq(prices.partnerId, partnerId)))
        .get();
      if (!existing) throw notFound('price', `${input.channel}${input.partner ? ` for ${input.partner}` : ''}`);
      ctx.db.orm.delete(prices).where(eq(prices.id, existing.id)).run();
      audit(ctx, actor, 'price.unset', 'price', existing.id, {
        channel: input.channel,
        partner: input.partner ?? null,
      });
      return existing;
    })
    .immediate();
}

export interface PriceListRow {
  channel: ChannelType;
  partnerId: string | null;
  partnerSlug: string | null;
  amount: number;
  updatedAt: number;
}

export function listPrices(ctx: CoreCtx, opts: { partner?: string } = {}): PriceListRow[] {
  const partnerId = opts.partner ? getPartner(ctx, opts.partner).id : undefined;
  const rows = ctx.db.orm
    .select({ p: prices, slug: partners.slug })
    .from(prices)
    .leftJoin(partners, eq(partners.id, prices.partnerId))
    .orderBy(asc(prices.channelType), asc(prices.partnerId))
    .all();
  return rows
    .filter((r) => partnerId === undefined || r.p.partnerId === '' || r.p.partnerId === partnerId)
    .map((r) => ({
      channel: r.p.channelType,
      partnerId: r.p.partnerId || null,
      partnerSlug: r.slug ?? null,
      amount: r.p.amount,
      updatedAt: r.p.updatedAt,
    }));
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
    channel: p.channel,
    partner_id: p.partnerId,
    partner: p.partnerSlug,
    scope: p.partnerId ? 'partner' : 'default',
    per: p.channel === 'sms' ? 'segment' : 'message',
    amount: moneyJson(p.amount, currency),
    updated_at: iso(p.updatedAt),
  };
}
