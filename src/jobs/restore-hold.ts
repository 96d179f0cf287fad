import type { CoreCtx } from '../core/context.js';
import { sql } from '../db/sql.js';
import { HELD_AFTER_RESTORE, holdAfterRestoreIn, releaseAfterRestoreIn } from '../core/message-status.js';
import type { JobQueue } from '../queue/queue.js';
import { DISPATCH_JOB } from './dispatch.js';

// A database restored from a backup holds the messages that were waiting for their provider
// call when the backup was taken ('queued' or 'sending'). The server the backup came from may
// have sent any of them after that moment: a backup cannot tell which. Sent again by the
// restored msgd, each could reach its recipient twice, hours late. So a restore holds them: no
// claim takes them until the operator, having looked (the providers' logs, the partners),
// releases them, and then each goes out flagged possible_duplicate. The rule is written over
// the queue's hold and release, so it holds for any store msgd restores into.

/** Holds the dispatch of every message still waiting for it. Returns how many messages are held. */
export function holdRestoredDispatches(ctx: CoreCtx, queue: JobQueue): Promise<number> {
  return ctx.store.transaction(async (tx) => {
    const now = ctx.now();
    const payloads = (await queue.hold(DISPATCH_JOB, now, tx)) as { message_id?: unknown }[];
    let held = 0;
    for (const p of payloads) {
      if (typeof p?.message_id === 'string' && (await holdAfterRestoreIn(tx, p.message_id, now))) held++;
    }
    return held;
  });
}

/** The messages a restore holds, still held. */
export async function countHeldMessages(ctx: CoreCtx): Promise<number> {
  const r = await ctx.store.get<{ n: number }>(
    sql`SELECT CAST(count(*) AS BIGINT) AS n FROM messages WHERE status = 'queued' AND error_code = ${HELD_AFTER_RESTORE}`,
  );
  return r!.n;
}

/**
 * Sends the held messages: each is flagged possible_duplicate (it may have gone out from the
 * old server) and its dispatch runs now. Returns how many messages were released.
 */
export function releaseHeldDispatches(ctx: CoreCtx, queue: JobQueue): Promise<number> {
  return ctx.store.transaction(async (tx) => {
    const now = ctx.now();
    const payloads = (await queue.releaseHeld(DISPATCH_JOB, now, tx)) as { message_id?: unknown }[];
    let released = 0;
    for (const p of payloads) {
      if (typeof p?.message_id === 'string' && (await releaseAfterRestoreIn(tx, p.message_id, now))) released++;
    }
    return released;
  });
}
