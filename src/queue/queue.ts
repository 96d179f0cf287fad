import { resolve } from 'node:path';
import type { Db } from '../db/open.js';
import { stmt } from '../db/stmt.js';
import { invalid } from '../lib/errors.js';
import type { DeadTarget, Job, JobState, Lease } from './job.js';
import { clip, deadWhere, type JobRow, nextRunAtSql, owner, type SeekRow, statements, toJob } from './queue-sql.js';

export { BAD_PAYLOAD } from './queue-sql.js';
export type { DeadTarget, Job, JobState, Lease } from './job.js';

// The durable queue over the `jobs` table. Every method is synchronous so a caller can run it
// inside its own better-sqlite3 transaction, next to the state change that causes it (outbox
// rule). Its SQL runs through stmt() (src/db/stmt.ts): the hot-path statements are looked up
// once per queue and kept; drizzle stays off the hot path.
//
// Priority: LOWER runs first (0 default, negative = urgent), as in graphile-worker and Oban.
// The `jobs_claim` index is (state, priority, run_at) ascending: this order is read straight
// off it, while `priority DESC` would sort every runnable row on each claim.

const claimOrder = (a: SeekRow, b: SeekRow) => a.priority - b.priority || a.run_at - b.run_at || a.id - b.id;

export interface EnqueueSpec {
  kind: string;
  /** Anything JSON-serialisable. */
  payload?: unknown;
  /** ms since epoch; default now. */
  runAt?: number;
  /** Lower runs first; default 0. */
  priority?: number;
  maxAttempts?: number;
  /** While a job with this key exists (pending, running or dead) enqueue returns it instead. */
  uniqueKey?: string;
}

export interface EnqueueResult {
  id: number;
  created: boolean;
}

export interface SettleOptions {
  lease?: Lease;
  now?: number;
}

export interface JobQueueOptions {
  /** Default max_attempts for jobs enqueued without one (config jobs.maxAttempts). */
  maxAttempts?: number;
  /** Default lease for claim() (config jobs.leaseSeconds). */
  leaseMs?: number;
  now?: () => number;
}

export interface KindStateCount {
  kind: string;
  state: JobState;
  count: number;
}

export const LEASE_EXPIRED = 'lease expired: the worker holding it stopped (crash or stall)';

/** Earliest new run_at per kind enqueued in one turn. */
type Listener = (earliestByKind: ReadonlyMap<string, number>) => void;

// Keyed by database file, not by queue object: any queue over the same file in this process
// wakes every worker on it, whichever connection they use.
const channels = new Map<string, Set<Listener>>();

export class JobQueue {
  readonly db: Db;
  private readonly now: () => number;
  private readonly defaultMaxAttempts: number;
  private readonly defaultLeaseMs: number;
  private readonly channelKey: string;
  private notifyScheduled = false;
  private notifyEarliest = new Map<string, number>();
  private readonly s: ReturnType<typeof statements>;

  constructor(db: Db, opts: JobQueueOptions = {}) {
    this.db = db;
    this.now = opts.now ?? Date.now;
    this.defaultMaxAttempts = opts.maxAttempts ?? 12;
    this.defaultLeaseMs = opts.leaseMs ?? 300_000;
    this.channelKey = db.path === ':memory:' ? `memory:${Math.random()}` : resolve(db.path);
    this.s = statements(db.sqlite);
  }

  enqueue(spec: EnqueueSpec, now: number = this.now()): EnqueueResult {
    if (typeof spec.kind !== 'string' || spec.kind === '') throw invalid('job kind is required');
    const maxAttempts = spec.maxAttempts ?? this.defaultMaxAttempts;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw invalid(`maxAttempts must be an integer ≥ 1`);
    const runAt = spec.runAt ?? now;
    if (!Number.isFinite(runAt)) throw invalid('runAt must be a time in ms');
    const payload = JSON.stringify(spec.payload ?? null);
    if (payload === undefined) throw invalid('job payload must be JSON-serialisable');
    // Positional: kind, payload, priority, run_at, max_attempts, unique_key, created_at, updated_at.
    const row = this.s.insert.get(
      spec.kind,
      payload,
      spec.priority ?? 0,
      Math.round(runAt),
      maxAttempts,
      spec.uniqueKey ?? null,
      now,
      now,
    );
    if (row) {
      this.scheduleNotify(spec.kind, runAt);
      return { id: row.id, created: true };
    }
    const existing = this.s.byUniqueKey.get(spec.uniqueKey);
    // Only reachable if the row was deleted between the two statements by another connection.
    if (!existing) return this.enqueue(spec, now);
    return { id: existing.id, created: false };
  }

  /** Called (after the enqueuing transaction, never inside it) with the earliest new run_at per kind. */
  onEnqueue(listener: Listener): () => void {
    let set = channels.get(this.channelKey);
    if (!set) channels.set(this.channelKey, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && channels.get(this.channelKey) === set) channels.delete(this.channelKey);
    };
  }

  // setImmediate runs after the current synchronous transaction has committed (better-sqlite3
  // transactions cannot span a turn), so a woken worker never claims inside the caller's
  // transaction and always sees the row. Many enqueues in one turn make one wake-up.
  private scheduleNotify(kind: string, runAt: number) {
    const prev = this.notifyEarliest.get(kind);
    if (prev === undefined || runAt < prev) this.notifyEarliest.set(kind, runAt);
    if (this.notifyScheduled) return;
    this.notifyScheduled = true;
    setImmediate(() => {
      const earliest = this.notifyEarliest;
      this.notifyScheduled = false;
      this.notifyEarliest = new Map();
      const set = channels.get(this.channelKey);
      if (set) for (const l of [...set]) l(earliest);
    });
  }

  /**
   * Take up to `limit` runnable jobs, in priority, run_at, id order, in one transaction: the
   * caller's (a throw rolls back with it) or, called outside one, an IMMEDIATE one of its own.
   */
  claim(
    workerId: string,
    limit: number,
    now: number = this.now(),
    opts: { leaseMs?: number; kinds?: readonly string[] } = {},
  ): Job[] {
    if (limit <= 0) return [];
    const kinds = opts.kinds ?? [];
    const lockedUntil = now + (opts.leaseMs ?? this.defaultLeaseMs);
    if (kinds.length > 0) return this.inTransaction(() => this.claimKinds(workerId, limit, now, lockedUntil, kinds));
    const rows = this.s.claimAny.all({ lockedUntil, by: workerId, now, limit });
    // RETURNING comes back in rowid order; hand jobs out in the order they were chosen.
    return rows.sort(claimOrder).map(toJob);
  }

  private claimKinds(
    workerId: string,
    limit: number,
    now: number,
    lockedUntil: number,
    kinds: readonly string[],
  ): Job[] {
    let chosen: SeekRow[] = [];
    for (const kind of kinds.length > 1 ? new Set(kinds) : kinds) {
      for (const seek of [this.s.seekAvailable, this.s.seekRetry]) {
        const rows = seek.all(kind, now, limit);
        if (rows.length > 0) chosen = chosen.length === 0 ? rows : chosen.concat(rows);
      }
    }
    if (chosen.length > 1) chosen.sort(claimOrder);
    if (chosen.length > limit) chosen.length = limit;
    const jobs: Job[] = [];
    for (const c of chosen) {
      const row = this.s.take.get(lockedUntil, workerId, now, c.id);
      if (row) jobs.push(toJob(row));
    }
    return jobs;
  }

  /** fn in the caller's transaction, or in one of its own (IMMEDIATE: it writes). */
  private inTransaction<T>(fn: () => T): T {
    if (this.db.sqlite.inTransaction) return fn();
    return this.db.sqlite.transaction(fn).immediate();
  }

  /** Done jobs are deleted, not kept. False when the lease no longer stands (or no such job). */
  complete(id: number, opts: SettleOptions = {}): boolean {
    return this.s.complete.run({ id, ...owner(opts.lease) }).changes === 1;
  }

  /**
   * Schedule another try, or dead-letter the job once it has used max_attempts.
   * Returns the state it went to, or null when the lease no longer stands.
   */
  retry(id: number, r: { afterMs: number; error: string }, opts: SettleOptions = {}): 'retry' | 'dead' | null {
    const now = opts.now ?? this.now();
    const row = this.s.retry.get({
      id,
      runAt: now + Math.max(0, Math.round(r.afterMs)),
      error: clip(r.error),
      now,
      ...owner(opts.lease),
    });
    return row ? row.state : null;
  }

  /** Reschedule without spending an attempt: waiting for a rate slot is not a failure. */
  snooze(id: number, afterMs: number, opts: SettleOptions = {}): boolean {
    const now = opts.now ?? this.now();
    const runAt = now + Math.max(0, Math.round(afterMs));
    return this.s.snooze.run({ id, runAt, now, ...owner(opts.lease) }).changes === 1;
  }

  /** Dead-letter now: kept, with its error, for the operator. */
  fail(id: number, error: string, opts: SettleOptions = {}): boolean {
    const now = opts.now ?? this.now();
    return this.s.fail.run({ id, error: clip(error), now, ...owner(opts.lease) }).changes === 1;
  }

  /**
   * Hand a running job back (shutdown timed out): available again, its attempt not spent. Its
   * handler may still be mid-call, so it counts as a reclaim: the next run knows the earlier
   * one may have had an effect (dispatch flags the message a possible duplicate).
   */
  release(id: number, opts: SettleOptions = {}): boolean {
    const now = opts.now ?? this.now();
    return this.s.release.run({ id, now, ...owner(opts.lease) }).changes === 1;
  }

  extendLease(id: number, lease: Lease, lockedUntil: number): boolean {
    return this.s.extend.run({ id, lockedUntil, ...owner(lease) }).changes === 1;
  }

  /**
   * At start, with the data directory locked to this process: every job still 'running' was
   * left by a process that died (its lease may run minutes more). Take them all back now, as
   * the lifeline would once their leases ran out, counted as reclaims. Returns how many.
   */
  reclaimOrphans(now: number = this.now()): number {
    const error = 'msgd stopped while this job ran (crash or kill); taken back at the next start';
    return this.s.reclaim.run({ now, before: Number.MAX_SAFE_INTEGER, error }).changes;
  }

  /** Take back jobs whose worker stopped renewing its lease. Returns how many. */
  lifeline(now: number = this.now()): number {
    return this.s.reclaim.run({ now, before: now, error: LEASE_EXPIRED }).changes;
  }

  /** Earliest run_at of waiting jobs (of these kinds), to sleep exactly until then; null if none. */
  nextRunAt(kinds?: readonly string[]): number | null {
    const k = kinds ?? [];
    const row = stmt<string[], { m: number | null }>(this.db.sqlite, nextRunAtSql(k.length)).get(...k);
    return row?.m ?? null;
  }

  /** Whether a job of these kinds (any kind if none given) could be claimed at `now`. */
  hasRunnable(now: number = this.now(), kinds?: readonly string[]): boolean {
    return this.exists(`state IN ('available','retry') AND run_at <= ?`, [now], kinds);
  }

  /** Whether any job of these kinds is waiting or running (dead jobs do not count). */
  hasPending(kinds?: readonly string[]): boolean {
    return this.exists(`state IN ('available','retry','running')`, [], kinds);
  }

  private exists(where: string, params: unknown[], kinds?: readonly string[]): boolean {
    const k = kinds && kinds.length ? ` AND kind IN (${kinds.map(() => '?').join(',')})` : '';
    // With kinds, seek (kind, state) pairs on jobs_kind_claim rather than walk other kinds' jobs.
    const sql = `SELECT 1 FROM jobs INDEXED BY ${k ? 'jobs_kind_claim' : 'jobs_claim'} WHERE ${where}${k} LIMIT 1`;
    return stmt(this.db.sqlite, sql).get(...params, ...(kinds ?? [])) !== undefined;
  }

  get(id: number): Job | null {
    const row = this.s.get.get(id);
    return row ? toJob(row) : null;
  }

  // Operator views: off the hot path, their statements looked up per call. A dead-job target
  // (deadWhere) gives one of three SQL texts.

  stats(): KindStateCount[] {
    return stmt<[], KindStateCount>(
      this.db.sqlite,
      `SELECT kind, state, COUNT(*) AS count FROM jobs GROUP BY kind, state ORDER BY kind, state`,
    ).all();
  }

  listDead(opts: { kind?: string; limit?: number; afterId?: number } = {}): Job[] {
    const rows = stmt<[Record<string, unknown>], JobRow>(
      this.db.sqlite,
      `SELECT * FROM jobs WHERE state = 'dead' AND (@kind IS NULL OR kind = @kind) AND id > @afterId
         ORDER BY id LIMIT @limit`,
    ).all({
      kind: opts.kind ?? null,
      afterId: opts.afterId ?? 0,
      limit: Math.min(Math.max(opts.limit ?? 50, 1), 1000),
    });
    return rows.map(toJob);
  }

  /**
   * Jobs still to run (waiting, running, or waiting to retry), the next to run first: what the
   * queue holds and why a job is waiting (its last error). For the operator, not the hot path.
   */
  listPending(opts: { state?: Exclude<JobState, 'dead'>; kind?: string; limit?: number } = {}): Job[] {
    const rows = stmt<[Record<string, unknown>], JobRow>(
      this.db.sqlite,
      `SELECT * FROM jobs WHERE state IN ('available', 'running', 'retry') AND (@state IS NULL OR state = @state)
           AND (@kind IS NULL OR kind = @kind)
         ORDER BY priority, run_at, id LIMIT @limit`,
    ).all({
      state: opts.state ?? null,
      kind: opts.kind ?? null,
      limit: Math.min(Math.max(opts.limit ?? 50, 1), 1000),
    });
    return rows.map(toJob);
  }

  /** The dead jobs a target names (an id, a kind, or all), oldest first. */
  deadJobs(target: DeadTarget): Job[] {
    const [where, params] = deadWhere(target);
    return stmt<unknown[], JobRow>(this.db.sqlite, `SELECT * FROM jobs WHERE state = 'dead'${where} ORDER BY id`)
      .all(...params)
      .map(toJob);
  }

  /** Give dead jobs a fresh set of attempts, to run now. Returns how many. */
  retryDead(target: DeadTarget, now: number = this.now()): number {
    const [where, params] = deadWhere(target);
    const rows = stmt<unknown[], Pick<JobRow, 'kind'>>(
      this.db.sqlite,
      `UPDATE jobs SET state = 'available', attempts = 0, run_at = ?, locked_until = NULL, locked_by = NULL,
         updated_at = ? WHERE state = 'dead'${where} RETURNING kind`,
    ).all(now, now, ...params);
    for (const kind of new Set(rows.map((r) => r.kind))) this.scheduleNotify(kind, now);
    return rows.length;
  }

  /**
   * Hold every job of a kind that is still to run (waiting, running or waiting to retry): no
   * claim takes it until release(). A running one's lease is dropped with it: whoever held it
   * is not this process (a database restored from a backup). Returns the held jobs' payloads.
   */
  hold(kind: string, now: number = this.now()): unknown[] {
    const rows = stmt<[number, string], Pick<JobRow, 'payload'>>(
      this.db.sqlite,
      `UPDATE jobs SET state = 'held', locked_until = NULL, locked_by = NULL, updated_at = ?
         WHERE kind = ? AND state IN ('available', 'running', 'retry') RETURNING payload`,
    ).all(now, kind);
    return rows.map((r) => JSON.parse(r.payload) as unknown);
  }

  /** Held jobs of a kind go back to the queue, to run now. Returns their payloads. */
  releaseHeld(kind: string, now: number = this.now()): unknown[] {
    const rows = stmt<[number, number, string], Pick<JobRow, 'payload'>>(
      this.db.sqlite,
      `UPDATE jobs SET state = 'available', run_at = ?, updated_at = ? WHERE kind = ? AND state = 'held' RETURNING payload`,
    ).all(now, now, kind);
    if (rows.length > 0) this.scheduleNotify(kind, now);
    return rows.map((r) => JSON.parse(r.payload) as unknown);
  }

  countHeld(kind: string): number {
    const row = stmt<[string], { n: number }>(
      this.db.sqlite,
      `SELECT COUNT(*) AS n FROM jobs WHERE kind = ? AND state = 'held'`,
    ).get(kind);
    return row?.n ?? 0;
  }

  deleteDead(target: DeadTarget): number {
    const [where, params] = deadWhere(target);
    return stmt(this.db.sqlite, `DELETE FROM jobs WHERE state = 'dead'${where}`).run(...params).changes;
  }
}
