import type { CoreCtx } from '../../core/context.js';
import { listChannels, type ChannelWithGateway } from '../../core/channels.js';
import { listLedger, type LedgerEntry } from '../../core/ledger.js';
import { getPartner, listPartners, type Partner } from '../../core/partners.js';
import { listPrices, type PriceListRow } from '../../core/prices.js';
import { listTokens, tokenJson } from '../../core/tokens.js';
import { stmt } from '../../db/stmt.js';

// Partners as the console lists them. Today's spend (debits less refunds since 00:00 UTC) is
// summed incrementally by ledger id: each refresh reads only the entries written since the
// last one, so a partner with a million sends today costs one pass, once.

export interface PartnerRow extends Partner {
  spendToday: number;
}

const DAY_MS = 86_400_000;

export class SpendToday {
  private day = -1;
  private lastId = 0;
  private sums = new Map<string, number>();

  constructor(private readonly ctx: CoreCtx) {}

  /** The first ledger id written at or after `since`: ids grow with time, so a binary search. */
  private firstIdSince(since: number): number {
    const db = this.ctx.db.sqlite;
    const range = stmt<[], { lo: number | null; hi: number | null }>(
      db,
      'SELECT MIN(id) AS lo, MAX(id) AS hi FROM ledger_entries',
    ).get()!;
    if (range.lo === null || range.hi === null) return 1;
    const at = stmt<[number], { id: number; created_at: number }>(
      db,
      'SELECT id, created_at FROM ledger_entries WHERE id >= ? ORDER BY id LIMIT 1',
    );
    let lo = range.lo;
    let hi = range.hi + 1;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const row = at.get(mid);
      if (!row || row.created_at >= since) hi = mid;
      else lo = row.id + 1;
    }
    return lo;
  }

  refresh(now = this.ctx.now()): Map<string, number> {
    const day = Math.floor(now / DAY_MS);
    if (day !== this.day) {
      this.day = day;
      this.sums = new Map();
      this.lastId = this.firstIdSince(day * DAY_MS) - 1;
    }
    const rows = stmt<[number], { partner_id: string; spend: number; last: number }>(
      this.ctx.db.sqlite,
      `SELECT partner_id, -SUM(CASE WHEN kind IN ('debit', 'refund') THEN amount ELSE 0 END) AS spend, MAX(id) AS last
         FROM ledger_entries WHERE id > ? GROUP BY partner_id`,
    ).all(this.lastId);
    for (const r of rows) {
      this.sums.set(r.partner_id, (this.sums.get(r.partner_id) ?? 0) + r.spend);
      if (r.last > this.lastId) this.lastId = r.last;
    }
    return this.sums;
  }
}

export function readPartners(ctx: CoreCtx, spend: SpendToday): PartnerRow[] {
  const sums = spend.refresh();
  return listPartners(ctx).map((p) => ({ ...p, spendToday: sums.get(p.id) ?? 0 }));
}

export interface PartnerDetail {
  partner: Partner;
  channels: ChannelWithGateway[];
  tokens: ReturnType<typeof tokenJson>[];
  ledger: LedgerEntry[];
  /** The prices it pays: its own, else the default, per channel. */
  prices: PriceListRow[];
}

export function readPartnerDetail(ctx: CoreCtx, ref: string): PartnerDetail {
  const partner = getPartner(ctx, ref);
  const now = ctx.now();
  return {
    partner,
    channels: listChannels(ctx, { partner: partner.id }),
    tokens: listTokens(ctx, partner.id).map((t) => tokenJson(t, now)),
    ledger: listLedger(ctx, partner.id, { limit: 6 }).entries,
    prices: effectivePrices(listPrices(ctx, { partner: partner.id })),
  };
}

/** Per channel, the partner's own price where it has one, else the default. */
function effectivePrices(rows: PriceListRow[]): PriceListRow[] {
  const by = new Map<string, PriceListRow>();
  for (const r of rows) if (r.partner_id || !by.has(r.channel_type)) by.set(r.channel_type, r);
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
export function readLedgerPage(ctx: CoreCtx, ref: string, before: number | undefined, size: number): LedgerPage {
  const n = Math.max(1, size);
  const { partner, entries } = listLedger(ctx, ref, { limit: n + 1, before });
  const page = entries.slice(0, n);
  return { partner, entries: page, before, next: entries.length > n ? page[page.length - 1].id : null };
}
