import type { events as eventsTable, webhookEndpoints } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { indexedBy, inList, skipLocked } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';
import type { CoreCtx } from '../core/context.js';
import { outboxSignal } from '../core/events.js';
import { FailureLog } from '../lib/failure-log.js';
import type { JobQueue } from '../queue/queue.js';
import { createDeliveries, type NewDelivery } from './store.js';

// Outbox → deliveries. A batch of pending events becomes, in one store transaction, a delivery
// row and a job per subscribed enabled endpoint of each event's partner, and is marked fanned
// out. Woken by the in-process outbox signal right after the causing commit; a slow sweep
// catches events written by other processes and anything left by a crash between commit and
// fan-out. A batch is a fixed number of statements whatever its size, plus one enqueue per
// delivery: the events, their partners' endpoints, the deliveries, the marks. On PostgreSQL
// two fan-outs at once (two msgd) take disjoint events (SKIP LOCKED); a delivery exists once
// per event and endpoint in any case (its unique index), and only the one that made it
// enqueues its job.

const BATCH = 2000;

type PendingEvent = Pick<Row<typeof eventsTable>, 'id' | 'partner_id' | 'type'>;

export interface FanoutLogger {
  error(obj: object, msg?: string): void;
  /** The line saying fan-outs succeed again after failing. */
  info?(obj: object, msg?: string): void;
}

const noop = () => {};

export class Fanout {
  private scheduled = false;
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  /** The drain under way, if any; a wake meanwhile makes it run another batch. */
  private draining: Promise<void> | null = null;
  /**
   * A fan-out that keeps failing (the database unreachable) fails on every sweep: its first
   * failure is logged with its error, then one line per interval with the count, and one when
   * a batch commits again.
   */
  private readonly failures: FailureLog;

  constructor(
    private readonly deps: {
      ctx: CoreCtx;
      queue: JobQueue;
      firstDelayMs: () => number;
      logger: FanoutLogger;
      sweepMs?: number;
      /** How often a spell of failures is summed up in one line (default 15 s). */
      failureLogIntervalMs?: number;
    },
  ) {
    const { logger } = deps;
    this.failures = new FailureLog(
      { info: (o, m) => (logger.info ?? noop).call(logger, o, m), error: (o, m) => logger.error(o, m) },
      { what: 'webhook fan-outs', level: 'error', intervalMs: deps.failureLogIntervalMs },
    );
  }

  /** Fan out up to `limit` pending events, in one transaction; resolves with how many were handled. */
  runOnce(limit = BATCH): Promise<number> {
    return this.deps.ctx.store.transaction((tx) => this.batch(tx, limit));
  }

  start() {
    if (this.running) return;
    this.running = true;
    outboxSignal.on('event', this.wake);
    this.timer = setInterval(this.wake, this.deps.sweepMs ?? 1000);
    this.timer.unref();
    this.wake();
  }

  /** Stops waking; resolves once a batch under way has committed. */
  async stop(): Promise<void> {
    this.running = false;
    outboxSignal.off('event', this.wake);
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.draining;
  }

  private readonly wake = () => {
    if (this.scheduled || !this.running) return;
    this.scheduled = true;
    if (!this.draining) setImmediate(this.drain);
  };

  private readonly drain = () => {
    this.draining ??= this.drainLoop().finally(() => {
      this.draining = null;
      // Woken after the loop's last look: go again.
      if (this.scheduled && this.running) setImmediate(this.drain);
    });
  };

  private async drainLoop(): Promise<void> {
    try {
      while (this.scheduled && this.running) {
        this.scheduled = false;
        // A full batch means more may wait: go on (each batch its own transaction, requests in between).
        if ((await this.runOnce()) === BATCH) this.scheduled = true;
        this.failures.success('fanout');
      }
    } catch (err) {
      this.scheduled = false;
      this.failures.failure('fanout', errorCode(err), { err }, 'webhook fan-out failed; the sweep will retry');
    }
  }

  private async batch(tx: Queryable, limit: number): Promise<number> {
    const { ctx, queue } = this.deps;
    const dialect = ctx.store.dialect;
    const events = await tx.all<PendingEvent>(
      sql`SELECT id, partner_id, type FROM events ${indexedBy(dialect, 'events_pending')}
           WHERE fanned_out = 0 LIMIT ${limit} ${skipLocked(dialect)}`,
    );
    if (events.length === 0) return 0;
    const partnerIds = [...new Set(events.map((e) => e.partner_id))];
    const endpoints = await tx.all<Pick<Row<typeof webhookEndpoints>, 'id' | 'partner_id' | 'events'>>(
      sql`SELECT id, partner_id, events FROM webhook_endpoints
           WHERE ${inList(dialect, 'partner_id', partnerIds)} AND status = 'enabled' AND deleted_at IS NULL
           ORDER BY id`,
    );
    const subs = new Map<string, { id: string; types: Set<string> | null }[]>();
    for (const e of endpoints) {
      let list = subs.get(e.partner_id);
      if (!list) subs.set(e.partner_id, (list = []));
      list.push({ id: e.id, types: e.events === null ? null : new Set(JSON.parse(e.events) as string[]) });
    }
    const deliveries: NewDelivery[] = [];
    for (const ev of events) {
      // Test events are addressed to one endpoint when created; they are never broadcast.
      if (ev.type === 'webhook.test') continue;
      for (const s of subs.get(ev.partner_id) ?? []) {
        if (s.types === null || s.types.has(ev.type)) {
          deliveries.push({ eventId: ev.id, endpointId: s.id, partnerId: ev.partner_id });
        }
      }
    }
    await createDeliveries(ctx, tx, queue, deliveries, ctx.now() + this.deps.firstDelayMs());
    await tx.run(
      sql`UPDATE events SET fanned_out = 1 WHERE ${inList(
        dialect,
        'id',
        events.map((e) => e.id),
      )}`,
    );
    return events.length;
  }
}

const errorCode = (err: unknown): string =>
  String((err as { code?: unknown } | null)?.code ?? (err instanceof Error ? err.name : 'Error'));
