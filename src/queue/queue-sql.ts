import type Database from 'better-sqlite3';
import type { Row } from '../db/rows.js';
import type { jobs } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
import type { DeadTarget, Job, Lease } from './job.js';

// The queue's SQL and row mapping, kept apart from the JobQueue class. Every statement is
// stmt()'s (src/db/stmt.ts), prepared once per connection and SQL text; the hot-path ones are
// looked up once per queue by statements() and kept, the rest looked up per call.

/** A job as `SELECT *` or `RETURNING *` returns it. */
export type JobRow = Row<typeof jobs>;
/** What a claim's seek reads of a job: enough to order the jobs it found. */
export type SeekRow = Pick<JobRow, 'id' | 'priority' | 'run_at'>;
type Named = [Record<string, unknown>];
const MAX_ERROR_CHARS = 2000;

export function deadWhere(target: DeadTarget): [string, unknown[]] {
  if (target === 'all') return ['', []];
  if (typeof target === 'number') return [' AND id = ?', [target]];
  return [' AND kind = ?', [target.kind]];
}

// A completion with a lease must find the job still running under that same claim: after a
// lifeline reclaim, the stale holder's result is dropped, exactly as if it had crashed.
const OWNED = `(@by IS NULL OR (state = 'running' AND locked_by = @by AND attempts = @attempts))`;

export function owner(lease?: Lease) {
  return lease ? { by: lease.workerId, attempts: lease.attempts } : { by: null, attempts: null };
}

/**
 * A claim over every kind (a worker names its kinds: see claimKinds in queue.ts). INDEXED BY,
 * since with no ANALYZE statistics the planner may pick another index and scan the table.
 */
export const CLAIM_ANY_SQL = `UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_until = @lockedUntil, locked_by = @by,
      updated_at = @now
    WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_claim WHERE state IN ('available','retry') AND run_at <= @now
        ORDER BY priority, run_at, id LIMIT @limit)
    RETURNING *`;

// MIN(run_at) over state IN (...) walks every waiting row; this skip-scan seeks the index once
// per distinct priority instead. With kinds, per kind on jobs_kind_claim.
export function nextRunAtSql(kindCount: number): string {
  if (kindCount === 0) {
    return `WITH RECURSIVE p(s, v) AS (
      SELECT 'available', (SELECT MIN(priority) FROM jobs WHERE state = 'available')
      UNION ALL SELECT 'retry', (SELECT MIN(priority) FROM jobs WHERE state = 'retry')
      UNION ALL SELECT s, (SELECT MIN(priority) FROM jobs WHERE state = p.s AND priority > p.v) FROM p WHERE v IS NOT NULL)
    SELECT MIN((SELECT run_at FROM jobs INDEXED BY jobs_claim WHERE state = p.s AND priority = p.v
      ORDER BY run_at LIMIT 1)) AS m FROM p WHERE v IS NOT NULL`;
  }
  const kinds = Array(kindCount).fill('(?)').join(', ');
  return `WITH RECURSIVE k(kind) AS (VALUES ${kinds}),
    p(kind, s, v) AS (
      SELECT k.kind, st.s, (SELECT MIN(priority) FROM jobs INDEXED BY jobs_kind_claim WHERE kind = k.kind AND state = st.s)
        FROM k, (SELECT 'available' AS s UNION ALL SELECT 'retry') st
      UNION ALL SELECT kind, s, (SELECT MIN(priority) FROM jobs INDEXED BY jobs_kind_claim
        WHERE kind = p.kind AND state = p.s AND priority > p.v) FROM p WHERE v IS NOT NULL)
    SELECT MIN((SELECT run_at FROM jobs INDEXED BY jobs_kind_claim WHERE kind = p.kind AND state = p.s AND priority = p.v
      ORDER BY run_at LIMIT 1)) AS m FROM p WHERE v IS NOT NULL`;
}

export function statements(sqlite: Database.Database) {
  return {
    insert: stmt<unknown[], Pick<JobRow, 'id'>>(
      sqlite,
      `INSERT INTO jobs (kind, payload, state, priority, run_at, attempts, max_attempts, reclaims, unique_key, created_at, updated_at)
       VALUES (?, ?, 'available', ?, ?, 0, ?, 0, ?, ?, ?)
       ON CONFLICT(unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id`,
    ),
    byUniqueKey: stmt<[string | undefined], Pick<JobRow, 'id'>>(sqlite, `SELECT id FROM jobs WHERE unique_key = ?`),
    get: stmt<[number], JobRow>(sqlite, `SELECT * FROM jobs WHERE id = ?`),
    complete: stmt<Named>(sqlite, `DELETE FROM jobs WHERE id = @id AND ${OWNED}`),
    retry: stmt<Named, { state: 'retry' | 'dead' }>(
      sqlite,
      `UPDATE jobs SET
         state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'retry' END,
         run_at = CASE WHEN attempts >= max_attempts THEN run_at ELSE @runAt END,
         last_error = @error, locked_until = NULL, locked_by = NULL, updated_at = @now
       WHERE id = @id AND ${OWNED} RETURNING state`,
    ),
    snooze: stmt<Named>(
      sqlite,
      `UPDATE jobs SET state = 'available', attempts = MAX(attempts - 1, 0), run_at = @runAt,
         locked_until = NULL, locked_by = NULL, updated_at = @now
       WHERE id = @id AND ${OWNED}`,
    ),
    fail: stmt<Named>(
      sqlite,
      `UPDATE jobs SET state = 'dead', last_error = @error, locked_until = NULL, locked_by = NULL, updated_at = @now
       WHERE id = @id AND ${OWNED}`,
    ),
    release: stmt<Named>(
      sqlite,
      `UPDATE jobs SET state = 'available', attempts = MAX(attempts - 1, 0), reclaims = reclaims + 1,
         locked_until = NULL, locked_by = NULL, updated_at = @now
       WHERE id = @id AND state = 'running' AND ${OWNED}`,
    ),
    extend: stmt<Named>(sqlite, `UPDATE jobs SET locked_until = @lockedUntil WHERE id = @id AND ${OWNED}`),
    // A claim with kinds: each (kind, runnable state)'s first jobs, read in index order (no sort,
    // no temporary table, which one UPDATE … WHERE id IN (a merged, sorted subquery) needs),
    // then each chosen job taken by its id.
    claimAny: stmt<Named, JobRow>(sqlite, CLAIM_ANY_SQL),
    seekAvailable: stmt<[string, number, number], SeekRow>(
      sqlite,
      `SELECT id, priority, run_at FROM jobs INDEXED BY jobs_kind_claim
        WHERE kind = ? AND state = 'available' AND run_at <= ? ORDER BY priority, run_at, id LIMIT ?`,
    ),
    seekRetry: stmt<[string, number, number], SeekRow>(
      sqlite,
      `SELECT id, priority, run_at FROM jobs INDEXED BY jobs_kind_claim
        WHERE kind = ? AND state = 'retry' AND run_at <= ? ORDER BY priority, run_at, id LIMIT ?`,
    ),
    take: stmt<[number, string, number, number], JobRow>(
      sqlite,
      `UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_until = ?, locked_by = ?, updated_at = ?
       WHERE id = ? AND state IN ('available', 'retry') RETURNING *`,
    ),
    // Running jobs whose lease ends before @before go back to the queue, counted as reclaims.
    reclaim: stmt<Named>(
      sqlite,
      `UPDATE jobs SET state = 'retry', run_at = @now, reclaims = reclaims + 1, last_error = @error,
         locked_until = NULL, locked_by = NULL, updated_at = @now
       WHERE state = 'running' AND locked_until < @before`,
    ),
  };
}

export function clip(s: string): string {
  const str = String(s ?? '');
  return str.length > MAX_ERROR_CHARS ? `${str.slice(0, MAX_ERROR_CHARS - 1)}…` : str;
}

/** Set on a job whose stored payload is not JSON (written by hand): the worker dead-letters it. */
export const BAD_PAYLOAD = Symbol('msgd.job.badPayload');

function parsePayload(raw: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(raw) };
  } catch (err) {
    return { ok: false, error: `payload is not valid JSON: ${(err as Error).message}` };
  }
}

export function toJob(r: JobRow): Job {
  // One hand-written bad row must not make every claim throw and stall the whole queue.
  const p = parsePayload(r.payload);
  const job: Job = {
    id: r.id,
    kind: r.kind,
    payload: p.ok ? p.value : r.payload,
    state: r.state,
    priority: r.priority,
    runAt: r.run_at,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    lockedUntil: r.locked_until,
    lockedBy: r.locked_by,
    reclaims: r.reclaims,
    uniqueKey: r.unique_key,
    lastError: r.last_error,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
  if (!p.ok) Object.defineProperty(job, BAD_PAYLOAD, { value: p.error });
  return job;
}
