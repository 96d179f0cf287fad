import { indexedBy } from '../db/dialect.js';
import { sql } from '../db/sql.js';
import { idFloor } from '../lib/id-time.js';
import type { CoreCtx } from './context.js';

export type StatusCount = { status: string; n: number };

/** How long a partner's counts are reused: a page drawn again and again must not recount a day. */
export const STATUS_COUNTS_TTL_MS = 15_000;

const cache = new WeakMap<CoreCtx, Map<string, { at: number; hours: number; counts: StatusCount[] }>>();

/**
 * Outbound messages by status over the last `hours`, for the console's Overview. Counting reads
 * every message of the window, so a partner's counts are kept for STATUS_COUNTS_TTL_MS.
 */
export async function statusCounts(ctx: CoreCtx, partnerId: string, hours = 24): Promise<StatusCount[]> {
  const now = ctx.now();
  let byPartner = cache.get(ctx);
  if (!byPartner) cache.set(ctx, (byPartner = new Map()));
  const hit = byPartner.get(partnerId);
  if (hit && hit.hours === hours && now - hit.at < STATUS_COUNTS_TTL_MS && now >= hit.at) return hit.counts;
  // Ids begin with their creation time, so "the last day" is an id range on messages_partner.
  // COUNT(*) is a bigint on PostgreSQL: cast to a 4-byte integer, a number on both stores.
  const counts = await ctx.store.all<StatusCount>(
    sql`SELECT status, CAST(COUNT(*) AS INTEGER) AS n FROM messages ${indexedBy(ctx.store.dialect, 'messages_partner')}
      WHERE partner_id = ${partnerId} AND id >= ${idFloor('msg', now - hours * 3_600_000)} AND direction = 'outbound'
      GROUP BY status ORDER BY n DESC, status`,
  );
  if (byPartner.size > 10_000) byPartner.clear();
  byPartner.set(partnerId, { at: now, hours, counts });
  return counts;
}
