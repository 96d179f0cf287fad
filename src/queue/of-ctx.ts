import type { CoreCtx } from '../core/context.js';
import { JobQueue, type JobQueueOptions } from './queue.js';

/**
 * The job queue over a context's store: SQLite's database (so its synchronous forms work inside
 * SQLite transactions too), or PostgreSQL's store. For msgctl and the operator's actions, which
 * reach the queue without a runtime.
 */
export function queueOf(ctx: CoreCtx, opts?: JobQueueOptions): JobQueue {
  return new JobQueue(ctx.store.dialect === 'sqlite' ? ctx.db : ctx.store, opts);
}
