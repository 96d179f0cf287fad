import { resolve } from 'node:path';
import type { Db } from '../db/open.js';
import { type Queryable, type Store, store as sqliteStore, whenCommitted } from '../db/query.js';
import {
  JOBS_CHANNEL,
  queueStatements,
  type QueueStatements,
  type SyncQueryable,
  syncSqlite,
} from '../db/queue-statements.js';
import { sql } from '../db/sql.js';
import { invalid } from '../lib/errors.js';
import type { DeadTarget, Job, JobState, Lease } from './job.js';
import { clip, type EnqueueRow, type JobRow, owner, q, toJob } from './queue-sql.js';

export { BAD_PAYLOAD } from './queue-sql.js';
export type { DeadTarget, Job, JobState, Lease } from './job.js';

// The durable queue over the `jobs` table, on either store. Its operations are async, through
// the store (src/db/query.ts), except the enqueue of a caller inside a synchronous SQLite
// transaction of its own (webhook intake and processing, deliveries): `enqueue(spec)`, which only a SQLite
// queue has. The worker's batch settles jobs with the same statements as steps
// (src/queue/settle.ts): synchronous on SQLite's connection, awaited on PostgreSQL. Each
// statement is written once (src/queue/queue-sql.ts); what differs by store (the claim,
// leases, index hints) is in src/db/queue-statements.ts.
//
// Priority: LOWER runs first (0 default, negative = urgent), as in graphile-worker and Oban.
// The `jobs_claim` index is (state, priority, run_at) ascending on SQLite, (priority, run_at,
// id) over the runnable states on PostgreSQL: this order is read straight off it, while
// `priority DESC` would sort every runnable row on each claim.

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

export interface ClaimOptions {
  leaseMs?: number;
  /** Only jobs of these kinds (default: any kind). */
  kinds?: readonly string[];
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
  /**
   * PostgreSQL's LISTEN (PgStore.listen): listenForWakeups() wakes this queue's workers when
   * another instance (or msgctl) enqueues. Without it they see such jobs by polling only.
   */
  listen?: ListenFn;
}

/** Calls onNotify with each NOTIFY's payload on `channel`; resolves with the function that stops. */
export type ListenFn = (channel: string, onNotify: (payload: string) => void) => Promise<() => Promise<void>>;

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
  /** The SQLite database, when the queue is over one (undefined on PostgreSQL). */
  readonly db: Db | undefined;
  readonly store: Store;
  private readonly conn: SyncQueryable | undefined;
  private readonly stmts: QueueStatements;
  private readonly now: () => number;
  private readonly defaultMaxAttempts: number;
  private readonly defaultLeaseMs: number;
  private readonly channelKey: string;
  private notifyScheduled = false;
  private notifyEarliest = new Map<string, number>();
  private readonly listenFn: ListenFn | undefined;

  /** Over msgd's SQLite database (`Db`), or over a store (PostgreSQL's). */
  constructor(over: Db | Store, opts: JobQueueOptions = {}) {
    if ('sqlite' in over) {
      this.db = over;
      this.store = sqliteStore(over);
      this.conn = syncSqlite(over.sqlite);
      this.channelKey = over.path === ':memory:' ? `memory:${Math.random()}` : resolve(over.path);
    } else {
      this.db = undefined;
      this.store = over;
      this.conn = undefined;
      // Wake-ups reach the workers of this queue object; other processes' enqueues come by NOTIFY
      // (listenForWakeups) and by polling (the workers' maxSleepMs).
      this.channelKey = `store:${Math.random()}`;
    }
    this.stmts = queueStatements(this.store, this.conn);
    this.now = opts.now ?? Date.now;
    this.defaultMaxAttempts = opts.maxAttempts ?? 12;
    this.defaultLeaseMs = opts.leaseMs ?? 300_000;
    this.listenFn = opts.listen;
  }

  /**
   * Wakes this queue's workers when a job is enqueued elsewhere (another msgd, msgctl): LISTEN
   * on the enqueues' NOTIFY, a latency hint only, as polling (the workers' maxSleepMs) finds
   * every job anyway. False when the queue has no listen (SQLite: one process; or turned off).
   * Resolves once the server listens; a failure to listen is thrown (the caller polls on).
   */
  async listenForWakeups(): Promise<(() => Promise<void>) | null> {
    if (!this.listenFn) return null;
    return this.listenFn(JOBS_CHANNEL, (payload) => this.onNotify(payload));
  }

  /** A NOTIFY of an enqueue: [origin, kind, runAt if later than its enqueue]. Our own are woken already. */
  private onNotify(payload: string) {
    let p: unknown;
    try {
      p = JSON.parse(payload);
    } catch {
      return;
    }
    if (!Array.isArray(p) || p[0] === this.channelKey || typeof p[1] !== 'string') return;
    this.scheduleNotify(p[1], typeof p[2] === 'number' ? p[2] : this.now());
  }

  /** The connection of a SQLite queue, for statements inside a synchronous transaction. */
  syncConn(): SyncQueryable {
    if (!this.conn) throw new Error('this queue is on PostgreSQL: use its async operations inside store transactions');
    return this.conn;
  }

  /** The row a spec enqueues: the one definition both enqueue forms write. */
  private row(spec: EnqueueSpec, now: number): EnqueueRow {
    if (typeof spec.kind !== 'string' || spec.kind === '') throw invalid('job kind is required');
    const maxAttempts = spec.maxAttempts ?? this.defaultMaxAttempts;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw invalid(`maxAttempts must be an integer ≥ 1`);
    const runAt = spec.runAt ?? now;
    if (!Number.isFinite(runAt)) throw invalid('runAt must be a time in ms');
    const payload = JSON.stringify(spec.payload ?? null);
    if (payload === undefined) throw invalid('job payload must be JSON-serialisable');
    return {
      kind: spec.kind,
      payload,
      priority: spec.priority ?? 0,
      runAt: Math.round(runAt),
      maxAttempts,
      uniqueKey: spec.uniqueKey ?? null,
      now,
    };
  }

  /**
   * Adds a job in the caller's transaction (outbox rule: it exists exactly when the change that
   * causes it commits). `enqueue(tx, spec)` inside a store transaction; `enqueue(spec)` inside a
   * synchronous SQLite transaction (or on its own), run there and then. With a uniqueKey that a
   * job still holds, returns that job, created false.
   */
  enqueue(spec: EnqueueSpec, now?: number): EnqueueResult;
  enqueue(tx: Queryable, spec: EnqueueSpec, now?: number): Promise<EnqueueResult>;
  enqueue(a: EnqueueSpec | Queryable, b?: EnqueueSpec | number, c?: number): EnqueueResult | Promise<EnqueueResult> {
    if (typeof (a as Queryable).run === 'function') return this.enqueueIn(a as Queryable, b as EnqueueSpec, c);
    const spec = a as EnqueueSpec;
    const row = this.row(spec, (b as number | undefined) ?? this.now());
    const conn = this.syncConn();
    for (;;) {
      const inserted = conn.get<Pick<JobRow, 'id'>>(q.insert(row));
      if (inserted) return this.created(row, inserted.id);
      const existing = conn.get<Pick<JobRow, 'id'>>(q.byUniqueKey(row.uniqueKey));
      // Only missed if the row was deleted between the two statements by another connection.
      if (existing) return { id: Number(existing.id), created: false };
    }
  }

  private async enqueueIn(tx: Queryable, spec: EnqueueSpec, now: number = this.now()): Promise<EnqueueResult> {
    const row = this.row(spec, now);
    for (;;) {
      const inserted = await tx.get<Pick<JobRow, 'id'>>(
        this.stmts.notifying(q.insert(row), () => this.wakePayload(row)),
      );
      if (inserted) {
        // The workers of this queue claim it once it is committed, not before (a PostgreSQL
        // transaction spans turns): woken earlier, they would find nothing and sleep a poll.
        whenCommitted(tx, () => this.scheduleNotify(row.kind, row.runAt));
        return { id: Number(inserted.id), created: true };
      }
      const existing = await tx.get<Pick<JobRow, 'id'>>(q.byUniqueKey(row.uniqueKey));
      if (existing) return { id: Number(existing.id), created: false };
    }
  }

  /** What an enqueue NOTIFYs (onNotify): the same for every due job of a kind, so a transaction sends it once. */
  private wakePayload(row: EnqueueRow): string {
    return JSON.stringify(row.runAt > row.now ? [this.channelKey, row.kind, row.runAt] : [this.channelKey, row.kind]);
  }

  private created(row: EnqueueRow, id: number): EnqueueResult {
    this.scheduleNotify(row.kind, row.runAt);
    return { id: Number(id), created: true };
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

  // Called once the enqueuing transaction has committed (whenCommitted), or inside one that
  // commits within its turn (a synchronous SQLite one, a SQLite store transaction): setImmediate
  // then runs after its COMMIT, so a woken worker never claims inside the caller's transaction
  // and always sees the row. Many enqueues in one turn make one wake-up.
  scheduleNotify(kind: string, runAt: number) {
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
   * Take up to `limit` runnable jobs, in priority, run_at, id order, as ONE store operation in
   * the caller's transaction `tx`. On PostgreSQL with FOR UPDATE SKIP LOCKED and a lease on the
   * database's clock (`now` is SQLite's clock only).
   */
  async claimIn(
    tx: Queryable,
    workerId: string,
    limit: number,
    now: number = this.now(),
    opts: ClaimOptions = {},
  ): Promise<Job[]> {
    if (limit <= 0) return [];
    const rows = await this.stmts.claim(tx, {
      workerId,
      limit,
      now,
      leaseMs: opts.leaseMs ?? this.defaultLeaseMs,
      kinds: opts.kinds ?? [],
    });
    return rows.map(toJob);
  }

  /** claimIn, in a transaction of its own. */
  claim(workerId: string, limit: number, now: number = this.now(), opts: ClaimOptions = {}): Promise<Job[]> {
    if (limit <= 0) return Promise.resolve([]);
    return this.store.transaction((tx) => this.claimIn(tx, workerId, limit, now, opts));
  }

  /** Done jobs are deleted, not kept. False when the lease no longer stands (or no such job). */
  async complete(id: number, opts: SettleOptions = {}, tx: Queryable = this.store): Promise<boolean> {
    return (await tx.run(q.complete(id, owner(opts.lease)))).changes === 1;
  }

  /**
   * Schedule another try, or dead-letter the job once it has used max_attempts.
   * Returns the state it went to, or null when the lease no longer stands.
   */
  async retry(
    id: number,
    r: { afterMs: number; error: string },
    opts: SettleOptions = {},
    tx: Queryable = this.store,
  ): Promise<'retry' | 'dead' | null> {
    const now = opts.now ?? this.now();
    const runAt = now + Math.max(0, Math.round(r.afterMs));
    const row = await tx.get<{ state: 'retry' | 'dead' }>(q.retry(id, owner(opts.lease), runAt, clip(r.error), now));
    return row ? row.state : null;
  }

  /** Reschedule without spending an attempt: waiting for a rate slot is not a failure. */
  async snooze(id: number, afterMs: number, opts: SettleOptions = {}, tx: Queryable = this.store): Promise<boolean> {
    const now = opts.now ?? this.now();
    const runAt = now + Math.max(0, Math.round(afterMs));
    return (await tx.run(q.snooze(id, owner(opts.lease), runAt, now))).changes === 1;
  }

  /** Dead-letter now: kept, with its error, for the operator. */
  async fail(id: number, error: string, opts: SettleOptions = {}, tx: Queryable = this.store): Promise<boolean> {
    const now = opts.now ?? this.now();
    return (await tx.run(q.fail(id, owner(opts.lease), clip(error), now))).changes === 1;
  }

  /**
   * Hand a running job back (shutdown timed out): available again, its attempt not spent. Its
   * handler may still be mid-call, so it counts as a reclaim: the next run knows the earlier
   * one may have had an effect (dispatch flags the message a possible duplicate).
   */
  async release(id: number, opts: SettleOptions = {}, tx: Queryable = this.store): Promise<boolean> {
    const now = opts.now ?? this.now();
    return (await tx.run(q.release(id, owner(opts.lease), now))).changes === 1;
  }

  async extendLease(id: number, lease: Lease, lockedUntil: number, tx: Queryable = this.store): Promise<boolean> {
    return (await tx.run(q.extend(id, owner(lease), lockedUntil))).changes === 1;
  }

  /**
   * At start, with the data directory locked to this process: every job still 'running' was
   * left by a process that died (its lease may run minutes more). Take them all back now, as
   * the lifeline would once their leases ran out, counted as reclaims. Returns how many.
   */
  reclaimOrphans(now: number = this.now()): Promise<number> {
    const error = 'msgd stopped while this job ran (crash or kill); taken back at the next start';
    return this.store.transaction((tx) => this.stmts.reclaim(tx, { now, before: null, error }));
  }

  /** Take back jobs whose worker stopped renewing its lease (in `tx`, else on its own). Returns how many. */
  lifeline(now: number = this.now(), tx?: Queryable): Promise<number> {
    if (tx) return this.stmts.reclaim(tx, { now, before: now, error: LEASE_EXPIRED });
    return this.store.transaction((t) => this.stmts.reclaim(t, { now, before: now, error: LEASE_EXPIRED }));
  }

  /** Earliest run_at of waiting jobs (of these kinds), to sleep exactly until then; null if none. */
  async nextRunAt(kinds?: readonly string[]): Promise<number | null> {
    return this.stmts.nextRunAt(this.store, kinds ?? []);
  }

  /** Whether a job of these kinds (any kind if none given) could be claimed at `now`. */
  async hasRunnable(now: number = this.now(), kinds?: readonly string[]): Promise<boolean> {
    const k = kinds && kinds.length > 0 ? kinds : null;
    // With kinds, seek (kind, state) pairs on jobs_kind_claim rather than walk other kinds' jobs.
    const row = k
      ? await this.store.get(
          sql`SELECT 1 AS x FROM jobs ${this.stmts.indexedBy('jobs_kind_claim')} WHERE state IN ('available','retry')
               AND run_at <= ${now} AND kind IN (${sql.join(k.map((x) => sql`${x}`))}) LIMIT 1`,
        )
      : await this.store.get(
          sql`SELECT 1 AS x FROM jobs ${this.stmts.indexedBy('jobs_claim')} WHERE state IN ('available','retry')
               AND run_at <= ${now} LIMIT 1`,
        );
    return row !== undefined;
  }

  /** Whether any job of these kinds is waiting or running (dead jobs do not count). */
  async hasPending(kinds?: readonly string[]): Promise<boolean> {
    const k = kinds && kinds.length > 0 ? kinds : null;
    const row = k
      ? await this.store.get(
          sql`SELECT 1 AS x FROM jobs ${this.stmts.indexedBy('jobs_kind_claim')}
               WHERE state IN ('available','retry','running') AND kind IN (${sql.join(k.map((x) => sql`${x}`))}) LIMIT 1`,
        )
      : await this.store.get(
          sql`SELECT 1 AS x FROM jobs ${this.stmts.indexedBy('jobs_claim')}
               WHERE state IN ('available','retry','running') LIMIT 1`,
        );
    return row !== undefined;
  }

  async get(id: number): Promise<Job | null> {
    const row = await this.store.get<JobRow>(q.get(id));
    return row ? toJob(row) : null;
  }

  // Operator views: off the hot path.

  async stats(): Promise<KindStateCount[]> {
    const rows = await this.store.all<KindStateCount>(q.stats());
    return rows.map((r) => ({ kind: r.kind, state: r.state, count: Number(r.count) }));
  }

  async listDead(opts: { kind?: string; limit?: number; afterId?: number } = {}): Promise<Job[]> {
    const limit = Math.min(Math.max(opts.limit ?? 50, 1), 1000);
    const rows = await this.store.all<JobRow>(q.listDead(opts.kind ?? null, opts.afterId ?? 0, limit));
    return rows.map(toJob);
  }

  /**
   * Jobs still to run (waiting, running, or waiting to retry), the next to run first: what the
   * queue holds and why a job is waiting (its last error). For the operator, not the hot path.
   */
  async listPending(opts: { state?: Exclude<JobState, 'dead'>; kind?: string; limit?: number } = {}): Promise<Job[]> {
    const limit = Math.min(Math.max(opts.limit ?? 50, 1), 1000);
    const rows = await this.store.all<JobRow>(q.listPending(opts.state ?? null, opts.kind ?? null, limit));
    return rows.map(toJob);
  }

  /** The dead jobs a target names (an id, a kind, or all), oldest first. */
  async deadJobs(target: DeadTarget): Promise<Job[]> {
    return (await this.store.all<JobRow>(q.deadJobs(target))).map(toJob);
  }

  /** Give dead jobs a fresh set of attempts, to run now. Returns how many. */
  async retryDead(target: DeadTarget, now: number = this.now(), tx: Queryable = this.store): Promise<number> {
    const rows = await tx.all<Pick<JobRow, 'kind'>>(q.retryDead(target, now));
    whenCommitted(tx, () => {
      for (const kind of new Set(rows.map((r) => r.kind))) this.scheduleNotify(kind, now);
    });
    return rows.length;
  }

  /**
   * Hold every job of a kind that is still to run (waiting, running or waiting to retry): no
   * claim takes it until release(). A running one's lease is dropped with it: whoever held it
   * is not this process (a database restored from a backup). Returns the held jobs' payloads.
   */
  async hold(kind: string, now: number = this.now(), tx: Queryable = this.store): Promise<unknown[]> {
    const rows = await tx.all<Pick<JobRow, 'payload'>>(q.hold(kind, now));
    return rows.map((r) => JSON.parse(r.payload) as unknown);
  }

  /** Held jobs of a kind go back to the queue, to run now. Returns their payloads. */
  async releaseHeld(kind: string, now: number = this.now(), tx: Queryable = this.store): Promise<unknown[]> {
    const rows = await tx.all<Pick<JobRow, 'payload'>>(q.releaseHeld(kind, now));
    if (rows.length > 0) whenCommitted(tx, () => this.scheduleNotify(kind, now));
    return rows.map((r) => JSON.parse(r.payload) as unknown);
  }

  async countHeld(kind: string): Promise<number> {
    const row = await this.store.get<{ n: number }>(q.countHeld(kind));
    return Number(row?.n ?? 0);
  }

  async deleteDead(target: DeadTarget): Promise<number> {
    return (await this.store.run(q.deleteDead(target))).changes;
  }

  /** The default lease (config jobs.leaseSeconds). */
  get leaseMs(): number {
    return this.defaultLeaseMs;
  }

  /** The queue's clock. */
  clock(): number {
    return this.now();
  }
}
