import type { CoreCtx } from '../../core/context.js';
import { stmt } from '../../db/stmt.js';
import { toJob } from '../../queue/queue-sql.js';
import type { Job } from '../../queue/queue.js';

// The Jobs screen's reads, each one state at a time in the order of the jobs_claim index
// (state, priority, run_at): no sort of a backlog however long, so a million queued messages
// cost the console 200 rows a refresh.

export const JOBS_SHOWN = 200;

const byState = (ctx: CoreCtx) =>
  stmt<[string, number], Record<string, unknown>>(
    ctx.db.sqlite,
    'SELECT * FROM jobs INDEXED BY jobs_claim WHERE state = ? ORDER BY priority, run_at LIMIT ?',
  );

export function deadJobs(ctx: CoreCtx): Job[] {
  return byState(ctx).all('dead', JOBS_SHOWN).map(toJob);
}

/** Running first, then the next to run of those waiting or waiting to retry. */
export function pendingJobs(ctx: CoreCtx): Job[] {
  const s = byState(ctx);
  const running = s.all('running', JOBS_SHOWN).map(toJob);
  const waiting = [...s.all('available', JOBS_SHOWN), ...s.all('retry', JOBS_SHOWN)]
    .map(toJob)
    .sort((a, b) => a.runAt - b.runAt || a.id - b.id);
  return [...running, ...waiting].slice(0, JOBS_SHOWN);
}
