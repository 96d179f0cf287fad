import type { events, partners, webhookAttempts, webhookDeliveries, webhookEndpoints } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { indexedBy, inList, textRows } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import { type Dialect, type Sql, sql } from '../db/sql.js';
import type { CoreCtx } from '../core/context.js';
import type { EndpointRow } from '../core/endpoints.js';
import { newId } from '../lib/ids.js';
import type { JobQueue } from '../queue/queue.js';

// Deliveries and their attempt log. A delivery is one event for one endpoint; its job
// carries the delivery id and the attempt count the current run started from (a replay
// starts a fresh schedule without renumbering the attempt log).

export const DELIVERY_JOB = 'webhook.deliver';
/** Never reached in practice: the handler ends a delivery by the schedule, not the queue. */
export const DELIVERY_MAX_ATTEMPTS = 1000;

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'dead' | 'cancelled';

export interface DeliveryPayload {
  /** Delivery id. */
  d: string;
  /** delivery.attempts when this run (first try or replay) began. */
  b: number;
}

export type DeliveryRow = Row<typeof webhookDeliveries>;

export type AttemptRow = Row<typeof webhookAttempts>;

/** A delivery to make: one event for one endpoint of its partner. */
export interface NewDelivery {
  eventId: string;
  endpointId: string;
  partnerId: string;
}

export type CreatedDelivery = Pick<DeliveryRow, 'id' | 'event_id' | 'endpoint_id'>;

/**
 * In the caller's transaction: a pending delivery, and its job, for each event and endpoint that
 * has none yet (one delivery per event and endpoint, whoever else is making it at the same
 * time). One statement for the deliveries, one enqueue per delivery made. Returns those it made.
 */
export async function createDeliveries(
  ctx: CoreCtx,
  tx: Queryable,
  queue: JobQueue,
  list: readonly NewDelivery[],
  runAt: number,
): Promise<CreatedDelivery[]> {
  if (list.length === 0) return [];
  const now = ctx.now();
  const rows = list.map((d) => [newId('dlv'), d.eventId, d.endpointId, d.partnerId]);
  const made = await tx.all<CreatedDelivery>(
    sql`INSERT INTO webhook_deliveries (id, event_id, endpoint_id, partner_id, status, attempts, next_attempt_at, created_at, updated_at)
        SELECT r.id, r.event_id, r.endpoint_id, r.partner_id, 'pending', 0, ${runAt}, ${now}, ${now}
          FROM ${textRows(ctx.store.dialect, ['id', 'event_id', 'endpoint_id', 'partner_id'], rows)} AS r WHERE true
        ON CONFLICT (event_id, endpoint_id) DO NOTHING RETURNING id, event_id, endpoint_id`,
  );
  for (const d of made) {
    const payload: DeliveryPayload = { d: d.id, b: 0 };
    await queue.enqueue(tx, { kind: DELIVERY_JOB, payload, runAt, maxAttempts: DELIVERY_MAX_ATTEMPTS }, now);
  }
  return made;
}

/**
 * Replay, in the caller's transaction: a finished delivery goes back to pending with a fresh
 * schedule and a new job. One still pending has a job already and is left alone ('pending'),
 * also when another replay restarted it a moment ago: the delivery is sent once, not twice.
 */
export async function restartDelivery(
  ctx: CoreCtx,
  tx: Queryable,
  queue: JobQueue,
  id: string,
  runAt: number,
): Promise<'restarted' | 'pending'> {
  const now = ctx.now();
  const row = await tx.get<Pick<DeliveryRow, 'attempts'>>(
    sql`UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ${runAt}, updated_at = ${now}
         WHERE id = ${id} AND status <> 'pending' RETURNING attempts`,
  );
  if (!row) return 'pending';
  const payload: DeliveryPayload = { d: id, b: row.attempts };
  await queue.enqueue(tx, { kind: DELIVERY_JOB, payload, runAt, maxAttempts: DELIVERY_MAX_ATTEMPTS }, now);
  return 'restarted';
}

export interface AttemptContext {
  delivery: DeliveryRow;
  endpoint: EndpointRow;
  /** The event's stored payload: the exact bytes sent. */
  body: string;
  eventType: string;
}

const D = [
  'id',
  'event_id',
  'endpoint_id',
  'partner_id',
  'status',
  'attempts',
  'next_attempt_at',
  'last_status_code',
  'last_error',
  'created_at',
  'updated_at',
];
const E = [
  'id',
  'partner_id',
  'url',
  'description',
  'events',
  'secret',
  'previous_secret',
  'previous_secret_expires_at',
  'status',
  'disabled_reason',
  'failing_since',
  'deleted_at',
  'created_at',
  'updated_at',
];
const LOAD_COLUMNS = sql.raw(
  `${D.map((c) => `d.${c}`).join(', ')}, ${E.map((c) => `e.${c}`).join(', ')}, ev.payload, ev.type`,
);

function pick<T>(row: unknown[], offset: number, cols: string[]): T {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < cols.length; i++) out[cols[i]] = row[offset + i];
  return out as T;
}

/**
 * The load of these deliveries' attempts. One delivery through a statement of one text; several
 * through a list bound as one value (a query with a fragment in it is put together on each call).
 */
function loadSql(dialect: Dialect, deliveryIds: readonly string[]): Sql {
  return deliveryIds.length === 1
    ? sql`SELECT d.id, d.event_id, d.endpoint_id, d.partner_id, d.status, d.attempts, d.next_attempt_at, d.last_status_code, d.last_error, d.created_at, d.updated_at, e.id, e.partner_id, e.url, e.description, e.events, e.secret, e.previous_secret, e.previous_secret_expires_at, e.status, e.disabled_reason, e.failing_since, e.deleted_at, e.created_at, e.updated_at, ev.payload, ev.type
            FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id JOIN events ev ON ev.id = d.event_id
           WHERE d.id = ${deliveryIds[0]}`
    : sql`SELECT ${LOAD_COLUMNS}
            FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id JOIN events ev ON ev.id = d.event_id
           WHERE ${inList(dialect, 'd.id', deliveryIds)}`;
}

function attemptContexts(rows: unknown[][]): Map<string, AttemptContext> {
  const out = new Map<string, AttemptContext>();
  for (const row of rows) {
    const delivery = pick<DeliveryRow>(row, 0, D);
    out.set(delivery.id, {
      delivery,
      endpoint: pick<EndpointRow>(row, D.length, E),
      body: row[D.length + E.length] as string,
      eventType: row[D.length + E.length + 1] as string,
    });
  }
  return out;
}

/**
 * What the attempts of these deliveries need, by delivery id (none for a delivery that is gone):
 * the delivery, its endpoint and its event's body, in one statement for a batch of them.
 * Rows as arrays across three tables' columns (faster form kept: npm run bench, v1 deliveries).
 */
export async function loadForAttempts(
  ctx: CoreCtx,
  q: Queryable,
  deliveryIds: readonly string[],
): Promise<Map<string, AttemptContext>> {
  if (deliveryIds.length === 0) return new Map();
  return attemptContexts(await q.values<unknown[]>(loadSql(ctx.store.dialect, deliveryIds)));
}

export interface AttemptRecord {
  attemptNo: number;
  status: number | null;
  durationMs: number;
  snippet: string | null;
  error: string | null;
}

// A settled attempt's statements (settleAttempt, src/webhooks-out/deliver.ts).

/** The attempt's line in the log. */
export const attemptSql = (deliveryId: string, a: AttemptRecord, now: number) =>
  sql`INSERT INTO webhook_attempts (delivery_id, attempt_no, status_code, duration_ms, response_snippet, error, created_at)
      VALUES (${deliveryId}, ${a.attemptNo}, ${a.status}, ${a.durationMs}, ${a.snippet}, ${a.error}, ${now})`;

/** The delivery's new state after an attempt. */
export const deliveryStateSql = (
  deliveryId: string,
  a: AttemptRecord,
  next: { status: DeliveryStatus; nextAttemptAt: number | null },
  now: number,
) =>
  sql`UPDATE webhook_deliveries SET status = ${next.status}, attempts = ${a.attemptNo}, next_attempt_at = ${next.nextAttemptAt},
        last_status_code = ${a.status}, last_error = ${a.error}, updated_at = ${now}
      WHERE id = ${deliveryId}`;

/** A delivery that will not be attempted (again): its endpoint is gone or off, or its job died. */
export const endDeliverySql = (id: string, status: 'cancelled' | 'dead', reason: string, now: number) =>
  sql`UPDATE webhook_deliveries SET status = ${status}, last_error = ${reason}, next_attempt_at = NULL, updated_at = ${now}
      WHERE id = ${id} AND status = 'pending'`;

export interface DeliveryListRow extends DeliveryRow {
  /** null once the event is gone (LEFT JOIN). */
  event_type: Row<typeof events>['type'] | null;
  url: Row<typeof webhookEndpoints>['url'];
  partner_slug: Row<typeof partners>['slug'];
}

/** Operator view, newest first. `failed`: given up on, or still pending after a failure. */
export async function listDeliveries(
  ctx: CoreCtx,
  opts: { endpointId?: string; failed?: boolean; limit?: number } = {},
): Promise<DeliveryListRow[]> {
  const where: Sql[] = [];
  const limit = Math.min(Math.max(opts.limit ?? 50, 1), 1000);
  if (opts.endpointId) where.push(sql`d.endpoint_id = ${opts.endpointId}`);
  if (opts.failed) where.push(sql`(d.status IN ('failed', 'dead') OR (d.status = 'pending' AND d.attempts > 0))`);
  return ctx.store.all<DeliveryListRow>(
    sql`SELECT d.*, ev.type AS event_type, e.url, p.slug AS partner_slug
         FROM webhook_deliveries d
         JOIN webhook_endpoints e ON e.id = d.endpoint_id
         JOIN partners p ON p.id = d.partner_id
         LEFT JOIN events ev ON ev.id = d.event_id
        ${where.length ? sql`WHERE ${sql.join(where, ' AND ')}` : sql.raw('')}
        ORDER BY d.id DESC LIMIT ${limit}`,
  );
}

/** What a partner filters an endpoint's deliveries by, and the rows each outcome means. */
const OUTCOME_WHERE = {
  succeeded: sql`d.status = 'succeeded'`,
  // Still being retried after at least one failed attempt.
  retrying: sql`d.status = 'pending' AND d.attempts > 0`,
  failed: sql`d.status IN ('failed', 'dead')`,
  pending: sql`d.status = 'pending'`,
  cancelled: sql`d.status = 'cancelled'`,
} as const;
export type DeliveryOutcome = keyof typeof OUTCOME_WHERE;
export const DELIVERY_OUTCOMES = Object.keys(OUTCOME_WHERE) as DeliveryOutcome[];

/** Deliveries an outcome filter examines per page at most, so a rare outcome never walks an endpoint's history. */
export const DELIVERY_SCAN_LIMIT = 2_000;

export interface DeliveryPage {
  rows: (DeliveryRow & { event_type: string | null })[];
  /** The id to pass as `before` for the next page; null when the list is done. */
  next: string | null;
  /** True when the page ended at the scan bound rather than on `limit` matches. */
  bounded: boolean;
}

/**
 * One endpoint's deliveries, newest first, keyset-paged on webhook_deliveries_endpoint. With an
 * outcome, a page examines at most DELIVERY_SCAN_LIMIT deliveries and may end short (bounded),
 * its `next` marking how far back it looked.
 */
export async function listEndpointDeliveries(
  ctx: CoreCtx,
  endpointId: string,
  opts: { outcome?: DeliveryOutcome; before?: string | null; limit: number },
): Promise<DeliveryPage> {
  const before = opts.before ?? null;
  const byEndpoint = indexedBy(ctx.store.dialect, 'webhook_deliveries_endpoint');
  const none = sql.raw('');
  let floor: string | null = null;
  if (opts.outcome) {
    floor =
      (
        await ctx.store.get<Pick<DeliveryRow, 'id'>>(
          sql`SELECT id FROM webhook_deliveries ${byEndpoint}
               WHERE endpoint_id = ${endpointId} ${before === null ? none : sql`AND id < ${before}`}
               ORDER BY id DESC LIMIT 1 OFFSET ${DELIVERY_SCAN_LIMIT - 1}`,
        )
      )?.id ?? null;
  }
  const rows = await ctx.store.all<DeliveryRow & { event_type: string | null }>(
    sql`SELECT d.*, ev.type AS event_type FROM webhook_deliveries d ${byEndpoint}
         LEFT JOIN events ev ON ev.id = d.event_id
        WHERE d.endpoint_id = ${endpointId}
          ${before === null ? none : sql`AND d.id < ${before}`}
          ${floor === null ? none : sql`AND d.id >= ${floor}`}
          ${opts.outcome ? sql`AND ${OUTCOME_WHERE[opts.outcome]}` : none}
        ORDER BY d.id DESC LIMIT ${opts.limit + 1}`,
  );
  if (rows.length > opts.limit)
    return { rows: rows.slice(0, opts.limit), next: rows[opts.limit - 1].id, bounded: false };
  return { rows, next: floor, bounded: floor !== null };
}

/** One delivery by id (the caller checks whose it is). */
export async function getDelivery(ctx: CoreCtx, id: string): Promise<DeliveryRow | undefined> {
  return ctx.store.get<DeliveryRow>(sql`SELECT * FROM webhook_deliveries WHERE id = ${id}`);
}

/** The type and stored body of a delivery's event (what its attempts send), or undefined once retention removed it. */
export async function deliveryEvent(
  ctx: CoreCtx,
  eventId: string,
): Promise<Pick<Row<typeof events>, 'type' | 'payload'> | undefined> {
  return ctx.store.get<Pick<Row<typeof events>, 'type' | 'payload'>>(
    sql`SELECT type, payload FROM events WHERE id = ${eventId}`,
  );
}

/** The newest attempt's id, or null before the first. */
export async function newestAttemptId(ctx: CoreCtx): Promise<number | null> {
  const row = await ctx.store.get<{ id: number | null }>(sql`SELECT MAX(id) AS id FROM webhook_attempts`);
  return row?.id ?? null;
}

/** An attempt with the event and endpoint it was for: a line of a live tail. */
export interface AttemptLine {
  id: number;
  created_at: number;
  attempt_no: number;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  event_id: string;
  event_type: string | null;
  url: string;
  partner_id: string;
}

const ATTEMPT_LINE_SQL = sql`SELECT a.id, a.created_at, a.attempt_no, a.status_code, a.duration_ms, a.error, d.event_id,
    ev.type AS event_type, e.url, d.partner_id
   FROM webhook_attempts a
   JOIN webhook_deliveries d ON d.id = a.delivery_id
   JOIN webhook_endpoints e ON e.id = d.endpoint_id
   LEFT JOIN events ev ON ev.id = d.event_id`;

/** The newest `limit` attempts, oldest first, by primary key. */
export async function latestAttemptLines(ctx: CoreCtx, limit: number): Promise<AttemptLine[]> {
  const rows = await ctx.store.all<AttemptLine>(sql`${ATTEMPT_LINE_SQL} ORDER BY a.id DESC LIMIT ${limit}`);
  return rows.reverse();
}

/** Up to `limit` attempts after `afterId`, oldest first. */
export async function attemptLinesAfter(ctx: CoreCtx, afterId: number, limit: number): Promise<AttemptLine[]> {
  return ctx.store.all<AttemptLine>(sql`${ATTEMPT_LINE_SQL} WHERE a.id > ${afterId} ORDER BY a.id LIMIT ${limit}`);
}

/** A delivery's attempts, first to last. */
export async function listAttempts(ctx: CoreCtx, deliveryId: string): Promise<AttemptRow[]> {
  return ctx.store.all<AttemptRow>(sql`SELECT * FROM webhook_attempts WHERE delivery_id = ${deliveryId} ORDER BY id`);
}

/** The newest attempt of each of these deliveries (one statement for a page of them); none before the first. */
export async function lastAttempts(ctx: CoreCtx, deliveryIds: readonly string[]): Promise<Map<string, AttemptRow>> {
  if (deliveryIds.length === 0) return new Map();
  const rows = await ctx.store.all<AttemptRow>(
    sql`SELECT * FROM webhook_attempts WHERE id IN (SELECT MAX(id) FROM webhook_attempts
         WHERE delivery_id IN (${sql.join(deliveryIds.map((id) => sql`${id}`))}) GROUP BY delivery_id)`,
  );
  return new Map(rows.map((a) => [a.delivery_id, a]));
}

export type RecentAttempt = AttemptRow &
  Pick<DeliveryRow, 'event_id' | 'endpoint_id' | 'partner_id'> &
  Pick<DeliveryListRow, 'url' | 'event_type'>;

/** Attempts across deliveries since a time, newest first: the outbound half of a webhook log. */
export async function recentAttempts(
  ctx: CoreCtx,
  opts: { since?: number; limit?: number } = {},
): Promise<RecentAttempt[]> {
  const limit = Math.min(Math.max(opts.limit ?? 100, 1), 5000);
  return ctx.store.all<RecentAttempt>(
    sql`SELECT a.*, d.event_id, d.endpoint_id, d.partner_id, e.url, ev.type AS event_type
         FROM webhook_attempts a
         JOIN webhook_deliveries d ON d.id = a.delivery_id
         JOIN webhook_endpoints e ON e.id = d.endpoint_id
         LEFT JOIN events ev ON ev.id = d.event_id
        WHERE a.created_at >= ${opts.since ?? 0} ORDER BY a.id DESC LIMIT ${limit}`,
  );
}
