import type { providerWebhooks } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { inList } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import { type Dialect, type Sql, sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { iso } from '../lib/time.js';
import type { CoreCtx } from './context.js';

// The provider webhook log: every POST to the inbound endpoints, raw (headers redacted),
// with the verification verdict and what processing made of it. The operator's
// "tail the webhook log" (msgctl webhooks log) reads it; retention trims it.

export type Verification = 'ok' | 'failed' | 'skipped';
export type Processing = 'pending' | 'processed' | 'duplicate' | 'unroutable' | 'ignored' | 'error' | 'rejected';

/** path: as requested, with its query; headers: JSON, secrets redacted; processed_at: when processing
 * finished, or while still pending, when a first part of it took effect. */
export type WebhookLogRow = Row<typeof providerWebhooks>;

const MAX_TEXT = 2000;
const clip = (s: string | null) => (s !== null && s.length > MAX_TEXT ? `${s.slice(0, MAX_TEXT - 1)}…` : s);

export function insertWebhookLog(ctx: CoreCtx, r: WebhookLogRow): void {
  stmt(
    ctx.db.sqlite,
    `INSERT INTO provider_webhooks (id, provider, gateway_id, method, path, headers, body, verification, verification_reason,
       processing, error, received_at, processed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    r.id,
    r.provider,
    r.gateway_id,
    r.method,
    r.path,
    r.headers,
    r.body,
    r.verification,
    clip(r.verification_reason),
    r.processing,
    clip(r.error),
    r.received_at,
    r.processed_at,
  );
}

/** The INSERT of one row, the same text on both stores (webhook intake runs it on SQLite's connection, or awaits it on a Tx). */
export function webhookLogInsert(r: WebhookLogRow): Sql {
  return sql`INSERT INTO provider_webhooks (id, provider, gateway_id, method, path, headers, body, verification,
       verification_reason, processing, error, received_at, processed_at)
     VALUES (${r.id}, ${r.provider}, ${r.gateway_id}, ${r.method}, ${r.path}, ${r.headers}, ${r.body},
       ${r.verification}, ${clip(r.verification_reason)}, ${r.processing}, ${clip(r.error)}, ${r.received_at},
       ${r.processed_at})`;
}

/** insertWebhookLog through the store or a transaction. */
export async function insertWebhookLogIn(q: Queryable, r: WebhookLogRow): Promise<void> {
  await q.run(webhookLogInsert(r));
}

/** One row, on the connection: webhook processing reads it inside its synchronous transaction. */
export function getWebhookLog(ctx: CoreCtx, id: string): WebhookLogRow | undefined {
  return stmt<[string], WebhookLogRow>(ctx.db.sqlite, 'SELECT * FROM provider_webhooks WHERE id = ?').get(id);
}

/** One row through the store (the console's detail pane). */
export function readWebhookLog(ctx: CoreCtx, id: string): Promise<WebhookLogRow | undefined> {
  return ctx.store.get<WebhookLogRow>(sql`SELECT * FROM provider_webhooks WHERE id = ${id}`);
}

export function finishWebhookLog(ctx: CoreCtx, id: string, processing: Processing, error: string | null): void {
  stmt(ctx.db.sqlite, 'UPDATE provider_webhooks SET processing = ?, error = ?, processed_at = ? WHERE id = ?').run(
    processing,
    clip(error),
    ctx.now(),
    id,
  );
}

/** finishWebhookLog inside the caller's store transaction `q`, on either store. */
export async function finishWebhookLogIn(
  q: Queryable,
  ctx: CoreCtx,
  id: string,
  processing: Processing,
  error: string | null,
): Promise<void> {
  await q.run(
    sql`UPDATE provider_webhooks SET processing = ${processing}, error = ${clip(error)}, processed_at = ${ctx.now()}
        WHERE id = ${id}`,
  );
}

/** Rows by id through `q` (the store, or a transaction's Tx), in id order; ids not found are left out. */
export function webhookLogRowsIn(q: Queryable, dialect: Dialect, ids: readonly string[]): Promise<WebhookLogRow[]> {
  return q.all<WebhookLogRow>(sql`SELECT * FROM provider_webhooks WHERE ${inList(dialect, 'id', ids)} ORDER BY id`);
}

/** Verified webhooks that ended unroutable, received at or after `since`, oldest first (at most 10,000). */
export function unroutableWebhookLog(ctx: CoreCtx, since: number): WebhookLogRow[] {
  return stmt<[number], WebhookLogRow>(
    ctx.db.sqlite,
    `SELECT * FROM provider_webhooks WHERE processing = 'unroutable' AND verification = 'ok' AND received_at >= ? ORDER BY id LIMIT 10000`,
  ).all(since);
}

/** Back to pending, to be processed again (after the operator fixed its routing). */
export function reopenWebhookLog(ctx: CoreCtx, id: string): void {
  stmt(ctx.db.sqlite, `UPDATE provider_webhooks SET processing = 'pending', processed_at = NULL WHERE id = ?`).run(id);
}

/** Still pending: say what it waits for, and when something of it first took effect. */
export function noteWebhookProgress(ctx: CoreCtx, id: string, error: string, progressed: boolean): void {
  stmt(
    ctx.db.sqlite,
    `UPDATE provider_webhooks SET error = ?, processed_at = CASE WHEN ? THEN COALESCE(processed_at, ?) ELSE processed_at END WHERE id = ?`,
  ).run(clip(error), progressed ? 1 : 0, ctx.now(), id);
}

/** unroutableWebhookLog through `q`, on either store. */
export function unroutableWebhookLogIn(q: Queryable, since: number): Promise<WebhookLogRow[]> {
  return q.all<WebhookLogRow>(
    sql`SELECT * FROM provider_webhooks WHERE processing = 'unroutable' AND verification = 'ok' AND received_at >= ${since}
        ORDER BY id LIMIT 10000`,
  );
}

/** reopenWebhookLog inside the caller's store transaction `q`: true when the row was there. */
export async function reopenWebhookLogIn(q: Queryable, id: string): Promise<boolean> {
  const r = await q.run(sql`UPDATE provider_webhooks SET processing = 'pending', processed_at = NULL WHERE id = ${id}`);
  return r.changes === 1;
}

/** noteWebhookProgress inside the caller's store transaction `q`, on either store. */
export async function noteWebhookProgressIn(
  q: Queryable,
  ctx: CoreCtx,
  id: string,
  error: string,
  progressed: boolean,
): Promise<void> {
  const now = ctx.now();
  await q.run(
    sql`UPDATE provider_webhooks SET error = ${clip(error)},
          processed_at = CASE WHEN ${progressed ? 1 : 0} = 1 THEN COALESCE(processed_at, ${now}) ELSE processed_at END
        WHERE id = ${id}`,
  );
}

export interface WebhookLogFilter {
  provider?: string;
  gatewayId?: string;
  /** Only what went wrong: verification failed, rejected, unroutable or errored. */
  failed?: boolean;
  /** Rows after this id (ids sort by time): the --follow cursor. */
  afterId?: string;
  limit: number;
  /** Newest `limit` rows (then returned oldest first) instead of the oldest after afterId. */
  latest?: boolean;
  withBody?: boolean;
}

const FAILED = sql.raw(`(verification = 'failed' OR processing IN ('rejected', 'unroutable', 'error'))`);

const LIST_COLUMNS = sql.raw(
  'id, provider, gateway_id, method, path, headers, NULL AS body, length(body) AS body_bytes, verification, verification_reason, processing, error, received_at, processed_at',
);

/** Rows in time order (oldest first). */
export async function listWebhookLog(ctx: CoreCtx, f: WebhookLogFilter): Promise<WebhookLogRow[]> {
  const where: Sql[] = [];
  if (f.provider) where.push(sql`provider = ${f.provider}`);
  if (f.gatewayId) where.push(sql`gateway_id = ${f.gatewayId}`);
  if (f.failed) where.push(FAILED);
  if (f.afterId) where.push(sql`id > ${f.afterId}`);
  const filter = where.length ? sql`WHERE ${sql.join(where, ' AND ')}` : sql``;
  const rows = await ctx.store.all<WebhookLogRow>(
    sql`SELECT ${f.withBody ? sql.raw('*') : LIST_COLUMNS} FROM provider_webhooks ${filter}
    ORDER BY id ${sql.raw(f.latest ? 'DESC' : 'ASC')} LIMIT ${f.limit}`,
  );
  return f.latest ? rows.reverse() : rows;
}

/** The newest row's id (ids sort by time), or null on an empty log. */
export async function newestWebhookLogId(ctx: CoreCtx): Promise<string | null> {
  const row = await ctx.store.get<{ id: string | null }>(sql`SELECT MAX(id) AS id FROM provider_webhooks`);
  return row?.id ?? null;
}

/** Ids of rows up to `upToId` still pending, received at or after `since`, oldest first (at most 10,000). */
export async function pendingWebhookLogIds(ctx: CoreCtx, since: number, upToId: string): Promise<string[]> {
  const rows = await ctx.store.all<{ id: string }>(
    sql`SELECT id FROM provider_webhooks WHERE received_at >= ${since} AND processing = 'pending' AND id <= ${upToId}
      ORDER BY id LIMIT 10000`,
  );
  return rows.map((r) => r.id);
}

/** Those of these rows that are no longer pending, whole (with body_bytes), oldest first. */
export async function settledWebhookLogs(
  ctx: CoreCtx,
  ids: string[],
): Promise<(WebhookLogRow & { body_bytes: number })[]> {
  if (ids.length === 0) return [];
  // inList: one statement text for any number of ids.
  return ctx.store.all<WebhookLogRow & { body_bytes: number }>(
    sql`SELECT *, length(body) AS body_bytes FROM provider_webhooks
      WHERE ${inList(ctx.store.dialect, 'id', ids)} AND processing <> 'pending' ORDER BY id`,
  );
}

/** A row without its headers and body, with the body's size: what a live tail keeps of each. */
export type WebhookLogSummary = Omit<WebhookLogRow, 'body' | 'headers'> & { body_bytes: number };

/** The newest `limit` rows, oldest first, by primary key. */
export async function latestWebhookLog(ctx: CoreCtx, limit: number): Promise<WebhookLogSummary[]> {
  const rows = await ctx.store.all<WebhookLogSummary>(
    sql`SELECT id, provider, gateway_id, method, path, length(body) AS body_bytes, verification, verification_reason,
      processing, error, received_at, processed_at
     FROM provider_webhooks ORDER BY id DESC LIMIT ${limit}`,
  );
  return rows.reverse();
}

/** Up to `limit` rows after `afterId`, oldest first. */
export function webhookLogAfter(ctx: CoreCtx, afterId: string, limit: number): Promise<WebhookLogSummary[]> {
  return ctx.store.all<WebhookLogSummary>(
    sql`SELECT id, provider, gateway_id, method, path, length(body) AS body_bytes, verification, verification_reason,
      processing, error, received_at, processed_at
     FROM provider_webhooks WHERE id > ${afterId} ORDER BY id LIMIT ${limit}`,
  );
}

/** These rows as they are now, by id (one statement for any number of ids). */
export async function webhookLogByIds(ctx: CoreCtx, ids: string[]): Promise<WebhookLogSummary[]> {
  if (ids.length === 0) return [];
  return ctx.store.all<WebhookLogSummary>(
    sql`SELECT id, provider, gateway_id, method, path, length(body) AS body_bytes, verification, verification_reason,
      processing, error, received_at, processed_at
     FROM provider_webhooks WHERE ${inList(ctx.store.dialect, 'id', ids)} ORDER BY id`,
  );
}

export function webhookLogJson(r: WebhookLogRow & { body_bytes?: number | null }) {
  return {
    id: r.id,
    received_at: iso(r.received_at),
    provider: r.provider,
    gateway_id: r.gateway_id,
    method: r.method,
    path: r.path,
    verification: r.verification,
    verification_reason: r.verification_reason,
    processing: r.processing,
    error: r.error,
    processed_at: iso(r.processed_at),
    headers: JSON.parse(r.headers) as Record<string, unknown>,
    body_bytes: r.body ? r.body.length : (r.body_bytes ?? 0),
    ...(r.body ? { body: r.body.toString('utf8') } : {}),
  };
}

/** Delete up to `batch` rows received before `cutoff`; returns how many went. */
export async function expireWebhookLog(ctx: CoreCtx, cutoff: number, batch = 5000): Promise<number> {
  const { changes } = await ctx.store.run(
    sql`DELETE FROM provider_webhooks WHERE id IN (SELECT id FROM provider_webhooks WHERE received_at < ${cutoff}
          ORDER BY received_at LIMIT ${batch})`,
  );
  return changes;
}
