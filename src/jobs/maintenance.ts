import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import { pruneLoginAudit, redactOldContent } from '../core/retention.js';
import type { Checkpointer } from '../db/checkpointer.js';
import { type Dialect, sql } from '../db/sql.js';
import { Cron } from '../queue/cron.js';
import type { MaintenanceTask } from '../queue/maintenance-task.js';
import type { JobQueue } from '../queue/queue.js';
import type { Worker } from '../queue/worker.js';

// Periodic upkeep. Cron only enqueues a job per task and minute slot, claimed once in the
// database (so a restart, or several msgd on one PostgreSQL, never run a slot twice); the
// worker runs it like any other job, retried as the queue retries. Surfaces add their own
// retention tasks to rt.maintenanceTasks before the server starts.

/** What a task may use: the database, the config and the log. */
export interface MaintenanceDeps {
  ctx: CoreCtx;
  config: Config;
  logger: Logger;
}

/** What scheduling the tasks needs: the runtime passes itself. */
export interface MaintenanceHost extends MaintenanceDeps {
  queue: JobQueue;
  worker: Worker;
  maintenanceTasks: MaintenanceTask<MaintenanceDeps>[];
}

export interface Maintenance {
  cron: Cron;
  stop(): void;
}

export function builtinTasks(dialect: Dialect, checkpointer?: Checkpointer): MaintenanceTask<MaintenanceDeps>[] {
  return [...commonTasks(), ...(dialect === 'sqlite' ? sqliteTasks(checkpointer) : [])];
}

/** Retention and expiry of keys that can no longer match anything: the same statements on both stores. */
function commonTasks(): MaintenanceTask<MaintenanceDeps>[] {
  return [
    {
      name: 'idempotency-expire',
      cron: '17 * * * *',
      run: async (rt) => {
        const cutoff = rt.ctx.now() - rt.config.idempotency.ttlHours * 3_600_000;
        const { changes } = await rt.ctx.store.run(sql`DELETE FROM idempotency_keys WHERE created_at < ${cutoff}`);
        return { deleted: changes };
      },
    },
    retentionTask(),
    {
      name: 'provider-event-keys-expire',
      cron: '23 * * * *',
      // Providers retry for up to 7 days (Meta); keys older than that can no longer dedupe anything.
      run: async (rt) => {
        const cutoff = rt.ctx.now() - 8 * 86_400_000;
        const { changes } = await rt.ctx.store.run(sql`DELETE FROM provider_event_keys WHERE created_at < ${cutoff}`);
        return { deleted: changes };
      },
    },
  ];
}

/** Hourly, so each run has about an hour of messages to redact: small batches, never a backlog. */
function retentionTask(): MaintenanceTask<MaintenanceDeps> {
  return {
    name: 'retention',
    cron: '53 * * * *',
    run: async (rt) => {
      const { messageContentDays, loginAuditDays } = rt.config.retention;
      const content = messageContentDays === null ? null : await redactOldContent(rt.ctx, messageContentDays);
      const logins = await pruneLoginAudit(rt.ctx, loginAuditDays);
      return { content, loginAuditDeleted: logins };
    },
  };
}

/** SQLite's own upkeep: PostgreSQL's autovacuum keeps its statistics and files itself. */
function sqliteTasks(checkpointer?: Checkpointer): MaintenanceTask<MaintenanceDeps>[] {
  return [
    {
      name: 'sqlite-optimize',
      cron: '41 3 * * *',
      run: (rt) => {
        checkpointer?.truncate();
        rt.ctx.db.sqlite.pragma('optimize');
        return { ok: true };
      },
    },
  ];
}

/** Runs of one slot's job before it is dead (msgctl jobs dead lists it). */
export const MAINTENANCE_ATTEMPTS = 3;

/** The job kind a task's slots are enqueued as. */
export const maintenanceKind = (task: string) => `maintenance.${task}`;

/**
 * Registers each task's job kind on the worker and starts the cron that enqueues their slots.
 * Every msgd on one store does so: whichever claims a slot first enqueues it, and any worker
 * runs the job.
 */
export function startMaintenance(rt: MaintenanceHost, opts: { checkpointer?: Checkpointer } = {}): Maintenance {
  const { dialect } = rt.ctx.store;
  if (dialect === 'postgres') {
    rt.logger.info(
      { sqliteOnlyTasks: sqliteTasks().map((t) => t.name) },
      "SQLite's own upkeep (WAL checkpoints, optimize, scheduled backups) does not run on PostgreSQL: its autovacuum keeps the database",
    );
  }
  const cron = new Cron({ queue: rt.queue, logger: rt.logger });
  for (const task of [...builtinTasks(dialect, opts.checkpointer), ...rt.maintenanceTasks]) {
    const kind = maintenanceKind(task.name);
    rt.worker.register(kind, async (job) => {
      let summary: unknown;
      try {
        summary = await task.run(rt);
      } catch (err) {
        // The queue retries it (backoff, MAINTENANCE_ATTEMPTS in all); out of attempts it is dead.
        rt.logger.warn(
          { task: task.name, jobId: job.id, attempt: job.attempts, maxAttempts: job.maxAttempts, err },
          'maintenance task failed',
        );
        throw err;
      }
      rt.logger.info({ task: task.name, summary }, 'maintenance task done');
      return { type: 'ok' };
    });
    cron.schedule(task.name, task.cron, { kind, maxAttempts: MAINTENANCE_ATTEMPTS });
  }
  cron.start();
  return { cron, stop: () => cron.stop() };
}
