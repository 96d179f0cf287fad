import type { CoreCtx } from '../../core/context.js';
import { listChannels, type ChannelWithGateway } from '../../core/channels.js';
import { listLedger, type LedgerEntry } from '../../core/ledger.js';
import { getPartner, listPartners, type Partner } from '../../core/partners.js';
import { listPrices, type PriceListRow } from '../../core/prices.js';
import { listTokens, tokenJson } from '../../core/tokens.js';
import { SpendToday } from '../../core/spend.js';

// Partners as the console lists them, with today's spend (src/core/spend.ts SpendToday).

export { SpendToday };

export interface PartnerRow extends Partner {
  spendToday: number;
}

export async function readPartners(ctx: CoreCtx, spend: SpendToday): Promise<PartnerRow[]> {
  const sums = await spend.refresh();
  return (await listPartners(ctx)).map((p) => ({ ...p, spendToday: sums.get(p.id) ?? 0 }));
}

export interface PartnerDetail {
  partner: Partner;
  channels: ChannelWithGateway[];
  tokens: ReturnType<typeof tokenJson>[];
  ledger: LedgerEntry[];
  /** The prices it pays: its own, else the default, per channel. */
  prices: PriceListRow[];
}

export async function readPartnerDetail(ctx: CoreCtx, ref: string): Promise<PartnerDetail> {
  const partner = (await getPartner(ctx, ref));
  const now = ctx.now();
  return {
    partner,
    channels: await listChannels(ctx, { partner: partner.id }),
    tokens: (await listTokens(ctx, partner.id)).map((t) => tokenJson(t, now)),
    ledger: (await listLedger(ctx, partner.id, { limit: 6 })).entries,
    prices: effectivePrices(await listPrices(ctx, { partner: partner.id })),
  };
}

/** Per channel, the partner's own price where it has one, else the default (a gateway's own price is listed by msgctl price list). */
function effectivePrices(rows: PriceListRow[]): PriceListRow[] {
  const by = new Map<string, PriceListRow>();
  for (const r of rows) if (!r.gateway_id && (r.partner_id || !by.has(r.channel_type))) by.set(r.channel_type, r);
  return [...by.values()];
}

export interface LedgerPage {
  partner: Partner;
  entries: LedgerEntry[];
  /** The id this page was read before (none: the newest page). */
  before: number | undefined;
  /** The id to read the next (older) page before, if there is one. */
  next: number | null;
}

/** One page of a partner's ledger, newest first, before the entry id `before` (the newest page without it). */
export async function readLedgerPage(ctx: CoreCtx, ref: string, before: number | undefined, size: number): Promise<LedgerPage> {
  const n = Math.max(1, size);
  const { partner, entries } = (await listLedger(ctx, ref, { limit: n + 1, before }));
  const page = entries.slice(0, n);
  return { partner, entries: page, before, next: entries.length > n ? page[page.length - 1].id : null };
}
