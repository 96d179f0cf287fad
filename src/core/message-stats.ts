import { stmt } from '../db/stmt.js';
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
export function statusCounts(ctx: CoreCtx, partnerId: string, hours = 24): StatusCount[] {
  const now = ctx.now();
  let byPartner = cache.get(ctx);
  if (!byPartner) cache.set(ctx, (byPartner = new Map()));
  const hit = byPartner.get(partnerId);
  if (hit && hit.hours === hours && now - hit.at < STATUS_COUNTS_TTL_MS && now >= hit.at) return hit.counts;
  // Ids begin with their creation time, so "the last day" is an id range on messages_partner.
  const counts = stmt(
    ctx.db.sqlite,
    `SELECT status, COUNT(*) AS n FROM messages INDEXED BY messages_partner
      WHERE partner_id = ? AND id >= ? AND direction = 'outbound' GROUP BY status ORDER BY n DESC`,
  ).all(partnerId, idFloor('msg', now - hours * 3_600_000)) as StatusCount[];
  if (byPartner.size > 10_000) byPartner.clear();
  byPartner.set(partnerId, { at: now, hours, counts });
  return counts;
}
