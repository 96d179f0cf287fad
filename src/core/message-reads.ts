import { stmt } from '../db/stmt.js';
import type { CoreCtx } from './context.js';
import type { MessageRow } from './messages.js';
import { FAILURE_STATUSES, type MessageStatus } from './statuses.js';

// The operator's reads of messages across partners (msgctl messages list, the console's Find
// and webhook tail). The partner's own list, paged on indexes, is src/core/message-list.ts.

export interface OperatorMessageFilter {
  partnerId?: string;
  status?: MessageStatus;
  /** Only failed, undelivered, bounced or dropped messages. */
  failed?: boolean;
  /** Only messages that may have reached the provider twice. */
  uncertain?: boolean;
  /** At most 1000. */
  limit: number;
}

/** Messages, newest first (msgctl messages list). */
export function listOperatorMessages(ctx: CoreCtx, f: OperatorMessageFilter): MessageRow[] {
  const where: string[] = [];
  const args: unknown[] = [];
  if (f.partnerId) {
    where.push('partner_id = ?');
    args.push(f.partnerId);
  }
  if (f.status) {
    where.push('status = ?');
    args.push(f.status);
  }
  if (f.failed) {
    where.push(`status IN (${FAILURE_STATUSES.map(() => '?').join(', ')})`);
    args.push(...FAILURE_STATUSES);
  }
  if (f.uncertain) where.push('dispatch_uncertain = 1');
  return stmt<unknown[], MessageRow>(
    ctx.db.sqlite,
    `SELECT * FROM messages ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`,
  ).all(...args, Math.min(f.limit, 1000));
}
