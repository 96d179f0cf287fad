import type { CoreCtx } from '../../core/context.js';
import { jobsInState } from '../../queue/job-views.js';
import type { Job } from '../../queue/queue.js';

// The Jobs screen's reads, each one state at a time in the order of the jobs_claim index
// (src/queue/job-views.ts): no sort of a backlog however long, so a million queued messages
// cost the console 200 rows a refresh.

export const JOBS_SHOWN = 200;

export function deadJobs(ctx: CoreCtx): Promise<Job[]> {
  return jobsInState(ctx.store, 'dead', JOBS_SHOWN);
}

/** Running first, then the next to run of those waiting or waiting to retry. */
export async function pendingJobs(ctx: CoreCtx): Promise<Job[]> {
  const running = await jobsInState(ctx.store, 'running', JOBS_SHOWN);
  const available = await jobsInState(ctx.store, 'available', JOBS_SHOWN);
  const retry = await jobsInState(ctx.store, 'retry', JOBS_SHOWN);
  const waiting = [...available, ...retry].sort(
    (a, b) => a.runAt - b.runAt || a.id - b.id,
  );
  return [...running, ...waiting].slice(0, JOBS_SHOWN);
}
