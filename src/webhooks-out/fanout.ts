import type { events as eventsTable, webhookEndpoints } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { stmt } from '../db/stmt.js';
import type { CoreCtx } from '../core/context.js';
import { outboxSignal } from '../core/events.js';
import type { JobQueue } from '../queue/queue.js';
import { createDelivery } from './store.js';

// Outbox → deliveries. Each pending event becomes, in one transaction, a delivery row and a
// job per subscribed enabled endpoint of its partner, and is marked fanned out. Woken by the
// in-process outbox signal right after the causing commit; a slow sweep catches events
// written by other processes and anything left by a crash between commit and fan-out.

const BATCH = 2000;

interface Sub {
  id: string;
  /** null = every event type. */
  types: Set<string> | null;
}

export interface FanoutLogger {
  error(obj: object, msg?: string): void;
}

export class Fanout {
  private scheduled = false;
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private readonly run: (limit: number) => number;

  constructor(
    private readonly deps: {
      ctx: CoreCtx;
      queue: JobQueue;
      firstDelayMs: () => number;
      logger: FanoutLogger;
      sweepMs?: number;
    },
  ) {
    this.run = deps.ctx.db.sqlite.transaction((limit: number) => this.batch(limit)).immediate as (
      limit: number,
    ) => number;
  }

  /** Fan out up to `limit` pending events; returns how many were handled. */
  runOnce(limit = BATCH): number {
    return this.run(limit);
  }

  start() {
    if (this.running) return;
    this.running = true;
    outboxSignal.on('event', this.wake);
    this.timer = setInterval(this.wake, this.deps.sweepMs ?? 1000);
    this.timer.unref();
    this.wake();
  }

  stop() {
    this.running = false;
    outboxSignal.off('event', this.wake);
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private readonly wake = () => {
    if (this.scheduled || !this.running) return;
    this.scheduled = true;
    setImmediate(this.drain);
  };

  private readonly drain = () => {
    this.scheduled = false;
    if (!this.running) return;
    try {
      // A full batch means more may wait: continue on the next turn, letting requests in between.
      if (this.runOnce() === BATCH) this.wake();
    } catch (err) {
      this.deps.logger.error({ err }, 'webhook fan-out failed; the sweep will retry');
    }
  };

  private batch(limit: number): number {
    const { ctx, queue } = this.deps;
    const db = ctx.db.sqlite;
    const events = stmt<[number], Pick<Row<typeof eventsTable>, 'id' | 'partner_id' | 'type'>>(
      db,
      'SELECT id, partner_id, type FROM events INDEXED BY events_pending WHERE fanned_out = 0 LIMIT ?',
    ).all(limit);
    if (events.length === 0) return 0;
    const subs = new Map<string, Sub[]>();
    const endpointsOf = stmt<[string], Pick<Row<typeof webhookEndpoints>, 'id' | 'events'>>(
      db,
      `SELECT id, events FROM webhook_endpoints WHERE partner_id = ? AND status = 'enabled' AND deleted_at IS NULL`,
    );
    const mark = stmt(db, 'UPDATE events SET fanned_out = 1 WHERE id = ?');
    const runAt = ctx.now() + this.deps.firstDelayMs();
    for (const ev of events) {
      let list = subs.get(ev.partner_id);
      if (!list) {
        list = endpointsOf.all(ev.partner_id).map((e) => ({
          id: e.id,
          types: e.events === null ? null : new Set(JSON.parse(e.events) as string[]),
        }));
        subs.set(ev.partner_id, list);
      }
      // Test events are addressed to one endpoint when created; they are never broadcast.
      if (ev.type !== 'webhook.test') {
        for (const s of list) {
          if (s.types === null || s.types.has(ev.type)) {
            createDelivery(ctx, queue, { eventId: ev.id, endpointId: s.id, partnerId: ev.partner_id, runAt });
          }
        }
      }
      mark.run(ev.id);
    }
    return events.length;
  }
}
