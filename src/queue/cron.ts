import { createTask, validateDetailed, type ScheduledTask } from 'node-cron';
import type { Row } from '../db/rows.js';
import type { jobs } from '../db/schema.js';
import { sql } from '../db/sql.js';
import { invalid } from '../lib/errors.js';
import type { EnqueueSpec, JobQueue } from './queue.js';
import type { JobLogger } from './worker.js';
import { iso } from '../lib/time.js';

// Cron only enqueues. The slot is claimed in `cron_runs` (INSERT … ON CONFLICT DO NOTHING on
// name + slot) in the same store transaction as the enqueue, so two processes (on one SQLite
// file, or several instances on one PostgreSQL), or a restart inside the same minute, never
// run one slot twice. The jobs table alone could not promise that: done jobs
// are deleted, which frees their unique key. Slots missed while no process ran are skipped.

/** The job one slot enqueues: fixed, or built from the slot time. */
export type CronTask = Omit<EnqueueSpec, 'uniqueKey'> | ((slot: Date) => Omit<EnqueueSpec, 'uniqueKey'>);

export interface CronOptions {
  /** The queue the slots' jobs go to; its store holds cron_runs too. */
  queue: JobQueue;
  logger?: JobLogger;
  /** IANA zone the expressions are read in; default the process's zone. */
  timezone?: string;
  /** cron_runs rows older than this are pruned; they only matter around their slot. Default 2 days. */
  keepRunsMs?: number;
  now?: () => number;
}

export interface CronFireResult {
  /** cron_runs key: "<name>:<slot ISO>"; the job's unique key is "cron:" + this. */
  key: string;
  created: boolean;
  id: number | null;
}

interface Entry {
  name: string;
  expression: string;
  task: CronTask;
  timezone?: string;
  scheduled: ScheduledTask | null;
}

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/i;

export class Cron {
  private readonly queue: JobQueue;
  private readonly logger?: JobLogger;
  private readonly timezone?: string;
  private readonly keepRunsMs: number;
  private readonly now: () => number;
  private readonly entries = new Map<string, Entry>();
  private running = false;

  constructor(opts: CronOptions) {
    this.queue = opts.queue;
    this.logger = opts.logger;
    this.timezone = opts.timezone;
    this.keepRunsMs = opts.keepRunsMs ?? 2 * 86_400_000;
    this.now = opts.now ?? Date.now;
  }

  /** Register a task. Throws a clear error on a bad name or expression. */
  schedule(name: string, expression: string, task: CronTask, opts: { timezone?: string } = {}): this {
    if (!NAME.test(name)) throw invalid(`cron task name "${name}" must be 1-64 letters, digits, '.', '_' or '-'`);
    if (this.entries.has(name)) throw invalid(`cron task "${name}" is already scheduled`);
    const check = validateDetailed(expression);
    if (!check.valid) {
      const why = check.errors.map((e) => e.message).join('; ');
      throw invalid(`invalid cron expression "${expression}" for task "${name}": ${why}`, [
        { field: 'expression', message: why },
      ]);
    }
    const entry: Entry = { name, expression, task, timezone: opts.timezone ?? this.timezone, scheduled: null };
    this.entries.set(name, entry);
    if (this.running) this.arm(entry);
    return this;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    for (const e of this.entries.values()) this.arm(e);
  }

  stop(): void {
    this.running = false;
    for (const e of this.entries.values()) {
      // destroy, not just stop: node-cron keeps a process-wide registry of tasks.
      void Promise.resolve(e.scheduled?.destroy()).catch(() => {});
      e.scheduled = null;
    }
  }

  /** The next time each task fires, for status displays. */
  nextRuns(): { name: string; expression: string; next: Date | null }[] {
    return [...this.entries.values()].map((e) => ({
      name: e.name,
      expression: e.expression,
      next: e.scheduled?.getNextRun() ?? null,
    }));
  }

  /**
   * Enqueue the job of one slot, at most once across every process on this database.
   * `created` is false when the slot was already taken; `id` is then the job if it still exists.
   */
  async fire(name: string, slot: Date): Promise<CronFireResult> {
    const entry = this.entries.get(name);
    if (!entry) throw invalid(`no cron task named "${name}"`);
    // Whole seconds: node-cron's slot dates carry none, but a manual call might.
    const slotIso = iso(Math.floor(slot.getTime() / 1000) * 1000);
    const key = `${name}:${slotIso}`;
    const now = this.now();
    // Built before the transaction: a task function is the caller's code, not a statement.
    const spec = typeof entry.task === 'function' ? entry.task(new Date(slotIso)) : entry.task;
    return this.queue.store.transaction(async (tx) => {
      // Keys are "name:ISO" and ISO sorts as time, so one name's old slots are a key range on
      // the primary key (names cannot hold ':', so "a" never matches "a-b:…").
      await tx.run(
        sql`DELETE FROM cron_runs WHERE key > ${`${name}:`} AND key < ${`${name}:${iso(now - this.keepRunsMs)}`}`,
      );
      const claimed = await tx.run(
        sql`INSERT INTO cron_runs (key, created_at) VALUES (${key}, ${now}) ON CONFLICT (key) DO NOTHING`,
      );
      if (claimed.changes === 0) {
        const job = await tx.get<Pick<Row<typeof jobs>, 'id'>>(
          sql`SELECT id FROM jobs WHERE unique_key = ${`cron:${key}`}`,
        );
        return { id: job ? Number(job.id) : null, created: false, key };
      }
      const res = await this.queue.enqueue(tx, { ...spec, uniqueKey: `cron:${key}` }, now);
      return { ...res, key };
    });
  }

  private arm(entry: Entry) {
    const task = createTask(
      entry.expression,
      async (ctx) => {
        try {
          const r = await this.fire(entry.name, ctx.date);
          if (r.created) this.logger?.info({ task: entry.name, slot: r.key, jobId: r.id }, 'cron slot enqueued');
        } catch (err) {
          this.logger?.error({ task: entry.name, err }, 'cron slot could not be enqueued');
        }
      },
      { name: `msgd:${entry.name}`, timezone: entry.timezone, suppressMissedWarning: true },
    );
    // A missed slot means the event loop was blocked past node-cron's tolerance; say so in our log.
    task.on('execution:missed', (ctx) =>
      this.logger?.warn({ task: entry.name, slot: iso(ctx.date.getTime()) }, 'cron slot missed: event loop blocked'),
    );
    entry.scheduled = task;
    void Promise.resolve(task.start()).catch((err) =>
      this.logger?.error({ task: entry.name, err }, 'cron task failed to start'),
    );
  }
}
