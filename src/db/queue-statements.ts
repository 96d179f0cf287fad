import type { Database, Statement } from 'better-sqlite3';
import type { Queryable, Store } from './query.js';
import type { Row } from './rows.js';
import type { jobs } from './schema.js';
import { type Dialect, render, type Sql, sql } from './sql.js';
import { stmt } from './stmt.js';

// The job queue's statements that differ by store: the claim, the lifeline's reclaim, the
// earliest run_at, and the index a query names. Everything else the queue runs is one sql``
// text for both (src/queue/queue-sql.ts).
//
// SQLite: one process holds the database, so the claim is a plain UPDATE in the caller's
// transaction, its lease and its "due" read off the process clock (`now`), and INDEXED BY
// pins the indexes the planner could miss without ANALYZE statistics.
// PostgreSQL: several processes claim at once, so the claim takes rows with FOR UPDATE SKIP
// LOCKED (two claimers never wait on, nor get, the same job), over the partial index
// jobs_claim (priority, run_at, id) WHERE state IN ('available', 'retry'), and every time in
// it (due, lease, updated_at) comes from the database's clock: instances whose clocks differ
// still agree on whose lease has run out.

/** A job as `SELECT *` or `RETURNING *` returns it. */
export type JobRow = Row<typeof jobs>;
type SeekRow = Pick<JobRow, 'id' | 'priority' | 'run_at'>;

/** Statements run synchronously on a SQLite connection, inside a transaction already open on it. */
export interface SyncQueryable {
  get<R>(q: Sql): R | undefined;
  all<R>(q: Sql): R[];
  run(q: Sql): { changes: number };
}

const syncs = new WeakMap<Database, SyncQueryable>();

/**
 * SQLite's statements run where they are called, for code inside a synchronous transaction (the
 * worker's batch, the accept): one per connection, each statement prepared once per call site.
 */
export function syncSqlite(db: Database): SyncQueryable {
  let s = syncs.get(db);
  if (s) return s;
  const byStrings = new WeakMap<readonly string[], Statement>();
  const statement = (q: Sql): Statement => {
    let st = byStrings.get(q.strings);
    if (st === undefined) {
      st = stmt(db, render(q, 'sqlite').text);
      byStrings.set(q.strings, st);
    }
    return st;
  };
  s = {
    get: <R>(q: Sql) => statement(q).get(...q.values) as R | undefined,
    all: <R>(q: Sql) => statement(q).all(...q.values) as R[],
    run: (q: Sql) => ({ changes: statement(q).run(...q.values).changes }),
  };
  syncs.set(db, s);
  return s;
}

export interface ClaimParams {
  workerId: string;
  limit: number;
  /** The process's clock (ms): SQLite's due time and lease start; PostgreSQL reads its own. */
  now: number;
  leaseMs: number;
  /** Only jobs of these kinds; empty: any kind. */
  kinds: readonly string[];
}

export interface QueueStatements {
  readonly dialect: Dialect;
  /**
   * Takes up to `limit` runnable jobs (state available or retry, due), lowest priority, then
   * run_at, then id first: marks them running under `workerId` with a lease, one attempt spent.
   * One store operation, inside the caller's transaction `q`. The rows come back in claim order.
   */
  claim(q: Queryable, p: ClaimParams): Promise<JobRow[]>;
  /** Running jobs whose lease ends before `before` (null: every running job) go back to the queue. */
  reclaim(q: Queryable, p: { now: number; before: number | null; error: string }): Promise<number>;
  /** Earliest run_at of waiting jobs (of these kinds), or null. */
  nextRunAt(q: Queryable, kinds: readonly string[]): Promise<number | null>;
  /** `INDEXED BY name` on SQLite; nothing on PostgreSQL (its partial indexes are found by the planner). */
  indexedBy(name: 'jobs_claim' | 'jobs_kind_claim'): Sql;
  /**
   * The enqueue's INSERT (`… RETURNING id`) telling the other instances of a new job: on
   * PostgreSQL it also NOTIFYs JOBS_CHANNEL with `payload` for each row it inserts, delivered at
   * COMMIT (one per distinct payload per transaction); on SQLite, one process, it is `insert`.
   */
  notifying(insert: Sql, payload: () => string): Sql;
}

/** The PostgreSQL channel an enqueue NOTIFYs and workers LISTEN on. */
export const JOBS_CHANNEL = 'msgd_jobs';

const claimOrder = (a: SeekRow, b: SeekRow) => a.priority - b.priority || a.run_at - b.run_at || a.id - b.id;

/** SQLite's: run synchronously on `conn`, the connection whose transaction is open (the caller's `q`). */
export function sqliteQueueStatements(conn: SyncQueryable): QueueStatements {
  return {
    dialect: 'sqlite',
    async claim(_q, p) {
      return sqliteClaim(conn, p);
    },
    async reclaim(_q, p) {
      return sqliteReclaim(conn, p);
    },
    async nextRunAt(_q, kinds) {
      return sqliteNextRunAt(conn, kinds);
    },
    indexedBy: (name) => indexedBy('sqlite', name),
    notifying: (insert) => insert,
  };
}

const INDEXED_BY = { jobs_claim: sql`INDEXED BY jobs_claim`, jobs_kind_claim: sql`INDEXED BY jobs_kind_claim` };
const NO_HINT = sql``;

/** `INDEXED BY name` on SQLite; nothing on PostgreSQL (the planner finds its partial indexes). */
export function indexedBy(dialect: Dialect, name: 'jobs_claim' | 'jobs_kind_claim'): Sql {
  return dialect === 'sqlite' ? INDEXED_BY[name] : NO_HINT;
}

/**
 * SQLite's claim, synchronous. Over every kind: one UPDATE … WHERE id IN (a seek of
 * jobs_claim). With kinds: each (kind, runnable state)'s first jobs read in index order (no
 * sort, no temporary table, which one UPDATE … WHERE id IN (a merged, sorted subquery) needs),
 * then each chosen job taken by its id.
 */
export function sqliteClaim(conn: SyncQueryable, p: ClaimParams): JobRow[] {
  const { workerId, limit, now } = p;
  if (limit <= 0) return [];
  const lockedUntil = now + p.leaseMs;
  if (p.kinds.length === 0) {
    const rows = conn.all<JobRow>(
      sql`UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_until = ${lockedUntil},
            locked_by = ${workerId}, updated_at = ${now}
          WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_claim WHERE state IN ('available','retry')
            AND run_at <= ${now} ORDER BY priority, run_at, id LIMIT ${limit})
          RETURNING *`,
    );
    // RETURNING comes back in rowid order; hand jobs out in the order they were chosen.
    return rows.sort(claimOrder);
  }
  let chosen: SeekRow[] = [];
  for (const kind of p.kinds.length > 1 ? new Set(p.kinds) : p.kinds) {
    const available = conn.all<SeekRow>(
      sql`SELECT id, priority, run_at FROM jobs INDEXED BY jobs_kind_claim
           WHERE kind = ${kind} AND state = 'available' AND run_at <= ${now} ORDER BY priority, run_at, id LIMIT ${limit}`,
    );
    const retry = conn.all<SeekRow>(
      sql`SELECT id, priority, run_at FROM jobs INDEXED BY jobs_kind_claim
           WHERE kind = ${kind} AND state = 'retry' AND run_at <= ${now} ORDER BY priority, run_at, id LIMIT ${limit}`,
    );
    if (available.length > 0) chosen = chosen.length === 0 ? available : chosen.concat(available);
    if (retry.length > 0) chosen = chosen.length === 0 ? retry : chosen.concat(retry);
  }
  if (chosen.length > 1) chosen.sort(claimOrder);
  if (chosen.length > limit) chosen.length = limit;
  const out: JobRow[] = [];
  for (const c of chosen) {
    const row = conn.get<JobRow>(
      sql`UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_until = ${lockedUntil},
            locked_by = ${workerId}, updated_at = ${now}
          WHERE id = ${c.id} AND state IN ('available', 'retry') RETURNING *`,
    );
    if (row) out.push(row);
  }
  return out;
}

function sqliteReclaim(conn: SyncQueryable, p: { now: number; before: number | null; error: string }): number {
  const before = p.before ?? Number.MAX_SAFE_INTEGER;
  return conn.run(
    sql`UPDATE jobs SET state = 'retry', run_at = ${p.now}, reclaims = reclaims + 1, last_error = ${p.error},
          locked_until = NULL, locked_by = NULL, updated_at = ${p.now}
        WHERE state = 'running' AND locked_until < ${before}`,
  ).changes;
}

// MIN(run_at) over state IN (...) walks every waiting row; this skip-scan seeks the index once
// per distinct priority instead. With kinds, per kind on jobs_kind_claim.
function sqliteNextRunAtText(kindCount: number): string {
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

// One literal-parts array per number of kinds, so its statement is prepared once and kept.
const nextRunAtParts = new Map<number, readonly string[]>();

function sqliteNextRunAt(conn: SyncQueryable, kinds: readonly string[]): number | null {
  let strings = nextRunAtParts.get(kinds.length);
  if (strings === undefined) {
    strings = sqliteNextRunAtText(kinds.length).split('?');
    nextRunAtParts.set(kinds.length, strings);
  }
  const q: Sql = { strings, values: [...kinds] };
  return conn.get<{ m: number | null }>(q)?.m ?? null;
}

// PostgreSQL's clock in ms: the time its statement began. statement_timestamp() is stable
// within a statement, so a comparison with it can still read an index; extract(epoch …) is
// numeric, exact to the microsecond before the cast.
export const PG_NOW = sql.raw('(extract(epoch FROM statement_timestamp()) * 1000)::bigint');

/** The claim's kinds: none, one (an equality, which reads jobs_kind_claim in claim order), or several. */
function pgKinds(kinds: readonly string[]): Sql {
  if (kinds.length === 0) return sql``;
  const unique = [...new Set(kinds)];
  if (unique.length === 1) return sql` AND kind = ${unique[0]}`;
  return sql` AND kind = ANY(${unique}::text[])`;
}

/** PostgreSQL's. */
export const pgQueueStatements: QueueStatements = {
  dialect: 'postgres',
  async claim(q, p) {
    if (p.limit <= 0) return [];
    const rows = await q.all<JobRow>(
      sql`WITH c AS (
            SELECT id FROM jobs
             WHERE state IN ('available', 'retry') AND run_at <= ${PG_NOW}${pgKinds(p.kinds)}
             ORDER BY priority, run_at, id
             LIMIT ${p.limit}
             FOR UPDATE SKIP LOCKED)
          UPDATE jobs j SET state = 'running', attempts = j.attempts + 1, locked_by = ${p.workerId},
                 locked_until = ${PG_NOW} + ${p.leaseMs}::bigint, updated_at = ${PG_NOW}
            FROM c WHERE j.id = c.id
          RETURNING j.*`,
    );
    // RETURNING's order is not the claim's. int8 columns come back as BigInt: compare them as
    // numbers (ids and times are far below 2^53).
    return rows.sort(
      (a, b) =>
        Number(a.priority) - Number(b.priority) || Number(a.run_at) - Number(b.run_at) || Number(a.id) - Number(b.id),
    );
  },
  async reclaim(q, p) {
    // Every running job (the start of a process that held them all), or those whose lease, on
    // the database's clock, has run out.
    const expired = p.before === null ? sql`` : sql` AND locked_until < ${PG_NOW}`;
    const { changes } = await q.run(
      sql`UPDATE jobs SET state = 'retry', run_at = ${PG_NOW}, reclaims = reclaims + 1, last_error = ${p.error},
                 locked_until = NULL, locked_by = NULL, updated_at = ${PG_NOW}
           WHERE state = 'running'${expired}`,
    );
    return changes;
  },
  async nextRunAt(q, kinds) {
    const row = await q.get<{ m: number | bigint | null }>(
      sql`SELECT MIN(run_at) AS m FROM jobs WHERE state IN ('available', 'retry')${pgKinds(kinds)}`,
    );
    return row?.m == null ? null : Number(row.m);
  },
  indexedBy: (name) => indexedBy('postgres', name),
  notifying: (insert, payload) =>
    sql`WITH ins AS (${insert}) SELECT id, pg_notify(${JOBS_CHANNEL}, ${payload()}) AS notified FROM ins`,
};

/** The queue statements of a store; on SQLite, run on `conn` (the store's connection). */
export function queueStatements(store: Store, conn?: SyncQueryable): QueueStatements {
  if (store.dialect === 'postgres') return pgQueueStatements;
  if (!conn) throw new Error('a SQLite queue needs its connection');
  return sqliteQueueStatements(conn);
}
