import type { Agent } from 'undici';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import { type Sql, sql } from '../db/sql.js';
import { idFloor } from '../lib/id-time.js';
import type { MaintenanceTask } from '../queue/maintenance-task.js';
import type { JobQueue } from '../queue/queue.js';
import { Worker, type JobLogger } from '../queue/worker.js';
import { createWebhookAgent } from './client.js';
import { registerDelivery } from './deliver.js';
import { Fanout } from './fanout.js';

// Outbound webhooks as one unit for the runtime: fan-out, a worker of their own (so slow
// partner endpoints never take the slots of message dispatch, and webhooksOut.concurrency
// bounds them) and the HTTP agent. Their retention (retentionTask) is a maintenance task on both
// stores.

export interface WebhooksOut {
  worker: Worker;
  fanout: Fanout;
  agent: Agent;
  start(): void;
  stop(): Promise<void>;
}

export interface WebhooksOutOptions {
  ctx: CoreCtx;
  queue: JobQueue;
  config: Config;
  logger: JobLogger & { error(obj: object, msg?: string): void };
  now?: () => number;
  counters?: Counters;
}

export function createWebhooksOut(opts: WebhooksOutOptions): WebhooksOut {
  const { ctx, queue, config, logger } = opts;
  const cfg = config.webhooksOut;
  const agent = createWebhookAgent(cfg);
  // On the queue's store: SQLite's connection (its settles run within the batch's turn), or
  // PostgreSQL's pool (each settle awaited on the batch's Tx).
  const worker = new Worker({
    queue,
    concurrency: cfg.concurrency,
    leaseMs: config.jobs.leaseSeconds * 1000,
    lifelineIntervalMs: config.jobs.lifelineIntervalSeconds * 1000,
    logger,
    now: opts.now,
  });
  registerDelivery(worker, { ctx, agent, config: cfg, logger, counters: opts.counters });
  const fanout = new Fanout({ ctx, queue, logger, firstDelayMs: () => cfg.retryScheduleMs[0] });
  let started = false;
  return {
    worker,
    fanout,
    agent,
    start() {
      if (started) return;
      started = true;
      fanout.start();
      worker.start();
    },
    async stop() {
      await fanout.stop();
      if (started) await worker.stop({ timeoutMs: 10_000 });
      started = false;
      // Requests still in flight belong to jobs the worker already handed back: drop them.
      await agent.destroy();
    },
  };
}

const CHUNK = 5000;

/**
 * Delete in chunks so a large backlog never holds the event loop (or the write lock) for long.
 * `chunk(limit)` is one DELETE of at most `limit` rows.
 */
async function chunked(ctx: CoreCtx, chunk: (limit: number) => Sql): Promise<number> {
  let total = 0;
  for (;;) {
    const n = (await ctx.store.run(chunk(CHUNK))).changes;
    total += n;
    if (n < CHUNK) return total;
    await new Promise((r) => setImmediate(r));
  }
}

/** Deletes attempts, finished deliveries and fanned-out events older than `days` (pending ones stay). */
export function retentionTask(days: number): MaintenanceTask<{ ctx: CoreCtx }> {
  return {
    name: 'webhooks-out-retention',
    cron: '29 4 * * *',
    run: async (rt) => {
      const ctx = rt.ctx;
      const cutoff = ctx.now() - days * 86_400_000;
      const attempts = await chunked(
        ctx,
        (limit) =>
          sql`DELETE FROM webhook_attempts WHERE id IN (SELECT id FROM webhook_attempts WHERE created_at < ${cutoff} LIMIT ${limit})`,
      );
      const dlvFloor = idFloor('dlv', cutoff);
      const deliveries = await chunked(
        ctx,
        (limit) =>
          sql`DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries WHERE id < ${dlvFloor} AND status != 'pending' LIMIT ${limit})`,
      );
      // An event still being delivered is kept whatever its age: its job needs the body.
      const evtFloor = idFloor('evt', cutoff);
      const events = await chunked(
        ctx,
        (limit) =>
          sql`DELETE FROM events WHERE id IN (SELECT id FROM events WHERE id < ${evtFloor} AND fanned_out = 1
               AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = events.id AND d.status = 'pending') LIMIT ${limit})`,
      );
      return { attempts, deliveries, events };
    },
  };
}
