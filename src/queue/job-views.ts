import type { Store } from '../db/query.js';
import { indexedBy } from '../db/queue-statements.js';
import { sql } from '../db/sql.js';
import type { Job, JobState } from './job.js';
import { type JobRow, toJob } from './queue-sql.js';

// Operator views of the queue that poll (msgctl's console): each reads one state in the order
// of the claim index, so a backlog however long is never sorted. On SQLite jobs_claim is
// (state, priority, run_at), named with INDEXED BY; on PostgreSQL the runnable states are read
// off the partial jobs_claim (priority, run_at, id), and running, dead and held ones (few, by
// the nature of a queue) are sorted.

/** Up to `limit` jobs in this state, the next to be claimed first. */
export async function jobsInState(store: Store, state: JobState, limit: number): Promise<Job[]> {
  const rows = await store.all<JobRow>(
    sql`SELECT * FROM jobs ${indexedBy(store.dialect, 'jobs_claim')} WHERE state = ${state} ORDER BY priority, run_at, id LIMIT ${limit}`,
  );
  return rows.map(toJob);
}
