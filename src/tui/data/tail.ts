import type { CoreCtx } from '../../core/context.js';
import { getWebhookLog, type WebhookLogRow } from '../../core/webhook-log.js';
import { stmt } from '../../db/stmt.js';

// The webhook tail's reads: the newest rows by primary key, then only rows after the last one
// seen, plus the few shown rows still pending (one statement for any number of them, through
// json_each, so the statement text never varies). Filters apply in memory to that bounded window,
// so a rare provider or gateway never makes a read walk the whole log.

/** How many rows the tail keeps and filters over. */
export const TAIL_WINDOW = 2000;

export type TailRow = Omit<WebhookLogRow, 'body' | 'headers'> & { body_bytes: number };

const COLUMNS = `id, provider, gateway_id, method, path, length(body) AS body_bytes, verification, verification_reason,
  processing, error, received_at, processed_at`;

export function latestWebhooks(ctx: CoreCtx, limit = TAIL_WINDOW): TailRow[] {
  return stmt<[number], TailRow>(
    ctx.db.sqlite,
    `SELECT ${COLUMNS} FROM provider_webhooks ORDER BY id DESC LIMIT ?`,
  )
    .all(limit)
    .reverse();
}

export function webhooksAfter(ctx: CoreCtx, afterId: string, limit = TAIL_WINDOW): TailRow[] {
  return stmt<[string, number], TailRow>(
    ctx.db.sqlite,
    `SELECT ${COLUMNS} FROM provider_webhooks WHERE id > ? ORDER BY id LIMIT ?`,
  ).all(afterId, limit);
}

/** The current state of rows that were pending when last read. */
export function webhooksByIds(ctx: CoreCtx, ids: string[]): TailRow[] {
  if (ids.length === 0) return [];
  return stmt<[string], TailRow>(
    ctx.db.sqlite,
    `SELECT ${COLUMNS} FROM provider_webhooks WHERE id IN (SELECT value FROM json_each(?))`,
  ).all(JSON.stringify(ids));
}

export function webhookDetail(ctx: CoreCtx, id: string): WebhookLogRow | undefined {
  return getWebhookLog(ctx, id);
}

export interface AttemptRow {
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

const ATTEMPT_SQL = `SELECT a.id, a.created_at, a.attempt_no, a.status_code, a.duration_ms, a.error, d.event_id,
    ev.type AS event_type, e.url, d.partner_id
   FROM webhook_attempts a
   JOIN webhook_deliveries d ON d.id = a.delivery_id
   JOIN webhook_endpoints e ON e.id = d.endpoint_id
   LEFT JOIN events ev ON ev.id = d.event_id`;

export function latestAttempts(ctx: CoreCtx, limit = TAIL_WINDOW): AttemptRow[] {
  return stmt<[number], AttemptRow>(ctx.db.sqlite, `${ATTEMPT_SQL} ORDER BY a.id DESC LIMIT ?`)
    .all(limit)
    .reverse();
}

export function attemptsAfter(ctx: CoreCtx, afterId: number, limit = TAIL_WINDOW): AttemptRow[] {
  return stmt<[number, number], AttemptRow>(ctx.db.sqlite, `${ATTEMPT_SQL} WHERE a.id > ? ORDER BY a.id LIMIT ?`).all(
    afterId,
    limit,
  );
}

/** Gateway names by id, without opening their secrets. */
export function gatewayNames(ctx: CoreCtx): Map<string, string> {
  const rows = stmt<[], { id: string; name: string }>(ctx.db.sqlite, 'SELECT id, name FROM gateways ORDER BY name').all();
  return new Map(rows.map((r) => [r.id, r.name]));
}
