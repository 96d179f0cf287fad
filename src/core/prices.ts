import type { Row } from '../db/rows.js';
import type { partners, prices } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
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

export type Price = Row<typeof prices>;

const FIND = 'SELECT * FROM prices WHERE channel_type = ? AND partner_id = ?';

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
      const existing = stmt<[string, string], Price>(ctx.db.sqlite, FIND).get(channel, partnerId);
      let row: Price;
      if (existing) {
        stmt(ctx.db.sqlite, 'UPDATE prices SET amount = ?, updated_at = ? WHERE id = ?').run(
          input.amount,
          now,
          existing.id,
        );
        row = { ...existing, amount: input.amount, updated_at: now };
      } else {
        row = {
          id: newId('prc'),
          channel_type: channel,
          partner_id: partnerId,
          amount: input.amount,
          created_at: now,
          updated_at: now,
        };
        stmt(
          ctx.db.sqlite,
          `INSERT INTO prices (id, channel_type, partner_id, amount, created_at, updated_at)
           VALUES (@id, @channel_type, @partner_id, @amount, @created_at, @updated_at)`,
        ).run(row);
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
      const existing = stmt<[string, string], Price>(ctx.db.sqlite, FIND).get(input.channel, partnerId);
      if (!existing) throw notFound('price', `${input.channel}${input.partner ? ` for ${input.partner}` : ''}`);
      stmt(ctx.db.sqlite, 'DELETE FROM prices WHERE id = ?').run(existing.id);
      audit(ctx, actor, 'price.unset', 'price', existing.id, {
        channel: input.channel,
        partner: input.partner ?? null,
      });
      return existing;
    })
    .immediate();
}

/** A price with the slug of the partner it overrides for (null for a default: partner_id ''). */
export type PriceListRow = Pick<Price, 'channel_type' | 'partner_id' | 'amount' | 'updated_at'> & {
  partner_slug: Row<typeof partners>['slug'] | null;
};

export function listPrices(ctx: CoreCtx, opts: { partner?: string } = {}): PriceListRow[] {
  const partnerId = opts.partner ? getPartner(ctx, opts.partner).id : undefined;
  const rows = stmt<[], PriceListRow>(
    ctx.db.sqlite,
    `SELECT p.channel_type, p.partner_id, p.amount, p.updated_at, pt.slug AS partner_slug
     FROM prices p LEFT JOIN partners pt ON pt.id = p.partner_id
     ORDER BY p.channel_type, p.partner_id`,
  ).all();
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
    scope: p.partner_id ? 'partner' : 'default',
    per: p.channel_type === 'sms' ? 'segment' : 'message',
    amount: moneyJson(p.amount, currency),
    updated_at: iso(p.updated_at),
  };
}
