import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { Checkpointer } from '../db/checkpointer.js';
import { type Dialect, sql } from '../db/sql.js';
import { Cron } from '../queue/cron.js';
import type { MaintenanceTask } from '../queue/maintenance-task.js';
import type { JobQueue } from '../queue/queue.js';
import type { Worker } from '../queue/worker.js';

// Periodic upkeep. Cron only enqueues a job per task and minute slot (so a restart never runs
// a slot twice); the worker runs it like any other job. Surfaces add their own retention tasks
// to rt.maintenanceTasks before the server starts.

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

/** Expiry of keys that can no longer match anything: the same statements on both stores. */
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

export function startMaintenance(rt: MaintenanceHost, opts: { checkpointer?: Checkpointer } = {}): Maintenance {
  const cron = new Cron({ queue: rt.queue, logger: rt.logger });
  for (const task of [...builtinTasks(rt.ctx.store.dialect, opts.checkpointer), ...rt.maintenanceTasks]) {
    const kind = `maintenance.${task.name}`;
    rt.worker.register(kind, async () => {
      const summary = await task.run(rt);
      rt.logger.info({ task: task.name, summary }, 'maintenance task done');
      return { type: 'ok' };
    });
    cron.schedule(task.name, task.cron, { kind, maxAttempts: 3 });
  }
  cron.start();
  return { cron, stop: () => cron.stop() };
}
