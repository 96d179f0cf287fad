import type Database from 'better-sqlite3';
import type { DeadTarget, Job, JobState, Lease } from './job.js';

// The queue's SQL and row mapping, kept apart from the JobQueue class. Hot-path statements
// are prepared once per connection by prepare(); the rest are built per shape and cached.

type Row = Record<string, unknown>;
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

export function prepare(sqlite: Database.Database) {
  return {
    insert: sqlite.prepare(
      `INSERT INTO jobs (kind, payload, state, priority, run_at, attempts, max_attempts, reclaims, unique_key, created_at, updated_at)
       VALUES (?, ?, 'available', ?, ?, 0, ?, 0, ?, ?, ?)
       ON CONFLICT(unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id`,
    ),
    byUniqueKey: sqlite.prepare(`SELECT id FROM jobs WHERE unique_key = ?`),
    get: sqlite.prepare(`SELECT * FROM jobs WHERE id = ?`),
    complete: sqlite.prepare(`DELETE FROM jobs WHERE id = @id AND ${OWNED}`),
    retry: sqlite.prepare(
      `UPDATE jobs SET
         state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'retry' END,
         run_at = CASE WHEN attempts >= max_attempts THEN run_at ELSE @runAt END,
         last_error = @error, locked_until = NULL, locked_by = NULL, updated_at = @now
       WHERE id = @id AND ${OWNED} RETURNING state`,
    ),
    snooze: sqlite.prepare(
      `UPDATE jobs SET state = 'available', attempts = MAX(attempts - 1, 0), run_at = @runAt,
         locked_until = NULL, locked_by = NULL, updated_at = @now
       WHERE id = @id AND ${OWNED}`,
    ),
    fail: sqlite.prepare(
      `UPDATE jobs SET state = 'dead', last_error = @error, locked_until = NULL, locked_by = NULL, updated_at = @now
       WHERE id = @id AND ${OWNED}`,
    ),
    release: sqlite.prepare(
      `UPDATE jobs SET state = 'available', attempts = MAX(attempts - 1, 0), reclaims = reclaims + 1,
         locked_until = NULL, locked_by = NULL, updated_at = @now
       WHERE id = @id AND state = 'running' AND ${OWNED}`,
    ),
    extend: sqlite.prepare(`UPDATE jobs SET locked_until = @lockedUntil WHERE id = @id AND ${OWNED}`),
    // A claim with kinds: each (kind, runnable state)'s first jobs, read in index order (no sort,
    // no temporary table, which one UPDATE … WHERE id IN (a merged, sorted subquery) needs),
    // then each chosen job taken by its id.
    seekAvailable: sqlite.prepare(`SELECT id, priority, run_at FROM jobs INDEXED BY jobs_kind_claim
        WHERE kind = ? AND state = 'available' AND run_at <= ? ORDER BY priority, run_at, id LIMIT ?`),
    seekRetry: sqlite.prepare(`SELECT id, priority, run_at FROM jobs INDEXED BY jobs_kind_claim
        WHERE kind = ? AND state = 'retry' AND run_at <= ? ORDER BY priority, run_at, id LIMIT ?`),
    take: sqlite.prepare(
      `UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_until = ?, locked_by = ?, updated_at = ?
       WHERE id = ? AND state IN ('available', 'retry') RETURNING *`,
    ),
    // Running jobs whose lease ends before @before go back to the queue, counted as reclaims.
    reclaim: sqlite.prepare(
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

export function toJob(r: Row): Job {
  // One hand-written bad row must not make every claim throw and stall the whole queue.
  const p = parsePayload(r.payload as string);
  const job: Job = {
    id: r.id as number,
    kind: r.kind as string,
    payload: p.ok ? p.value : r.payload,
    state: r.state as JobState,
    priority: r.priority as number,
    runAt: r.run_at as number,
    attempts: r.attempts as number,
    maxAttempts: r.max_attempts as number,
    lockedUntil: (r.locked_until as number | null) ?? null,
    lockedBy: (r.locked_by as string | null) ?? null,
    reclaims: r.reclaims as number,
    uniqueKey: (r.unique_key as string | null) ?? null,
    lastError: (r.last_error as string | null) ?? null,
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
  };
  if (!p.ok) Object.defineProperty(job, BAD_PAYLOAD, { value: p.error });
  return job;
}
