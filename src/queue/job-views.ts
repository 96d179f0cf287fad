import type { Db } from '../db/open.js';
import { stmt } from '../db/stmt.js';
import type { Job, JobState } from './job.js';
import { type JobRow, toJob } from './queue-sql.js';

// Operator views of the queue that poll (msgctl's console): each reads one state in the order
// of the jobs_claim index (state, priority, run_at), so a backlog however long is never sorted.

/** Up to `limit` jobs in this state, the next to be claimed first. */
export function jobsInState(db: Db, state: JobState, limit: number): Job[] {
  return stmt<[string, number], JobRow>(
    db.sqlite,
    'SELECT * FROM jobs INDEXED BY jobs_claim WHERE state = ? ORDER BY priority, run_at LIMIT ?',
  )
    .all(state, limit)
    .map(toJob);
}
