import type { Db } from '../db/open.js';
import { backoffMs, type BackoffOptions } from './backoff.js';
import type { Job, JobQueue, Lease } from './queue.js';

// How one finished job's result lands in the database. Runs inside the worker's batch
// transaction; user code (apply, onDead) gets its own savepoint so a throw rolls back that
// one job and not the batch. Synchronous, with the queue's synchronous statements
// (queue.sync): apply and onDead are synchronous core functions on SQLite's connection, run
// inside the batch's store transaction, in its one turn.

/** Synchronous: runs inside the transaction that settles the job. */
export type Apply = (db: Db) => void;

export type JobResult =
  | { type: 'ok'; apply?: Apply }
  /**
   * afterMs: exactly this long before the next try (default: the backoff). minAfterMs: the
   * backoff, but not sooner than this (a provider's Retry-After, which must not shorten the
   * curve when the same answer keeps coming back).
   */
  | { type: 'retry'; afterMs?: number; minAfterMs?: number; error: string; apply?: Apply }
  | { type: 'snooze'; afterMs: number; apply?: Apply }
  | { type: 'fail'; error: string; apply?: Apply };

export interface KindHooks<P = any> {
  /**
   * Inside the claim transaction, once per claimed batch of this kind (e.g. mark messages
   * 'sending'). It may settle jobs there and then: those it returns a result for (a job that
   * must wait is snoozed) are settled in the claim's own transaction and not run.
   */
  onClaim?: (jobs: Job<P>[], db: Db) => void | Map<Job<P>, JobResult>;
  /** Inside the transaction that dead-letters a job of this kind, whatever the path there. */
  onDead?: (job: Job<P>, error: string, db: Db) => void;
}

export type Outcome =
  | { kind: 'completed' }
  | { kind: 'retried'; runAt: number }
  | { kind: 'snoozed'; runAt: number }
  | { kind: 'dead' }
  | { kind: 'lost' };

export interface SettleContext {
  db: Db;
  queue: JobQueue;
  backoff: BackoffOptions;
  hooks: (kind: string) => KindHooks | undefined;
  log: (level: 'warn' | 'error', obj: object, msg: string) => void;
  /** Runs fn in a nested better-sqlite3 transaction, i.e. a savepoint inside the batch. */
  savepoint: <T>(fn: () => T) => T;
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
      if (Number.isFinite(x.afterMs) && x.afterMs >= 0) return x;
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

export function settle(ctx: SettleContext, job: Job, lease: Lease, result: JobResult, now: number): Outcome {
  const hooks = ctx.hooks(job.kind);
  const userCode = ('apply' in result && result.apply !== undefined) || hooks?.onDead !== undefined;
  // A bare completion is one statement, atomic on its own: skip the savepoint round trip.
  const once = (r: JobResult) =>
    userCode
      ? ctx.savepoint(() => settleOnce(ctx, job, lease, r, now, hooks))
      : settleOnce(ctx, job, lease, r, now, hooks);
  try {
    return once(result);
  } catch (err) {
    abortIfRolledBack(ctx, err);
    const error = `${result.type === 'ok' || result.type === 'snooze' ? 'apply' : 'apply/onDead'} failed: ${errorMessage(err)}`;
    ctx.log('warn', { jobId: job.id, kind: job.kind, err }, 'job settlement threw; rolled back and retrying the job');
    try {
      return once({ type: 'retry', error });
    } catch (err2) {
      abortIfRolledBack(ctx, err2);
      // onDead itself throws: dead-letter without hooks rather than loop forever.
      ctx.log('error', { jobId: job.id, kind: job.kind, err: err2 }, 'onDead threw; job dead-lettered without it');
      const afterMs = retryDelay(ctx, job, {});
      const st = ctx.queue.sync.retry(job.id, { afterMs, error }, { lease, now });
      if (st === null) return { kind: 'lost' };
      return st === 'dead' ? { kind: 'dead' } : { kind: 'retried', runAt: now + afterMs };
    }
  }
}

/**
 * Disk full, I/O errors and out-of-memory make SQLite roll back the whole batch transaction,
 * not just the savepoint. Nothing may then run outside it: rethrow so the batch aborts and
 * the worker retries all of it.
 */
export function abortIfRolledBack(ctx: SettleContext, err: unknown) {
  if (!ctx.db.sqlite.inTransaction) throw err;
}

/** The longest a provider's hint (minAfterMs) is honoured: a bogus Retry-After of a day must not hold a message a day. */
export const MAX_HINT_MS = 3_600_000;

function retryDelay(ctx: SettleContext, job: Job, r: { afterMs?: number; minAfterMs?: number }): number {
  return r.afterMs ?? Math.max(Math.min(r.minAfterMs ?? 0, MAX_HINT_MS), backoffMs(job.attempts, ctx.backoff));
}

function settleOnce(
  ctx: SettleContext,
  job: Job,
  lease: Lease,
  r: JobResult,
  now: number,
  hooks: KindHooks | undefined,
): Outcome {
  const { queue, db } = ctx;
  const opts = { lease, now };
  switch (r.type) {
    case 'ok':
      if (!queue.sync.complete(job.id, opts)) return lost(ctx, job);
      r.apply?.(db);
      return { kind: 'completed' };
    case 'snooze': {
      const afterMs = Math.max(0, Math.round(r.afterMs));
      if (!queue.sync.snooze(job.id, afterMs, opts)) return lost(ctx, job);
      r.apply?.(db);
      return { kind: 'snoozed', runAt: now + afterMs };
    }
    case 'retry': {
      const afterMs = Math.max(0, Math.round(retryDelay(ctx, job, r)));
      const state = queue.sync.retry(job.id, { afterMs, error: r.error }, opts);
      if (state === null) return lost(ctx, job);
      r.apply?.(db);
      if (state === 'retry') return { kind: 'retried', runAt: now + afterMs };
      hooks?.onDead?.(job, r.error, db);
      return dead(ctx, job, r.error);
    }
    case 'fail':
      if (!queue.sync.fail(job.id, r.error, opts)) return lost(ctx, job);
      r.apply?.(db);
      hooks?.onDead?.(job, r.error, db);
      return dead(ctx, job, r.error);
  }
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
