import type { CoreCtx } from '../core/context.js';
import type { Queryable } from '../db/query.js';
import { getMessageRowIn } from '../core/messages.js';
import { AppError, notFound } from '../lib/errors.js';
import type { DeadTarget, Job } from '../queue/queue.js';
import { queueOf } from '../queue/of-ctx.js';
import { DISPATCH_JOB, awaitsDispatch } from './dispatch.js';

// The operator's retry of dead jobs (msgctl jobs retry, the console's jobs screen): the queue
// takes any dead job back, but a dispatch job's message decides whether running it again
// would do anything.

export interface RetryOutcome {
  retried: number;
  skipped: { id: number; reason: string }[];
}

/** The message a dispatch job sends. */
export function dispatchMessageOf(ctx: CoreCtx, job: Job, q: Queryable = ctx.store) {
  return getMessageRowIn(q, String((job.payload as { message_id?: unknown }).message_id ?? ''));
}

/**
 * Why a dead job cannot usefully run again, or null. A dispatch job dies in the transaction
 * that fails and refunds its message: run again, it would find the message settled and send
 * nothing.
 */
export async function whyUnretryable(ctx: CoreCtx, job: Job, q: Queryable = ctx.store): Promise<string | null> {
  if (job.kind !== DISPATCH_JOB) return null;
  const m = await dispatchMessageOf(ctx, job, q);
  if (!m) return 'its message no longer exists';
  if (awaitsDispatch(m)) return null;
  const money = m.refunded ? 'refunded' : m.price > 0 ? 'charged' : 'no charge';
  return `message ${m.id} is already ${m.status}${m.error_code ? ` (${m.error_code})` : ''}, ${money}: the partner sends it again as a new message`;
}

/**
 * Queues dead jobs again with fresh attempts, in one transaction, skipping those that cannot
 * usefully run again. One job asked for by id that is missing is not_found; one that is
 * skipped is a conflict naming why.
 */
export async function retryDeadJobs(ctx: CoreCtx, target: DeadTarget): Promise<RetryOutcome> {
  const queue = queueOf(ctx);
  const jobs = await queue.deadJobs(target);
  if (typeof target === 'number' && jobs.length === 0) throw notFound('dead job', String(target));
  const out = await ctx.store.transaction(async (tx) => {
    const o: RetryOutcome = { retried: 0, skipped: [] };
    for (const j of jobs) {
      const reason = await whyUnretryable(ctx, j, tx);
      if (reason) o.skipped.push({ id: j.id, reason });
      else o.retried += await queue.retryDead(j.id, ctx.now(), tx);
    }
    return o;
  });
  if (typeof target === 'number' && out.retried === 0)
    throw new AppError('conflict', `dead job ${target} not retried: ${out.skipped[0].reason}`);
  return out;
}
