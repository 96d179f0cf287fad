import type { events as eventsTable } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { inList } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';
import type { CoreCtx } from '../core/context.js';
import { type EndpointRow, subscribedTo } from '../core/endpoints.js';
import { emitEventIn } from '../core/events.js';
import { AppError, notFound } from '../lib/errors.js';
import { idFloor } from '../lib/id-time.js';
import type { JobQueue } from '../queue/queue.js';
import { createDeliveries, type DeliveryRow, type NewDelivery, restartDelivery } from './store.js';

// Deliveries made by hand: the partner's test event to one endpoint, and the operator's
// replay of past events. Both run in one store transaction and enqueue jobs the running msgd
// picks up (from another process, msgctl, within its worker's idle poll).

/** A webhook.test event addressed to this endpoint only. */
export async function sendTestEvent(
  ctx: CoreCtx,
  queue: JobQueue,
  endpoint: EndpointRow,
): Promise<{ eventId: string; deliveryId: string }> {
  return ctx.store.transaction(async (tx) => {
    const ev = await emitEventIn(tx, ctx, endpoint.partner_id, 'webhook.test', {
      endpoint_id: endpoint.id,
      message: 'This is a test event from msgd. Verify its signature and answer 2xx.',
    });
    // Already addressed: the fan-out must not broadcast it.
    await tx.run(sql`UPDATE events SET fanned_out = 1 WHERE id = ${ev.id}`);
    const [d] = await createDeliveries(
      ctx,
      tx,
      queue,
      [{ eventId: ev.id, endpointId: endpoint.id, partnerId: endpoint.partner_id }],
      ctx.now(),
    );
    return { eventId: ev.id, deliveryId: d.id };
  });
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
 * only to the endpoint it was addressed to). Receivers see the same webhook-id again. The
 * endpoints and the deliveries there are are read for all the events at once, the new
 * deliveries made in one statement; each restart is one conditional write.
 */
async function replay(
  ctx: CoreCtx,
  tx: Queryable,
  queue: JobQueue,
  events: EventRow[],
  opts: { endpointId?: string },
): Promise<ReplayReport> {
  const report: ReplayReport = { events: events.length, queued: [], pending: [] };
  if (events.length === 0) return report;
  const dialect = ctx.store.dialect;
  const now = ctx.now();
  const endpoints = new Map<string, EndpointRow[]>();
  const live = await tx.all<EndpointRow>(
    sql`SELECT * FROM webhook_endpoints
         WHERE ${inList(dialect, 'partner_id', [...new Set(events.map((e) => e.partner_id))])}
           AND status = 'enabled' AND deleted_at IS NULL ORDER BY id`,
  );
  for (const ep of live) {
    if (opts.endpointId && ep.id !== opts.endpointId) continue;
    const list = endpoints.get(ep.partner_id);
    if (list) list.push(ep);
    else endpoints.set(ep.partner_id, [ep]);
  }
  const existing = new Map<string, Pick<DeliveryRow, 'id'>>();
  const had = await tx.all<Pick<DeliveryRow, 'id' | 'event_id' | 'endpoint_id'>>(
    sql`SELECT id, event_id, endpoint_id FROM webhook_deliveries WHERE ${inList(
      dialect,
      'event_id',
      events.map((e) => e.id),
    )}`,
  );
  for (const d of had) existing.set(`${d.event_id} ${d.endpoint_id}`, d);

  const fresh: NewDelivery[] = [];
  for (const ev of events) {
    for (const ep of endpoints.get(ev.partner_id) ?? []) {
      const d = existing.get(`${ev.id} ${ep.id}`);
      if (ev.type === 'webhook.test' ? !d : !subscribedTo(ep, ev.type)) continue;
      if (!d) {
        fresh.push({ eventId: ev.id, endpointId: ep.id, partnerId: ev.partner_id });
        continue;
      }
      const entry = { event_id: ev.id, endpoint_id: ep.id, delivery_id: d.id };
      if ((await restartDelivery(ctx, tx, queue, d.id, now)) === 'pending') report.pending.push(entry);
      else report.queued.push({ ...entry, kind: 'restarted' });
    }
  }
  const made = new Map(
    (await createDeliveries(ctx, tx, queue, fresh, now)).map((d) => [`${d.event_id} ${d.endpoint_id}`, d.id]),
  );
  for (const f of fresh) {
    const id = made.get(`${f.eventId} ${f.endpointId}`);
    if (id !== undefined) {
      report.queued.push({ event_id: f.eventId, endpoint_id: f.endpointId, delivery_id: id, kind: 'new' });
      continue;
    }
    // Made a moment ago by a fan-out or replay in another transaction, with its job: pending.
    const d = await tx.get<Pick<DeliveryRow, 'id'>>(
      sql`SELECT id FROM webhook_deliveries WHERE event_id = ${f.eventId} AND endpoint_id = ${f.endpointId}`,
    );
    report.pending.push({ event_id: f.eventId, endpoint_id: f.endpointId, delivery_id: d!.id });
  }
  return report;
}

export async function replayEvent(
  ctx: CoreCtx,
  queue: JobQueue,
  eventId: string,
  opts: { endpointId?: string } = {},
): Promise<ReplayReport> {
  return ctx.store.transaction(async (tx) => {
    const ev = await tx.get<EventRow>(sql`SELECT id, partner_id, type FROM events WHERE id = ${eventId}`);
    if (!ev) throw notFound('event', eventId);
    return replay(ctx, tx, queue, [ev], opts);
  });
}

export const MAX_REPLAY_EVENTS = 100_000;

export async function replaySince(
  ctx: CoreCtx,
  queue: JobQueue,
  since: number,
  opts: { partnerId?: string; endpointId?: string } = {},
): Promise<ReplayReport> {
  return ctx.store.transaction(async (tx) => {
    const events = await tx.all<EventRow>(
      sql`SELECT id, partner_id, type FROM events WHERE id >= ${idFloor('evt', since)} AND created_at >= ${since}
           ${opts.partnerId === undefined ? sql.raw('') : sql`AND partner_id = ${opts.partnerId}`}
           ORDER BY id LIMIT ${MAX_REPLAY_EVENTS + 1}`,
    );
    if (events.length > MAX_REPLAY_EVENTS) {
      throw new AppError(
        'invalid_request',
        `more than ${MAX_REPLAY_EVENTS} events since then; narrow it with a later --since or --partner`,
      );
    }
    return replay(ctx, tx, queue, events, opts);
  });
}
