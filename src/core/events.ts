import type { webhookEndpoints } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { EventEmitter } from 'node:events';
import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { newId } from '../lib/ids.js';
import type { CoreCtx } from './context.js';
import { subscribedTo } from './endpoints.js';
import type { EventType } from './event-types.js';
import { iso } from '../lib/time.js';

export { EVENT_TYPES, type EventType } from './event-types.js';

// The outbox. An event is written in the same transaction as the change that causes it;
// src/webhooks fans it out to the partner's endpoints afterwards. The payload stored is
// the exact JSON body endpoints receive.

/** In-process signal that the outbox has new rows (wakes the fan-out without polling). */
export const outboxSignal = new EventEmitter();
outboxSignal.setMaxListeners(100);
let signalPending = false;

export interface EmittedEvent {
  id: string;
  type: EventType;
  payload: Record<string, unknown>;
}

export function emitEvent(
  ctx: CoreCtx,
  partnerId: string,
  type: EventType,
  data: Record<string, unknown>,
): EmittedEvent {
  const id = newId('evt');
  const now = ctx.now();
  const payload = { id, event: type, created_at: iso(now), ...data };
  // An event no enabled endpoint subscribes to is stored already fanned out: kept for replay
  // (after an endpoint is enabled or subscribes), but the fan-out has nothing to do for it.
  const pending = type === 'webhook.test' || hasSubscriber(ctx, partnerId, type);
  stmt(
    ctx.db.sqlite,
    `INSERT INTO events (id, partner_id, type, payload, fanned_out, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
  ).run(id, partnerId, type, JSON.stringify(payload), pending ? 0 : 1, now);
  if (!pending) return { id, type, payload };
  // Signal after the current synchronous work (and so after the caller's commit).
  if (!signalPending) {
    signalPending = true;
    setImmediate(() => {
      signalPending = false;
      outboxSignal.emit('event');
    });
  }
  return { id, type, payload };
}

/**
 * emitEvent() through the store: in `q`, the caller's transaction (or the store itself). The
 * same row and payload, and the same wake-up of the fan-out in the next event-loop turn: after
 * the commit on SQLite, whose transaction runs to COMMIT within its turn; on PostgreSQL it may
 * come before the commit, and the fan-out's sweep (src/webhooks-out/fanout.ts) finds the event.
 */
export async function emitEventIn(
  q: Queryable,
  ctx: CoreCtx,
  partnerId: string,
  type: EventType,
  data: Record<string, unknown>,
): Promise<EmittedEvent> {
  const id = newId('evt');
  const now = ctx.now();
  const payload = { id, event: type, created_at: iso(now), ...data };
  const endpoints = await q.all<Pick<Row<typeof webhookEndpoints>, 'events'>>(
    sql`SELECT events FROM webhook_endpoints WHERE partner_id = ${partnerId} AND status = 'enabled' AND deleted_at IS NULL`,
  );
  const pending = type === 'webhook.test' || anySubscribed(endpoints, type);
  await q.run(
    sql`INSERT INTO events (id, partner_id, type, payload, fanned_out, created_at)
        VALUES (${id}, ${partnerId}, ${type}, ${JSON.stringify(payload)}, ${pending ? 0 : 1}, ${now})`,
  );
  if (pending && !signalPending) {
    signalPending = true;
    setImmediate(() => {
      signalPending = false;
      outboxSignal.emit('event');
    });
  }
  return { id, type, payload };
}

/** Whether an enabled endpoint of the partner takes events of this type (subscribedTo, as replay uses). */
function hasSubscriber(ctx: CoreCtx, partnerId: string, type: EventType): boolean {
  const rows = stmt<[string], Pick<Row<typeof webhookEndpoints>, 'events'>>(
    ctx.db.sqlite,
    `SELECT events FROM webhook_endpoints WHERE partner_id = ? AND status = 'enabled' AND deleted_at IS NULL`,
  ).all(partnerId);
  return anySubscribed(rows, type);
}

function anySubscribed(rows: Pick<Row<typeof webhookEndpoints>, 'events'>[], type: EventType): boolean {
  return rows.some((r) => {
    try {
      return subscribedTo(r, type);
    } catch {
      return true; // an unreadable list must not fail the change that emits: the fan-out decides
    }
  });
}
