import type { events as eventsTable } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { stmt } from '../db/stmt.js';
import type { CoreCtx } from '../core/context.js';
import { type EndpointRow, subscribedTo } from '../core/endpoints.js';
import { emitEvent } from '../core/events.js';
import { AppError, notFound } from '../lib/errors.js';
import { idFloor } from '../lib/id-time.js';
import type { JobQueue } from '../queue/queue.js';
import { createDelivery, restartDelivery, type DeliveryRow } from './store.js';

// Deliveries made by hand: the partner's test event to one endpoint, and the operator's
// replay of past events. Both run in one transaction and enqueue jobs the running msgd
// picks up (from another process, msgctl, within its worker's idle poll).

/** A webhook.test event addressed to this endpoint only. */
export function sendTestEvent(
  ctx: CoreCtx,
  queue: JobQueue,
  endpoint: EndpointRow,
): { eventId: string; deliveryId: string } {
  return ctx.db.sqlite
    .transaction(() => {
      const ev = emitEvent(ctx, endpoint.partner_id, 'webhook.test', {
        endpoint_id: endpoint.id,
        message: 'This is a test event from msgd. Verify its signature and answer 2xx.',
      });
      // Already addressed: the fan-out must not broadcast it.
      stmt(ctx.db.sqlite, 'UPDATE events SET fanned_out = 1 WHERE id = ?').run(ev.id);
      const deliveryId = createDelivery(ctx, queue, {
        eventId: ev.id,
        endpointId: endpoint.id,
        partnerId: endpoint.partner_id,
        runAt: ctx.now(),
      })!;
      return { eventId: ev.id, deliveryId };
    })
    .immediate();
}

export interface ReplayReport {
  events: number;
  /** New deliveries (endpoints that had none for the event) plus finished ones restarted. */
  queued: { event_id: string; endpoint_id: string; delivery_id: string; kind: 'new' | 'restarted' }[];
  /** Deliveries still being retried: left to their schedule. */
  pending: { event_id: string; endpoint_id: string; delivery_id: string }[];
}

type EventRow = Pick<Row<typeof eventsTable>, 'id' | 'partner_id' | 'type'>;

/**
 * Send events again to the partner's enabled endpoints that subscribe to them (a test event
 * only to the endpoint it was addressed to). Receivers see the same webhook-id again.
 */
function replay(ctx: CoreCtx, queue: JobQueue, events: EventRow[], opts: { endpointId?: string }): ReplayReport {
  const db = ctx.db.sqlite;
  const report: ReplayReport = { events: events.length, queued: [], pending: [] };
  const endpoints = new Map<string, EndpointRow[]>();
  const now = ctx.now();
  for (const ev of events) {
    let eps = endpoints.get(ev.partner_id);
    if (!eps) {
      eps = stmt<[string], EndpointRow>(
        db,
        `SELECT * FROM webhook_endpoints WHERE partner_id = ? AND status = 'enabled' AND deleted_at IS NULL ORDER BY id`,
      ).all(ev.partner_id);
      endpoints.set(ev.partner_id, eps);
    }
    const existing = new Map(
      stmt<[string], DeliveryRow>(db, 'SELECT * FROM webhook_deliveries WHERE event_id = ?')
        .all(ev.id)
        .map((d) => [d.endpoint_id, d]),
    );
    for (const ep of eps) {
      if (opts.endpointId && ep.id !== opts.endpointId) continue;
      const d = existing.get(ep.id);
      if (ev.type === 'webhook.test' ? !d : !subscribedTo(ep, ev.type)) continue;
      if (d) {
        if (restartDelivery(ctx, queue, d, now) === 'pending')
          report.pending.push({ event_id: ev.id, endpoint_id: ep.id, delivery_id: d.id });
        else report.queued.push({ event_id: ev.id, endpoint_id: ep.id, delivery_id: d.id, kind: 'restarted' });
      } else {
        const id = createDelivery(ctx, queue, {
          eventId: ev.id,
          endpointId: ep.id,
          partnerId: ev.partner_id,
          runAt: now,
        })!;
        report.queued.push({ event_id: ev.id, endpoint_id: ep.id, delivery_id: id, kind: 'new' });
      }
    }
  }
  return report;
}

export function replayEvent(
  ctx: CoreCtx,
  queue: JobQueue,
  eventId: string,
  opts: { endpointId?: string } = {},
): ReplayReport {
  return ctx.db.sqlite
    .transaction(() => {
      const ev = stmt<[string], EventRow>(ctx.db.sqlite, 'SELECT id, partner_id, type FROM events WHERE id = ?').get(
        eventId,
      );
      if (!ev) throw notFound('event', eventId);
      return replay(ctx, queue, [ev], opts);
    })
    .immediate();
}

export const MAX_REPLAY_EVENTS = 100_000;

export function replaySince(
  ctx: CoreCtx,
  queue: JobQueue,
  since: number,
  opts: { partnerId?: string; endpointId?: string } = {},
): ReplayReport {
  return ctx.db.sqlite
    .transaction(() => {
      const events = stmt<[{ floor: string; since: number; p: string | null }], EventRow>(
        ctx.db.sqlite,
        `SELECT id, partner_id, type FROM events WHERE id >= @floor AND created_at >= @since AND (@p IS NULL OR partner_id = @p)
          ORDER BY id LIMIT ${MAX_REPLAY_EVENTS + 1}`,
      ).all({ floor: idFloor('evt', since), since, p: opts.partnerId ?? null });
      if (events.length > MAX_REPLAY_EVENTS) {
        throw new AppError(
          'invalid_request',
          `more than ${MAX_REPLAY_EVENTS} events since then; narrow it with a later --since or --partner`,
        );
      }
      return replay(ctx, queue, events, opts);
    })
    .immediate();
}
