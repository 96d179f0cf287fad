import { stmt } from '../db/stmt.js';
import { idFloor } from '../lib/id-time.js';
import type { CoreCtx } from './context.js';

/** Outbound messages by status over the last `hours`, for the console's Overview. */
export function statusCounts(ctx: CoreCtx, partnerId: string, hours = 24): { status: string; n: number }[] {
  // Ids begin with their creation time, so "the last day" is an id range on messages_partner.
  const since = ctx.now() - hours * 3_600_000;
  return stmt(
    ctx.db.sqlite,
    `SELECT status, COUNT(*) AS n FROM messages INDEXED BY messages_partner
      WHERE partner_id = ? AND id >= ? AND direction = 'outbound' GROUP BY status ORDER BY n DESC`,
  ).all(partnerId, idFloor('msg', since)) as { status: string; n: number }[];
}
