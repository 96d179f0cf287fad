import { type JobRow } from '../db/queue-statements.js';
import { type Sql, sql } from '../db/sql.js';
import type { DeadTarget, Job, Lease } from './job.js';

// The queue's SQL that is one text on both stores, and its row mapping, kept apart from the
// JobQueue class. Each statement is written once, as a function giving its sql`` query: the
// queue runs it through a store (async) or, inside a synchronous SQLite transaction, through
// the connection (src/db/queue-statements.ts, syncSqlite). What differs by store (the claim,
// the lifeline, the earliest run_at, index hints) is in src/db/queue-statements.ts.

export type { JobRow };
const MAX_ERROR_CHARS = 2000;

export interface EnqueueRow {
  kind: string;
  payload: string;
  priority: number;
  runAt: number;
  maxAttempts: number;
  uniqueKey: string | null;
  now: number;
}

// A completion with a lease must find the job still under that same claim: running under it, or
// taken back by a lifeline (its lease ran out while the database did not answer, or the holder
// stalled) and not claimed again since, as every claim moves `attempts` on. Once another claim
// has taken it, the stale holder's result is dropped, exactly as if it had crashed. Without a
// lease (by = null), the job is settled whatever holds it (the operator, a test). The condition
// is written out in each statement, not a nested fragment, so its text stays one per call site.
export type Owner = { by: string | null; attempts: number | null };

export function owner(lease?: Lease): Owner {
  return lease ? { by: lease.workerId, attempts: lease.attempts } : { by: null, attempts: null };
}

export const q = {
  insert: (r: EnqueueRow) =>
    sql`INSERT INTO jobs (kind, payload, state, priority, run_at, attempts, max_attempts, reclaims, unique_key, created_at, updated_at)
        VALUES (${r.kind}, ${r.payload}, 'available', ${r.priority}, ${r.runAt}, 0, ${r.maxAttempts}, 0, ${r.uniqueKey}, ${r.now}, ${r.now})
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id`,
  byUniqueKey: (key: string | null) => sql`SELECT id FROM jobs WHERE unique_key = ${key}`,
  get: (id: number) => sql`SELECT * FROM jobs WHERE id = ${id}`,
  complete: (id: number, o: Owner) =>
    sql`DELETE FROM jobs WHERE id = ${id}
          AND (CAST(${o.by} AS TEXT) IS NULL OR (attempts = ${o.attempts}
            AND (state = 'running' AND locked_by = ${o.by} OR state = 'retry' AND locked_by IS NULL)))`,
  retry: (id: number, o: Owner, runAt: number, error: string, now: number) =>
    sql`UPDATE jobs SET
          state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'retry' END,
          run_at = CASE WHEN attempts >= max_attempts THEN run_at ELSE ${runAt} END,
          last_error = ${error}, locked_until = NULL, locked_by = NULL, updated_at = ${now}
        WHERE id = ${id}
          AND (CAST(${o.by} AS TEXT) IS NULL OR (attempts = ${o.attempts}
            AND (state = 'running' AND locked_by = ${o.by} OR state = 'retry' AND locked_by IS NULL)))
        RETURNING state`,
  snooze: (id: number, o: Owner, runAt: number, now: number) =>
    sql`UPDATE jobs SET state = 'available', attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,
          run_at = ${runAt}, locked_until = NULL, locked_by = NULL, updated_at = ${now}
        WHERE id = ${id}
          AND (CAST(${o.by} AS TEXT) IS NULL OR (attempts = ${o.attempts}
            AND (state = 'running' AND locked_by = ${o.by} OR state = 'retry' AND locked_by IS NULL)))`,
  fail: (id: number, o: Owner, error: string, now: number) =>
    sql`UPDATE jobs SET state = 'dead', last_error = ${error}, locked_until = NULL, locked_by = NULL, updated_at = ${now}
        WHERE id = ${id}
          AND (CAST(${o.by} AS TEXT) IS NULL OR (attempts = ${o.attempts}
            AND (state = 'running' AND locked_by = ${o.by} OR state = 'retry' AND locked_by IS NULL)))`,
  release: (id: number, o: Owner, now: number) =>
    sql`UPDATE jobs SET state = 'available', attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,
          reclaims = reclaims + 1, locked_until = NULL, locked_by = NULL, updated_at = ${now}
        WHERE id = ${id} AND state = 'running'
          AND (CAST(${o.by} AS TEXT) IS NULL OR (locked_by = ${o.by} AND attempts = ${o.attempts}))`,
  extend: (id: number, o: Owner, lockedUntil: number) =>
    sql`UPDATE jobs SET locked_until = ${lockedUntil} WHERE id = ${id}
          AND (CAST(${o.by} AS TEXT) IS NULL OR (state = 'running' AND locked_by = ${o.by} AND attempts = ${o.attempts}))`,
  stats: () => sql`SELECT kind, state, COUNT(*) AS count FROM jobs GROUP BY kind, state ORDER BY kind, state`,
  listDead: (kind: string | null, afterId: number, limit: number) =>
    sql`SELECT * FROM jobs WHERE state = 'dead' AND (CAST(${kind} AS TEXT) IS NULL OR kind = ${kind}) AND id > ${afterId}
         ORDER BY id LIMIT ${limit}`,
  listPending: (state: string | null, kind: string | null, limit: number) =>
    sql`SELECT * FROM jobs WHERE state IN ('available', 'running', 'retry')
          AND (CAST(${state} AS TEXT) IS NULL OR state = ${state}) AND (CAST(${kind} AS TEXT) IS NULL OR kind = ${kind})
         ORDER BY priority, run_at, id LIMIT ${limit}`,
  deadJobs: (t: DeadTarget) => sql`SELECT * FROM jobs WHERE state = 'dead' AND ${deadWhere(t)} ORDER BY id`,
  retryDead: (t: DeadTarget, now: number) =>
    sql`UPDATE jobs SET state = 'available', attempts = 0, run_at = ${now}, locked_until = NULL, locked_by = NULL,
          updated_at = ${now} WHERE state = 'dead' AND ${deadWhere(t)} RETURNING kind`,
  deleteDead: (t: DeadTarget) => sql`DELETE FROM jobs WHERE state = 'dead' AND ${deadWhere(t)}`,
  hold: (kind: string, now: number) =>
    sql`UPDATE jobs SET state = 'held', locked_until = NULL, locked_by = NULL, updated_at = ${now}
         WHERE kind = ${kind} AND state IN ('available', 'running', 'retry') RETURNING payload`,
  releaseHeld: (kind: string, now: number) =>
    sql`UPDATE jobs SET state = 'available', run_at = ${now}, updated_at = ${now}
         WHERE kind = ${kind} AND state = 'held' RETURNING payload`,
  countHeld: (kind: string) => sql`SELECT COUNT(*) AS n FROM jobs WHERE kind = ${kind} AND state = 'held'`,
};

/** The dead jobs a target names: one job, a kind, or all. */
function deadWhere(target: DeadTarget): Sql {
  if (target === 'all') return sql`1 = 1`;
  if (typeof target === 'number') return sql`id = ${target}`;
  return sql`kind = ${target.kind}`;
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

// Integer columns are bigint on PostgreSQL, read as BigInt there: ids, times and counts here are
// far below 2^53, so the job carries numbers on both stores.
export function toJob(r: JobRow): Job {
  // One hand-written bad row must not make every claim throw and stall the whole queue.
  const p = parsePayload(r.payload);
  const job: Job = {
    id: Number(r.id),
    kind: r.kind,
    payload: p.ok ? p.value : r.payload,
    state: r.state,
    priority: Number(r.priority),
    runAt: Number(r.run_at),
    attempts: Number(r.attempts),
    maxAttempts: Number(r.max_attempts),
    lockedUntil: r.locked_until === null ? null : Number(r.locked_until),
    lockedBy: r.locked_by,
    reclaims: Number(r.reclaims),
    uniqueKey: r.unique_key,
    lastError: r.last_error,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
  if (!p.ok) Object.defineProperty(job, BAD_PAYLOAD, { value: p.error });
  return job;
}
