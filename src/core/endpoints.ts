import type { partners, webhookEndpoints } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { randomBytes } from 'node:crypto';
import { stmt } from '../db/stmt.js';
import { AppError, notFound } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/time.js';
import { audit } from './audit.js';
import type { CoreCtx } from './context.js';
import type { EventType } from './event-types.js';
import { seal, unseal } from './secrets.js';

// Partner webhook endpoints. The signing secret is sealed at rest and leaves this module
// only in the return value of create and rotate (shown to the partner once) and in
// openSecrets (for signing). A deleted endpoint keeps its row for the delivery log.

export const MAX_ENDPOINTS_PER_PARTNER = 50;

/** events: a JSON array of event types; null = every event. */
export type EndpointRow = Row<typeof webhookEndpoints>;

export function newSigningSecret(): string {
  return 'whsec_' + randomBytes(32).toString('base64');
}

export function createEndpoint(
  ctx: CoreCtx,
  partnerId: string,
  input: { url: string; events?: EventType[] | null; description?: string | null },
): { endpoint: EndpointRow; secret: string } {
  return ctx.db.sqlite
    .transaction(() => {
      const count = stmt<[string], { n: number }>(
        ctx.db.sqlite,
        'SELECT COUNT(*) AS n FROM webhook_endpoints WHERE partner_id = ? AND deleted_at IS NULL',
      ).get(partnerId)!.n;
      if (count >= MAX_ENDPOINTS_PER_PARTNER) {
        throw new AppError(
          'conflict',
          `a partner may have at most ${MAX_ENDPOINTS_PER_PARTNER} webhook endpoints; delete one first`,
        );
      }
      const secret = newSigningSecret();
      const now = ctx.now();
      const row: EndpointRow = {
        id: newId('whe'),
        partner_id: partnerId,
        url: input.url,
        description: input.description ?? null,
        events: input.events && input.events.length ? JSON.stringify([...new Set(input.events)].sort()) : null,
        secret: seal(ctx.masterKey, secret),
        previous_secret: null,
        previous_secret_expires_at: null,
        status: 'enabled',
        disabled_reason: null,
        failing_since: null,
        deleted_at: null,
        created_at: now,
        updated_at: now,
      };
      stmt(
        ctx.db.sqlite,
        `INSERT INTO webhook_endpoints (id, partner_id, url, description, events, secret, previous_secret, previous_secret_expires_at,
         status, disabled_reason, failing_since, deleted_at, created_at, updated_at)
       VALUES (@id, @partner_id, @url, @description, @events, @secret, @previous_secret, @previous_secret_expires_at,
         @status, @disabled_reason, @failing_since, @deleted_at, @created_at, @updated_at)`,
      ).run(row);
      audit(ctx, `partner:${partnerId}`, 'webhook.create', 'webhook_endpoint', row.id, {
        url: row.url,
        events: input.events ?? null,
      });
      return { endpoint: row, secret };
    })
    .immediate();
}

/** The partner's endpoint, or undefined for a missing, deleted or another partner's id. */
export function getEndpoint(ctx: CoreCtx, partnerId: string, id: string): EndpointRow | undefined {
  return stmt<[string, string], EndpointRow>(
    ctx.db.sqlite,
    'SELECT * FROM webhook_endpoints WHERE id = ? AND partner_id = ? AND deleted_at IS NULL',
  ).get(id, partnerId);
}

export function getEndpointAny(ctx: CoreCtx, id: string): EndpointRow | undefined {
  return stmt<[string], EndpointRow>(ctx.db.sqlite, 'SELECT * FROM webhook_endpoints WHERE id = ?').get(id);
}

/** The endpoint with this id or URL, of any partner: a live one before a deleted one. */
export function findEndpointRef(ctx: CoreCtx, ref: string): string | undefined {
  return stmt<[string, string], { id: string }>(
    ctx.db.sqlite,
    'SELECT id FROM webhook_endpoints WHERE id = ? OR url = ? ORDER BY deleted_at IS NULL DESC LIMIT 1',
  ).get(ref, ref)?.id;
}

/** Newest first, keyset on id. */
export function listEndpoints(
  ctx: CoreCtx,
  partnerId: string,
  opts: { limit: number; before?: string | null },
): EndpointRow[] {
  return stmt<[string, string | null, string | null, number], EndpointRow>(
    ctx.db.sqlite,
    `SELECT * FROM webhook_endpoints WHERE partner_id = ? AND deleted_at IS NULL AND (? IS NULL OR id < ?)
      ORDER BY id DESC LIMIT ?`,
  ).all(partnerId, opts.before ?? null, opts.before ?? null, opts.limit);
}

/** Operator view: every live endpoint, optionally of one partner. */
export function listAllEndpoints(ctx: CoreCtx, partnerId?: string): (EndpointRow & { partner_slug: string })[] {
  return stmt<[{ p: string | null }], EndpointRow & { partner_slug: Row<typeof partners>['slug'] }>(
    ctx.db.sqlite,
    `SELECT e.*, p.slug AS partner_slug FROM webhook_endpoints e JOIN partners p ON p.id = e.partner_id
        WHERE e.deleted_at IS NULL AND (@p IS NULL OR e.partner_id = @p) ORDER BY p.slug, e.id`,
  ).all({ p: partnerId ?? null });
}

export function deleteEndpoint(ctx: CoreCtx, partnerId: string, id: string): boolean {
  return ctx.db.sqlite
    .transaction(() => {
      const now = ctx.now();
      const changed = stmt(
        ctx.db.sqlite,
        `UPDATE webhook_endpoints SET deleted_at = ?, status = 'disabled', disabled_reason = 'deleted', updated_at = ?
        WHERE id = ? AND partner_id = ? AND deleted_at IS NULL`,
      ).run(now, now, id, partnerId).changes;
      if (!changed) return false;
      // Their jobs find them cancelled and finish without a request.
      stmt(
        ctx.db.sqlite,
        `UPDATE webhook_deliveries SET status = 'cancelled', last_error = 'endpoint deleted', updated_at = ?
      WHERE endpoint_id = ? AND status = 'pending'`,
      ).run(now, id);
      audit(ctx, `partner:${partnerId}`, 'webhook.delete', 'webhook_endpoint', id);
      return true;
    })
    .immediate();
}

/**
 * A new URL, event list and description for an endpoint; its secrets stay. The caller checks
 * the URL as for createEndpoint (checkEndpointUrl). Bumps updated_at, which versions the
 * endpoint's settings for the delivery loop.
 */
export function updateEndpoint(
  ctx: CoreCtx,
  partnerId: string,
  id: string,
  input: { url: string; events?: EventType[] | null; description?: string | null },
): EndpointRow {
  return ctx.db.sqlite
    .transaction(() => {
      const row = getEndpoint(ctx, partnerId, id);
      if (!row) throw notFound('webhook endpoint', id);
      const now = Math.max(ctx.now(), row.updated_at + 1);
      const next: EndpointRow = {
        ...row,
        url: input.url,
        events: input.events && input.events.length ? JSON.stringify([...new Set(input.events)].sort()) : null,
        description: input.description ?? null,
        updated_at: now,
      };
      stmt(
        ctx.db.sqlite,
        'UPDATE webhook_endpoints SET url = ?, events = ?, description = ?, updated_at = ? WHERE id = ?',
      ).run(next.url, next.events, next.description, now, id);
      audit(ctx, `partner:${partnerId}`, 'webhook.update', 'webhook_endpoint', id, {
        url: next.url,
        events: input.events && input.events.length ? input.events : null,
        ...(row.url !== next.url ? { previous_url: row.url } : {}),
      });
      return next;
    })
    .immediate();
}

/** A new secret; the current one keeps signing beside it until the grace period ends. */
export function rotateSecret(
  ctx: CoreCtx,
  partnerId: string,
  id: string,
  graceMs: number,
): { endpoint: EndpointRow; secret: string } {
  return ctx.db.sqlite
    .transaction(() => {
      const row = getEndpoint(ctx, partnerId, id);
      if (!row) throw notFound('webhook endpoint', id);
      const secret = newSigningSecret();
      const now = ctx.now();
      const next: EndpointRow = {
        ...row,
        secret: seal(ctx.masterKey, secret),
        previous_secret: row.secret,
        previous_secret_expires_at: now + graceMs,
        updated_at: now,
      };
      stmt(
        ctx.db.sqlite,
        `UPDATE webhook_endpoints SET secret = ?, previous_secret = ?, previous_secret_expires_at = ?, updated_at = ? WHERE id = ?`,
      ).run(next.secret, next.previous_secret, next.previous_secret_expires_at, now, id);
      audit(ctx, `partner:${partnerId}`, 'webhook.rotate_secret', 'webhook_endpoint', id, { grace_ms: graceMs });
      return { endpoint: next, secret };
    })
    .immediate();
}

/** The secrets that sign right now: the current one, and the previous one during its grace. */
export function openSecrets(
  ctx: CoreCtx,
  row: EndpointRow,
  now = ctx.now(),
): { current: string; previous: string | null } {
  const previous =
    row.previous_secret && row.previous_secret_expires_at !== null && row.previous_secret_expires_at > now
      ? unseal(ctx.masterKey, row.previous_secret)
      : null;
  return { current: unseal(ctx.masterKey, row.secret), previous };
}

/** Inside the caller's transaction (the delivery that saw the failure). */
export function disableEndpoint(ctx: CoreCtx, id: string, reason: string): boolean {
  const now = ctx.now();
  const changed =
    stmt(
      ctx.db.sqlite,
      `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ?, updated_at = ? WHERE id = ? AND status = 'enabled'`,
    ).run(reason, now, id).changes === 1;
  if (changed) audit(ctx, 'system', 'webhook.disable', 'webhook_endpoint', id, { reason });
  return changed;
}

/** Operator: enable a disabled endpoint; its failure clock starts again. */
export function enableEndpoint(ctx: CoreCtx, id: string, actor: string): EndpointRow {
  return ctx.db.sqlite
    .transaction(() => {
      const row = getEndpointAny(ctx, id);
      if (!row || row.deleted_at !== null) throw notFound('webhook endpoint', id);
      if (row.status === 'enabled') throw new AppError('conflict', `webhook endpoint ${id} is already enabled`);
      const now = ctx.now();
      stmt(
        ctx.db.sqlite,
        `UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, failing_since = NULL, updated_at = ? WHERE id = ?`,
      ).run(now, id);
      audit(ctx, actor, 'webhook.enable', 'webhook_endpoint', id, { previous_reason: row.disabled_reason });
      return { ...row, status: 'enabled' as const, disabled_reason: null, failing_since: null, updated_at: now };
    })
    .immediate();
}

export function subscribedTo(row: Pick<EndpointRow, 'events'>, type: string): boolean {
  if (type === 'webhook.test') return false;
  return row.events === null || (JSON.parse(row.events) as string[]).includes(type);
}

export function endpointJson(row: EndpointRow, now: number) {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    events: row.events === null ? null : (JSON.parse(row.events) as string[]),
    status: row.status,
    disabled_reason: row.disabled_reason,
    failing_since: iso(row.failing_since),
    secret_rotation_ends_at:
      row.previous_secret_expires_at !== null && row.previous_secret_expires_at > now
        ? iso(row.previous_secret_expires_at)
        : null,
    created_at: iso(row.created_at)!,
    updated_at: iso(row.updated_at)!,
  };
}

/** How many live endpoints are failing (enabled, deliveries not going through) and how many are disabled. */
export function endpointHealthCounts(ctx: CoreCtx): { failing: number; disabled: number } {
  return stmt<[], { failing: number; disabled: number }>(
    ctx.db.sqlite,
    `SELECT COALESCE(SUM(status = 'enabled' AND failing_since IS NOT NULL), 0) AS failing,
            COALESCE(SUM(status = 'disabled'), 0) AS disabled
       FROM webhook_endpoints WHERE deleted_at IS NULL`,
  ).get()!;
}
