import type { SyncQueryable } from '../db/queue-statements.js';
import type { Tx } from '../db/query.js';
import { BAD_PAYLOAD, LEASE_EXPIRED, type Job, type Lease } from './queue.js';
import {
  BatchRolledBack,
  checkResult,
  drive,
  errorMessage,
  savepoint,
  settle,
  userCode,
  type JobResult,
  type Outcome,
  type SettleContext,
  type StepTarget,
  type Steps,
} from './settle.js';
import type { JobLogger } from './worker-options.js';

// One turn of the worker loop in one store transaction: settle everything that finished since
// the last turn, then claim the freed capacity and run each kind's onClaim hook on what it took.
// One fsync per turn instead of one per job (group commit). The claim is one awaited store
// operation; the settles, riders and onClaim hooks around it are steps (src/queue/settle.ts):
// on SQLite they run synchronously on the connection, so the whole batch runs inside its
// transaction's one turn with one await (the claim), unless user code returns a promise; on
// PostgreSQL each statement is awaited.

export interface Running {
  job: Job;
  lease: Lease;
  lockedUntil: number;
  released: boolean;
}

export interface Finished {
  run: Running;
  result: JobResult;
}

export interface BatchOut {
  outcomes: Outcome[];
  started: Running[];
  claimed: number;
  /** Per rider, in order: undefined when its write is in the batch, else what it threw. */
  riderErrors: unknown[];
}

/** A running job's own write that must be durable before the job goes on (Worker.durably). */
export interface Rider {
  /** Given the batch's transaction; may return a promise. */
  write: (tx: Tx) => void | Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface BatchEnv {
  ctx: SettleContext & { workerId: string };
  /** SQLite's connection, whose transaction the batch's is: statements run on it without an await. */
  conn: SyncQueryable | undefined;
  /** Claims up to `want` due jobs of the worker's kinds, in `tx`: one store operation. */
  claim(tx: Tx, want: number, now: number): Promise<Job[]>;
  logger: JobLogger;
}

const isPromise = <T>(v: T | Promise<T>): v is Promise<T> => v instanceof Promise;

export async function settleAndClaim(
  tx: Tx,
  env: BatchEnv,
  finished: Finished[],
  want: number,
  now: number,
  riders: Rider[] = [],
): Promise<BatchOut> {
  try {
    return await turn({ tx, conn: env.conn }, env, finished, want, now, riders);
  } catch (err) {
    // The transaction is gone under a savepoint: the worker retries the whole batch.
    throw err instanceof BatchRolledBack ? err.failure : err;
  }
}

async function turn(
  t: StepTarget,
  env: BatchEnv,
  finished: Finished[],
  want: number,
  now: number,
  riders: Rider[],
): Promise<BatchOut> {
  const step = <T>(steps: Steps<T>): T | Promise<T> => drive(t, steps);
  const riderErrors: unknown[] = [];
  for (const r of riders) {
    try {
      const done = step(savepoint(() => userCode(r.write)));
      if (isPromise(done)) await done;
      riderErrors.push(undefined);
    } catch (err) {
      if (err instanceof BatchRolledBack) throw err;
      riderErrors.push(err ?? new Error('rider threw'));
    }
  }
  const outcomes: Outcome[] = [];
  for (const f of finished) {
    const o = step(settle(env.ctx, f.run.job, f.run.lease, f.result, now));
    outcomes.push(isPromise(o) ? await o : o);
  }
  const started: Running[] = [];
  if (want <= 0) return { outcomes, started, claimed: 0, riderErrors };
  const jobs = await env.claim(t.tx, want, now);
  const byKind = new Map<string, Running[]>();
  for (const job of jobs) {
    const run: Running = {
      job,
      lease: { workerId: env.ctx.workerId, attempts: job.attempts },
      lockedUntil: job.lockedUntil!,
      released: false,
    };
    const badPayload = (job as { [BAD_PAYLOAD]?: string })[BAD_PAYLOAD];
    if (badPayload !== undefined || job.attempts > job.maxAttempts) {
      // attempts > max: only the lifeline hands back a job with no attempts left, when its
      // runs keep dying with their worker. Dead-letter it (onDead included) rather than
      // crash another process.
      const error = badPayload ?? `${job.lastError ?? LEASE_EXPIRED} (no attempts left)`;
      const o = step(settle(env.ctx, job, run.lease, { type: 'fail', error }, now));
      outcomes.push(isPromise(o) ? await o : o);
      continue;
    }
    const group = byKind.get(job.kind);
    if (group) group.push(run);
    else byKind.set(job.kind, [run]);
  }
  for (const [kind, runs] of byKind) {
    const onClaim = env.ctx.hooks(kind)?.onClaim;
    let settled: Map<Job, JobResult> | void = undefined;
    try {
      if (onClaim) {
        const jobsOfKind = runs.map((r) => r.job);
        const out = step(savepoint(() => userCode((tx) => onClaim(jobsOfKind, tx))));
        settled = isPromise(out) ? await out : out;
      }
    } catch (err) {
      if (err instanceof BatchRolledBack) throw err;
      // Counted as a failed try (backoff, then dead) so a broken hook cannot spin the loop.
      env.logger.error({ workerId: env.ctx.workerId, kind, err }, 'onClaim hook threw; jobs retried');
      const error = `onClaim failed: ${errorMessage(err)}`;
      for (const r of runs) {
        const o = step(settle(env.ctx, r.job, r.lease, { type: 'retry', error }, now));
        outcomes.push(isPromise(o) ? await o : o);
      }
      continue;
    }
    for (const r of runs) {
      const result = settled ? settled.get(r.job) : undefined;
      if (result === undefined) {
        started.push(r);
        continue;
      }
      // Settled in the claim's own transaction: the job is never seen running, so a crash
      // cannot leave it claimed with nothing in flight.
      const o = step(settle(env.ctx, r.job, r.lease, checkResult(result), now));
      outcomes.push(isPromise(o) ? await o : o);
    }
  }
  return { outcomes, started, claimed: jobs.length, riderErrors };
}
