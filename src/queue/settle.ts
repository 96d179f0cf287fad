import type { SyncQueryable } from '../db/queue-statements.js';
import type { Tx } from '../db/query.js';
import { type Sql, sql } from '../db/sql.js';
import { backoffMs, type BackoffOptions } from './backoff.js';
import type { Job, JobQueue, Lease } from './queue.js';
import { clip, owner, q, type Owner } from './queue-sql.js';

// How one finished job's result lands in the database, inside the worker's batch transaction,
// on either store. User code (apply, onDead) runs in a savepoint of its own, so a throw rolls
// back that one job and not the batch.
//
// A settle is written once, as steps (a generator yielding each statement and each call of user
// code), and run by drive(): on SQLite every statement runs synchronously on the connection
// whose transaction is open, so a whole batch settles in its one turn with no await per
// statement or per job (the dispatch hot path: docs/architecture.md, "Stores"); on PostgreSQL
// each statement is awaited on the batch's Tx. User code given the Tx may write synchronously
// (SQLite's synchronous core functions) or return a promise (the async forms, on either store):
// the drive goes on asynchronously from the first promise it meets.

/** Given the batch's transaction; may return a promise (awaited before the job's savepoint ends). */
export type Apply = (tx: Tx) => void | Promise<void>;

export type JobResult =
  | { type: 'ok'; apply?: Apply }
  /**
   * afterMs: exactly this long before the next try (default: the backoff). minAfterMs: the
   * backoff, but not sooner than this (a provider's Retry-After, which must not shorten the
   * curve when the same answer keeps coming back).
   */
  | { type: 'retry'; afterMs?: number; minAfterMs?: number; error: string; apply?: Apply }
  /**
   * afterMs: this worker looks again then. runAt: the job's run_at instead of now + afterMs, a
   * time on the clock the claim compares it with (PostgreSQL's: a place in a gateway's line).
   */
  | { type: 'snooze'; afterMs: number; runAt?: number; apply?: Apply }
  | { type: 'fail'; error: string; apply?: Apply };

type Maybe<T> = T | Promise<T>;

export interface KindHooks<P = any> {
  /**
   * Inside the claim transaction, once per claimed batch of this kind (e.g. mark messages
   * 'sending'). It may settle jobs there and then: those it returns a result for (a job that
   * must wait is snoozed) are settled in the claim's own transaction and not run.
   */
  onClaim?: (jobs: Job<P>[], tx: Tx) => Maybe<void | Map<Job<P>, JobResult>>;
  /** Inside the transaction that dead-letters a job of this kind, whatever the path there. */
  onDead?: (job: Job<P>, error: string, tx: Tx) => Maybe<void>;
}

export type Outcome =
  | { kind: 'completed' }
  | { kind: 'retried'; runAt: number }
  | { kind: 'snoozed'; runAt: number }
  | { kind: 'dead' }
  | { kind: 'lost' };

export interface SettleContext {
  queue: JobQueue;
  backoff: BackoffOptions;
  hooks: (kind: string) => KindHooks | undefined;
  log: (level: 'warn' | 'error', obj: object, msg: string) => void;
}

// --- Steps and their drive --------------------------------------------------------------------

/** One step of a settle: a statement on the batch's transaction, or user code given it. */
export type Step = { op: 'get' | 'run'; q: Sql } | { op: 'call'; fn: (tx: Tx) => unknown };
export type Steps<T> = Generator<Step, T, unknown>;

/** Where steps run: the batch's Tx, and on SQLite its connection, for statements without an await. */
export interface StepTarget {
  tx: Tx;
  conn: SyncQueryable | undefined;
}

function* run(query: Sql): Steps<{ changes: number }> {
  return (yield { op: 'run', q: query }) as { changes: number };
}

/** User code as a step: given the Tx; what it returns (awaited when a promise). */
export function* userCode<T>(fn: (tx: Tx) => T | Promise<T>): Steps<T> {
  return (yield { op: 'call', fn }) as T;
}

const isPromise = (v: unknown): v is Promise<unknown> =>
  typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function';

function exec(t: StepTarget, step: Step): unknown {
  if (step.op === 'call') return step.fn(t.tx);
  if (t.conn) return step.op === 'get' ? t.conn.get(step.q) : t.conn.run(step.q);
  return step.op === 'get' ? t.tx.get(step.q) : t.tx.run(step.q);
}

/**
 * Runs the steps: synchronously while each step answers at once (SQLite's statements,
 * synchronous user code), then asynchronously from the first step that answers with a promise.
 */
export function drive<T>(t: StepTarget, steps: Steps<T>): T | Promise<T> {
  let r = steps.next();
  while (!r.done) {
    let v: unknown;
    try {
      v = exec(t, r.value);
    } catch (err) {
      r = steps.throw(err);
      continue;
    }
    if (isPromise(v)) return driveAsync(t, steps, v);
    r = steps.next(v);
  }
  return r.value;
}

async function driveAsync<T>(t: StepTarget, steps: Steps<T>, pending: Promise<unknown>): Promise<T> {
  let next: unknown = pending;
  for (;;) {
    let v: unknown;
    let failed = false;
    try {
      v = await next;
    } catch (err) {
      failed = true;
      v = err;
    }
    const r = failed ? steps.throw(v) : steps.next(v);
    if (r.done) return r.value;
    try {
      next = exec(t, r.value);
    } catch (err) {
      next = Promise.reject(err);
    }
  }
}

/**
 * The whole transaction was rolled back under a savepoint (SQLite on a full disk or an I/O
 * error, PostgreSQL on a lost connection): nothing may run outside it. The batch aborts, and
 * the worker tries all of it again.
 */
export class BatchRolledBack extends Error {
  constructor(readonly failure: unknown) {
    super('the batch transaction was rolled back');
    this.name = 'BatchRolledBack';
  }
}

const SAVEPOINT = sql`SAVEPOINT job_settle`;
const ROLLBACK_TO = sql`ROLLBACK TO SAVEPOINT job_settle`;
const RELEASE = sql`RELEASE SAVEPOINT job_settle`;
const SAVEPOINT_STEP: Step = { op: 'run', q: SAVEPOINT };
const ROLLBACK_TO_STEP: Step = { op: 'run', q: ROLLBACK_TO };
const RELEASE_STEP: Step = { op: 'run', q: RELEASE };

/** body in a savepoint: a throw rolls back what it wrote and is passed on. */
export function* savepoint<T>(body: () => Steps<T>): Steps<T> {
  yield* run(SAVEPOINT);
  let value: T;
  try {
    value = yield* body();
  } catch (err) {
    if (err instanceof BatchRolledBack) throw err;
    try {
      yield* run(ROLLBACK_TO);
      yield* run(RELEASE);
    } catch {
      throw new BatchRolledBack(err);
    }
    throw err;
  }
  yield* run(RELEASE);
  return value;
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return typeof err === 'string' ? err : String(err);
}

/** A handler's return value, checked: a malformed one is a failed try, not a crash of the loop. */
export function checkResult(r: unknown): JobResult {
  const x = r as JobResult | undefined;
  switch (x?.type) {
    case 'ok':
      return x;
    case 'retry':
    case 'fail':
      return typeof x.error === 'string' ? x : { ...x, error: String(x.error ?? 'no error given') };
    case 'snooze':
      if (Number.isFinite(x.afterMs) && x.afterMs >= 0 && (x.runAt === undefined || Number.isFinite(x.runAt))) return x;
  }
  return { type: 'retry', error: `handler returned an invalid result: ${safeJson(r)}` };
}

function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v)?.slice(0, 200) ?? String(v);
  } catch {
    return String(v);
  }
}

/**
 * The steps that settle one job: drive(target, settle(…)) runs them. One generator, yielding
 * its statements and user code itself: a settle runs for every finished job, and delegating
 * through a generator per statement and per savepoint cost more than SQLite's statements did.
 */
export function* settle(ctx: SettleContext, job: Job, lease: Lease, result: JobResult, now: number): Steps<Outcome> {
  const hooks = ctx.hooks(job.kind);
  // A bare completion is one statement, atomic on its own: skip the savepoint round trip.
  const withUserCode = ('apply' in result && result.apply !== undefined) || hooks?.onDead !== undefined;
  const by = owner(lease);
  let r = result;
  let error = '';
  // Tries: the result; a retry when its user code threw; a retry without hooks when onDead threw.
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      if (withUserCode) yield SAVEPOINT_STEP;
      let outcome: Outcome;
      try {
        switch (r.type) {
          case 'ok': {
            if (((yield { op: 'run', q: q.complete(job.id, by) }) as Changes).changes !== 1) {
              outcome = lost(ctx, job);
              break;
            }
            if (r.apply) yield { op: 'call', fn: r.apply };
            outcome = { kind: 'completed' };
            break;
          }
          case 'snooze': {
            const afterMs = Math.max(0, Math.round(r.afterMs));
            const runAt = r.runAt === undefined ? now + afterMs : Math.round(r.runAt);
            if (((yield { op: 'run', q: q.snooze(job.id, by, runAt, now) }) as Changes).changes !== 1) {
              outcome = lost(ctx, job);
              break;
            }
            if (r.apply) yield { op: 'call', fn: r.apply };
            outcome = { kind: 'snoozed', runAt: now + afterMs };
            break;
          }
          case 'retry': {
            const afterMs = Math.max(0, Math.round(retryDelay(ctx, job, r)));
            const row = (yield retryStep(job, by, afterMs, r.error, now)) as RetryRow | undefined;
            if (!row) {
              outcome = lost(ctx, job);
              break;
            }
            if (r.apply) yield { op: 'call', fn: r.apply };
            if (row.state === 'retry') {
              outcome = { kind: 'retried', runAt: now + afterMs };
              break;
            }
            const why = r.error;
            if (hooks?.onDead) yield { op: 'call', fn: (tx) => hooks.onDead!(job, why, tx) };
            outcome = dead(ctx, job, why);
            break;
          }
          case 'fail': {
            if (((yield { op: 'run', q: q.fail(job.id, by, clip(r.error), now) }) as Changes).changes !== 1) {
              outcome = lost(ctx, job);
              break;
            }
            if (r.apply) yield { op: 'call', fn: r.apply };
            const why = r.error;
            if (hooks?.onDead) yield { op: 'call', fn: (tx) => hooks.onDead!(job, why, tx) };
            outcome = dead(ctx, job, why);
            break;
          }
        }
      } catch (err) {
        // What the user code wrote is rolled back, and the error passed on.
        if (withUserCode && !(err instanceof BatchRolledBack)) {
          try {
            yield ROLLBACK_TO_STEP;
            yield RELEASE_STEP;
          } catch {
            throw new BatchRolledBack(err);
          }
        }
        throw err;
      }
      if (withUserCode) yield RELEASE_STEP;
      return outcome;
    } catch (err) {
      if (err instanceof BatchRolledBack) throw err;
      if (attempt === 0) {
        error = `${result.type === 'ok' || result.type === 'snooze' ? 'apply' : 'apply/onDead'} failed: ${errorMessage(err)}`;
        ctx.log(
          'warn',
          { jobId: job.id, kind: job.kind, err },
          'job settlement threw; rolled back and retrying the job',
        );
        r = { type: 'retry', error };
      } else {
        ctx.log('error', { jobId: job.id, kind: job.kind, err }, 'onDead threw; job dead-lettered without it');
      }
    }
  }
  // onDead itself throws: dead-letter without hooks rather than loop forever.
  const afterMs = retryDelay(ctx, job, {});
  const row = (yield retryStep(job, by, Math.max(0, Math.round(afterMs)), error, now)) as RetryRow | undefined;
  if (!row) return { kind: 'lost' };
  return row.state === 'dead' ? { kind: 'dead' } : { kind: 'retried', runAt: now + afterMs };
}

/** The longest a provider's hint (minAfterMs) is honoured: a bogus Retry-After of a day must not hold a message a day. */
export const MAX_HINT_MS = 3_600_000;

function retryDelay(ctx: SettleContext, job: Job, r: { afterMs?: number; minAfterMs?: number }): number {
  return r.afterMs ?? Math.max(Math.min(r.minAfterMs ?? 0, MAX_HINT_MS), backoffMs(job.attempts, ctx.backoff));
}

type Changes = { changes: number };
type RetryRow = { state: 'retry' | 'dead' };

/** The retry's statement (`afterMs` whole and not negative): the row's new state, or none when the lease no longer stands. */
function retryStep(job: Job, by: Owner, afterMs: number, error: string, now: number): Step {
  return { op: 'get', q: q.retry(job.id, by, now + afterMs, clip(error), now) };
}

/** A job out of attempts: the operator's log says so (msgctl jobs dead lists them). */
function dead(ctx: SettleContext, job: Job, error: string): Outcome {
  ctx.log(
    'warn',
    { jobId: job.id, kind: job.kind, attempts: job.attempts, payload: job.payload, error },
    'job dead: out of attempts (msgctl jobs dead)',
  );
  return { kind: 'dead' };
}

function lost(ctx: SettleContext, job: Job): Outcome {
  // The lease lapsed and the lifeline gave the job to another run; that run decides.
  ctx.log(
    'warn',
    { jobId: job.id, kind: job.kind, attempts: job.attempts },
    'job lease lost before its result was saved; result dropped',
  );
  return { kind: 'lost' };
}
