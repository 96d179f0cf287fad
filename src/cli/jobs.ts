import type { Command } from 'commander';
import type { DeadTarget, Job } from '../queue/queue.js';
import { queueOf } from '../queue/of-ctx.js';
import { retryDeadJobs, dispatchMessageOf } from '../jobs/dead-jobs.js';
import { DISPATCH_JOB } from '../jobs/dispatch.js';
import { notFound } from '../lib/errors.js';
import { iso } from '../lib/time.js';
import { positiveInt } from './args.js';
import { withCli, type Cli } from './context.js';
import { confirm, YES_FLAG } from './confirm.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { lines, table, when, type Result } from './output.js';

// msgctl jobs: the durable queue as the operator sees it. Dead jobs (retries used up) stay
// until the operator retries or deletes them; a retried job runs on the server's next claim.

function jobJson(j: Job) {
  return {
    id: j.id,
    kind: j.kind,
    state: j.state,
    attempts: j.attempts,
    max_attempts: j.maxAttempts,
    reclaims: j.reclaims,
    last_error: j.lastError,
    payload: j.payload,
    run_at: iso(j.runAt),
    created_at: iso(j.createdAt),
    updated_at: iso(j.updatedAt),
  };
}

async function stats(cli: Cli): Promise<Result> {
  const rows = await queueOf(cli.ctx).stats();
  return {
    json: { data: rows },
    text: rows.length
      ? table(
          ['kind', 'state', 'jobs'],
          rows.map((r) => [r.kind, r.state, r.count]),
          { right: [2] },
        )
      : 'The queue is empty.',
  };
}

async function dead(cli: Cli, opts: { kind?: string; limit: number }): Promise<Result> {
  const jobs = await queueOf(cli.ctx).listDead({ kind: opts.kind, limit: Math.min(opts.limit, 1000) });
  return {
    json: { data: jobs.map(jobJson) },
    text: jobs.length
      ? table(
          ['id', 'kind', 'attempts', 'died (utc)', 'payload', 'last error'],
          jobs.map((j) => [j.id, j.kind, j.attempts, when(j.updatedAt), JSON.stringify(j.payload), j.lastError]),
          { right: [0, 2] },
        )
      : 'No dead jobs.',
  };
}

const PENDING_STATES = ['available', 'running', 'retry'] as const;

async function list(cli: Cli, opts: { state?: string; kind?: string; limit: number }): Promise<Result> {
  if (opts.state !== undefined && !(PENDING_STATES as readonly string[]).includes(opts.state)) {
    throw new UsageError(`--state must be ${PENDING_STATES.join(', ')} (dead jobs: msgctl jobs dead)`);
  }
  const jobs = await queueOf(cli.ctx).listPending({
    state: opts.state as (typeof PENDING_STATES)[number] | undefined,
    kind: opts.kind,
    limit: Math.min(opts.limit, 1000),
  });
  const rows = await Promise.all(jobs.map(async (j) => ({ ...jobJson(j), reason: await reasonOf(cli, j) })));
  return {
    json: { data: rows },
    text: jobs.length
      ? table(
          ['id', 'kind', 'state', 'attempts', 'next run (utc)', 'payload', 'why it waits'],
          jobs.map((j, i) => [
            j.id,
            j.kind,
            j.state,
            `${j.attempts}/${j.maxAttempts}`,
            when(j.runAt),
            JSON.stringify(j.payload),
            rows[i].reason ?? '-',
          ]),
          { right: [0] },
        )
      : 'No jobs waiting or running.',
  };
}

/**
 * Why a job waits: a dispatch job's message says it best (a retry's answer, a disabled
 * gateway: a job snoozed for a paused gateway or its rate keeps no error of its own), or its
 * place in its gateway's line; else the job's last error.
 */
async function reasonOf(cli: Cli, job: Job): Promise<string | null> {
  if (job.kind === DISPATCH_JOB) {
    const m = await dispatchMessageOf(cli.ctx, job);
    if (m?.error_code) return `${m.error_code}: ${m.error_message ?? ''}`;
    // Snoozed to its place in the gateway's line (src/jobs/dispatch.ts).
    if (m?.status === 'queued' && job.state === 'available' && job.runAt > cli.ctx.now())
      return "in line for its gateway's rate";
  }
  return job.lastError;
}

function target(ref: string | undefined, opts: { kind?: string; all?: boolean }): DeadTarget {
  if (opts.all) return opts.kind ? { kind: opts.kind } : 'all';
  if (!ref || !/^\d+$/.test(ref)) throw new UsageError('give a dead job id, or --all (optionally with --kind)');
  return Number(ref);
}

export async function retry(
  cli: Cli,
  ref: string | undefined,
  opts: { kind?: string; all?: boolean },
): Promise<Result> {
  const { retried, skipped } = await retryDeadJobs(cli.ctx, target(ref, opts));
  return {
    json: { retried, skipped },
    text: lines(
      `${retried} dead job(s) queued again; a running msgd picks them up within a second.`,
      ...skipped.map((x) => `not retried: job ${x.id}: ${x.reason}`),
    ),
  };
}

async function remove(
  cli: Cli,
  ref: string | undefined,
  opts: { kind?: string; all?: boolean; yes?: boolean },
): Promise<Result> {
  const t = target(ref, opts);
  const queue = queueOf(cli.ctx);
  const found = await queue.deadJobs(t);
  if (typeof t === 'number' && found.length === 0) throw notFound('dead job', String(t));
  if (found.length) {
    const what =
      typeof t === 'number'
        ? `Delete dead job ${t} (${found[0].kind})`
        : `Delete ${found.length} dead job${found.length === 1 ? '' : 's'}${typeof t === 'object' ? ` of kind ${t.kind}` : ''}`;
    await confirm(cli.io, what, opts.yes);
  }
  const n = await queue.deleteDead(t);
  return { json: { deleted: n }, text: `${n} dead job(s) deleted.` };
}

export function registerJobs(program: Command) {
  const jobs = program.command('jobs').description('the durable job queue: counts, waiting and dead jobs, retries');
  jobs.command('stats').description('jobs per kind and state').action(withCli(stats));
  jobs
    .command('list')
    .description('jobs waiting, running or waiting to retry, next to run first, with their last error')
    .option('--state <state>', 'only available, running or retry')
    .option('--kind <kind>', 'only this kind (e.g. message.dispatch)')
    .option('--limit <n>', 'how many (max 1000)', positiveInt, 50)
    .addHelpText('after', examples('msgctl jobs list --state retry', 'msgctl jobs list --kind message.dispatch --json'))
    .action(withCli(list));
  jobs
    .command('dead')
    .description('jobs that used up their attempts, newest first')
    .option('--kind <kind>', 'only this kind (e.g. message.dispatch)')
    .option('--limit <n>', 'how many (max 1000)', positiveInt, 50)
    .addHelpText('after', examples('msgctl jobs dead', 'msgctl jobs dead --kind message.dispatch --json'))
    .action(withCli(dead));
  jobs
    .command('retry')
    .description('queue a dead job again with fresh attempts')
    .argument('[id]', 'dead job id')
    .option('--all', 'every dead job (with --kind: every dead job of that kind)')
    .option('--kind <kind>', 'with --all: only this kind')
    .addHelpText('after', examples('msgctl jobs retry 42', 'msgctl jobs retry --all --kind webhook.deliver'))
    .action(withCli(retry));
  jobs
    .command('delete')
    .description('delete a dead job for good')
    .argument('[id]', 'dead job id')
    .option('--all', 'every dead job (with --kind: of that kind)')
    .option('--kind <kind>', 'with --all: only this kind')
    .option(...YES_FLAG)
    .addHelpText(
      'after',
      examples('msgctl jobs delete 42', 'msgctl jobs delete --all --kind webhook.deliver --yes   # in a script'),
    )
    .action(withCli(remove));
}
