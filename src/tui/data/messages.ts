import type { CoreCtx } from '../../core/context.js';
import { getMessageRowIn, messageHistoryIn, type HistoryRow, type MessageRow } from '../../core/messages.js';

// The Messages screen's reads: the search (by id, partner, recipient, status) is core's, each
// way through an index (src/core/message-reads.ts).

export {
  FIND_LIMIT,
  STATUS_SCAN,
  findOperatorMessages as findMessages,
  type MessageQuery,
} from '../../core/message-reads.js';

export async function messageWithHistory(
  ctx: CoreCtx,
  id: string,
): Promise<{ m: MessageRow; history: HistoryRow[] } | null> {
  const m = await getMessageRowIn(ctx.store, id);
  return m ? { m, history: await messageHistoryIn(ctx.store, id, m) } : null;
}
