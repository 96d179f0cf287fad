import type { Queryable } from '../db/query.js';
import { BAD_PAYLOAD, LEASE_EXPIRED, type Job, type Lease } from './queue.js';
import {
  abortIfRolledBack,
  checkResult,
  errorMessage,
  settle,
  type JobResult,
  type Outcome,
  type SettleContext,
} from './settle.js';
import type { JobLogger } from './worker-options.js';

// One turn of the worker loop in one store transaction: settle everything that finished since
// the last turn, then claim the freed capacity and run each kind's onClaim hook on what it took.
// One fsync per turn instead of one per job (group commit). The claim is one awaited store
// operation; the settles, riders and onClaim hooks around it are synchronous (they call
// synchronous core functions on SQLite's connection), so on SQLite the whole batch runs
// inside its transaction's one turn.

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
  write: () => void;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface BatchEnv {
  ctx: SettleContext & { workerId: string };
  /** Claims up to `want` due jobs of the worker's kinds, in `tx`: one store operation. */
  claim(tx: Queryable, want: number, now: number): Promise<Job[]>;
  logger: JobLogger;
}

export async function settleAndClaim(
  tx: Queryable,
  env: BatchEnv,
  finished: Finished[],
  want: number,
  now: number,
  riders: Rider[] = [],
): Promise<BatchOut> {
  const riderErrors: unknown[] = [];
  for (const r of riders) {
    try {
      env.ctx.savepoint(r.write);
      riderErrors.push(undefined);
    } catch (err) {
      abortIfRolledBack(env.ctx, err);
      riderErrors.push(err ?? new Error('rider threw'));
    }
  }
  const outcomes: Outcome[] = [];
  for (const f of finished) outcomes.push(settle(env.ctx, f.run.job, f.run.lease, f.result, now));
  const started: Running[] = [];
  if (want <= 0) return { outcomes, started, claimed: 0, riderErrors };
  const jobs = await env.claim(tx, want, now);
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
      outcomes.push(settle(env.ctx, job, run.lease, { type: 'fail', error }, now));
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
      if (onClaim)
        settled = env.ctx.savepoint(() =>
          onClaim(
            runs.map((r) => r.job),
            env.ctx.db,
          ),
        );
    } catch (err) {
      abortIfRolledBack(env.ctx, err);
      // Counted as a failed try (backoff, then dead) so a broken hook cannot spin the loop.
      env.logger.error({ workerId: env.ctx.workerId, kind, err }, 'onClaim hook threw; jobs retried');
      const error = `onClaim failed: ${errorMessage(err)}`;
      for (const r of runs) outcomes.push(settle(env.ctx, r.job, r.lease, { type: 'retry', error }, now));
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
      outcomes.push(settle(env.ctx, r.job, r.lease, checkResult(result), now));
    }
  }
  return { outcomes, started, claimed: jobs.length, riderErrors };
}
