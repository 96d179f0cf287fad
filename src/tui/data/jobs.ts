import type { CoreCtx } from '../../core/context.js';
import { jobsInState } from '../../queue/job-views.js';
import type { Job } from '../../queue/queue.js';

// The Jobs screen's reads, each one state at a time in the order of the jobs_claim index
// (src/queue/job-views.ts): no sort of a backlog however long, so a million queued messages
// cost the console 200 rows a refresh.

export const JOBS_SHOWN = 200;

export function deadJobs(ctx: CoreCtx): Job[] {
  return jobsInState(ctx.db, 'dead', JOBS_SHOWN);
}

/** Running first, then the next to run of those waiting or waiting to retry. */
export function pendingJobs(ctx: CoreCtx): Job[] {
  const running = jobsInState(ctx.db, 'running', JOBS_SHOWN);
  const waiting = [...jobsInState(ctx.db, 'available', JOBS_SHOWN), ...jobsInState(ctx.db, 'retry', JOBS_SHOWN)].sort(
    (a, b) => a.runAt - b.runAt || a.id - b.id,
  );
  return [...running, ...waiting].slice(0, JOBS_SHOWN);
}
