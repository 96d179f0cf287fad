import type { Db } from '../db/open.js';
import type { Store } from '../db/query.js';
import { JobQueue, type JobQueueOptions } from './queue.js';

/**
 * The job queue over a context's store: SQLite's database (so its synchronous forms work inside
 * SQLite transactions too), or PostgreSQL's store. For msgctl and the operator's actions, which
 * reach the queue without a runtime. Takes the context's two connections (a CoreCtx fits), not
 * core's context itself: the queue sits below core.
 */
export function queueOf(ctx: { db: Db; store: Store }, opts?: JobQueueOptions): JobQueue {
  return new JobQueue(ctx.store.dialect === 'sqlite' ? ctx.db : ctx.store, opts);
}
