import type { CoreCtx } from '../core/context.js';
import { stmt } from '../db/stmt.js';
import type { JobQueue } from '../queue/queue.js';
import { DISPATCH_JOB } from './dispatch.js';

// A database restored from a backup holds the messages that were waiting for their provider
// call when the backup was taken ('queued' or 'sending'). The server the backup came from may
// have sent any of them after that moment: a backup cannot tell which. Sent again by the
// restored msgd, each could reach its recipient twice, hours late. So a restore holds them: no
// claim takes them until the operator, having looked (the providers' logs, the partners),
// releases them, and then each goes out flagged possible_duplicate. The rule is written over
// the queue's hold and release, so it holds for any store msgd restores into.

export const HELD_AFTER_RESTORE = 'held_after_restore';

const HELD_NOTE =
  'held after a restore: the server the backup was taken from may have sent it already; the operator releases it (msgctl messages release-held)';

/** Holds the dispatch of every message still waiting for it. Returns how many messages are held. */
export function holdRestoredDispatches(ctx: CoreCtx, queue: JobQueue): number {
  return ctx.db.sqlite
    .transaction(() => {
      const now = ctx.now();
      const payloads = queue.hold(DISPATCH_JOB, now) as { message_id?: unknown }[];
      // 'sending' was the old server's claim: nothing of it is in flight here.
      const hold = stmt<[string, string, number, string]>(
        ctx.db.sqlite,
        `UPDATE messages SET status = 'queued', error_code = ?, error_message = ?, updated_at = ?
         WHERE id = ? AND status IN ('queued', 'sending')`,
      );
      let held = 0;
      for (const p of payloads) {
        if (typeof p?.message_id === 'string')
          held += hold.run(HELD_AFTER_RESTORE, HELD_NOTE, now, p.message_id).changes;
      }
      return held;
    })
    .immediate();
}

/** The messages a restore holds, still held. */
export function countHeldMessages(ctx: CoreCtx): number {
  return stmt<[string], { n: number }>(
    ctx.db.sqlite,
    `SELECT COUNT(*) AS n FROM messages WHERE status = 'queued' AND error_code = ?`,
  ).get(HELD_AFTER_RESTORE)!.n;
}

/**
 * Sends the held messages: each is flagged possible_duplicate (it may have gone out from the
 * old server) and its dispatch runs now. Returns how many messages were released.
 */
export function releaseHeldDispatches(ctx: CoreCtx, queue: JobQueue): number {
  return ctx.db.sqlite
    .transaction(() => {
      const now = ctx.now();
      const payloads = queue.releaseHeld(DISPATCH_JOB, now) as { message_id?: unknown }[];
      const release = stmt<[number, string, string]>(
        ctx.db.sqlite,
        `UPDATE messages SET dispatch_uncertain = 1, error_code = NULL, error_message = NULL, updated_at = ?
         WHERE id = ? AND status = 'queued' AND error_code = ?`,
      );
      let released = 0;
      for (const p of payloads) {
        if (typeof p?.message_id === 'string') released += release.run(now, p.message_id, HELD_AFTER_RESTORE).changes;
      }
      return released;
    })
    .immediate();
}
