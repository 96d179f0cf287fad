import type { partners, webhookEndpoints } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { randomBytes } from 'node:crypto';
import { forUpdate } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';
import { AppError, notFound } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/time.js';
import { auditIn } from './audit.js';
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

/** The stored form of an event list: sorted, without repeats; null (every event) for none. */
function eventList(events: EventType[] | null | undefined): string | null {
  return events && events.length ? JSON.stringify([...new Set(events)].sort()) : null;
}

export async function createEndpoint(
  ctx: CoreCtx,
  partnerId: string,
  input: { url: string; events?: EventType[] | null; description?: string | null },
): Promise<{ endpoint: EndpointRow; secret: string }> {
  const secret = newSigningSecret();
  const sealed = seal(ctx.masterKey, secret);
  return ctx.store.transaction(async (tx) => {
    // The partner's row held until commit: two creates at the limit count one after the other.
    await tx.get(sql`SELECT id FROM partners WHERE id = ${partnerId} ${forUpdate(ctx.store.dialect)}`);
    const count = await tx.get<{ n: number }>(
      sql`SELECT CAST(COUNT(*) AS BIGINT) AS n FROM webhook_endpoints WHERE partner_id = ${partnerId} AND deleted_at IS NULL`,
    );
    if (count!.n >= MAX_ENDPOINTS_PER_PARTNER) {
      throw new AppError(
        'conflict',
        `a partner may have at most ${MAX_ENDPOINTS_PER_PARTNER} webhook endpoints; delete one first`,
      );
    }
    const now = ctx.now();
    const row: EndpointRow = {
      id: newId('whe'),
      partner_id: partnerId,
      url: input.url,
      description: input.description ?? null,
      events: eventList(input.events),
      secret: sealed,
      previous_secret: null,
      previous_secret_expires_at: null,
      status: 'enabled',
      disabled_reason: null,
      failing_since: null,
      deleted_at: null,
      created_at: now,
      updated_at: now,
    };
    await tx.run(
      sql`INSERT INTO webhook_endpoints (id, partner_id, url, description, events, secret, status, created_at, updated_at)
          VALUES (${row.id}, ${row.partner_id}, ${row.url}, ${row.description}, ${row.events}, ${row.secret},
            ${row.status}, ${row.created_at}, ${row.updated_at})`,
    );
    await auditIn(ctx, tx, `partner:${partnerId}`, 'webhook.create', 'webhook_endpoint', row.id, {
      url: row.url,
      events: input.events ?? null,
    });
    return { endpoint: row, secret };
  });
}

/** The partner's endpoint, or undefined for a missing, deleted or another partner's id. */
export async function getEndpoint(
  ctx: CoreCtx,
  partnerId: string,
  id: string,
  q: Queryable = ctx.store,
): Promise<EndpointRow | undefined> {
  return q.get<EndpointRow>(
    sql`SELECT * FROM webhook_endpoints WHERE id = ${id} AND partner_id = ${partnerId} AND deleted_at IS NULL`,
  );
}

export async function getEndpointAny(ctx: CoreCtx, id: string): Promise<EndpointRow | undefined> {
  return ctx.store.get<EndpointRow>(sql`SELECT * FROM webhook_endpoints WHERE id = ${id}`);
}

/** The endpoint with this id or URL, of any partner: a live one before a deleted one. */
export async function findEndpointRef(ctx: CoreCtx, ref: string): Promise<string | undefined> {
  const row = await ctx.store.get<Pick<EndpointRow, 'id'>>(
    sql`SELECT id FROM webhook_endpoints WHERE id = ${ref} OR url = ${ref}
         ORDER BY CASE WHEN deleted_at IS NULL THEN 0 ELSE 1 END, id LIMIT 1`,
  );
  return row?.id;
}

/** Newest first, keyset on id. */
export async function listEndpoints(
  ctx: CoreCtx,
  partnerId: string,
  opts: { limit: number; before?: string | null },
): Promise<EndpointRow[]> {
  const before = opts.before ?? null;
  return ctx.store.all<EndpointRow>(
    sql`SELECT * FROM webhook_endpoints WHERE partner_id = ${partnerId} AND deleted_at IS NULL
         ${before === null ? sql.raw('') : sql`AND id < ${before}`}
         ORDER BY id DESC LIMIT ${opts.limit}`,
  );
}

/** Operator view: every live endpoint, optionally of one partner. */
export async function listAllEndpoints(
  ctx: CoreCtx,
  partnerId?: string,
): Promise<(EndpointRow & { partner_slug: string })[]> {
  return ctx.store.all<EndpointRow & { partner_slug: Row<typeof partners>['slug'] }>(
    sql`SELECT e.*, p.slug AS partner_slug FROM webhook_endpoints e JOIN partners p ON p.id = e.partner_id
         WHERE e.deleted_at IS NULL ${partnerId === undefined ? sql.raw('') : sql`AND e.partner_id = ${partnerId}`}
         ORDER BY p.slug, e.id`,
  );
}

export async function deleteEndpoint(ctx: CoreCtx, partnerId: string, id: string): Promise<boolean> {
  return ctx.store.transaction(async (tx) => {
    const now = ctx.now();
    const { changes } = await tx.run(
      sql`UPDATE webhook_endpoints SET deleted_at = ${now}, status = 'disabled', disabled_reason = 'deleted', updated_at = ${now}
           WHERE id = ${id} AND partner_id = ${partnerId} AND deleted_at IS NULL`,
    );
    if (!changes) return false;
    // Their jobs find them cancelled and finish without a request.
    await tx.run(
      sql`UPDATE webhook_deliveries SET status = 'cancelled', last_error = 'endpoint deleted', updated_at = ${now}
           WHERE endpoint_id = ${id} AND status = 'pending'`,
    );
    await auditIn(ctx, tx, `partner:${partnerId}`, 'webhook.delete', 'webhook_endpoint', id);
    return true;
  });
}

/**
 * A new URL, event list and description for an endpoint; its secrets stay. The caller checks
 * the URL as for createEndpoint (checkEndpointUrl). Bumps updated_at, which versions the
 * endpoint's settings for the delivery loop.
 */
export async function updateEndpoint(
  ctx: CoreCtx,
  partnerId: string,
  id: string,
  input: { url: string; events?: EventType[] | null; description?: string | null },
): Promise<EndpointRow> {
  return ctx.store.transaction(async (tx) => {
    const row = await lockEndpoint(ctx, tx, partnerId, id);
    const now = Math.max(ctx.now(), row.updated_at + 1);
    const next: EndpointRow = {
      ...row,
      url: input.url,
      events: eventList(input.events),
      description: input.description ?? null,
      updated_at: now,
    };
    await tx.run(
      sql`UPDATE webhook_endpoints SET url = ${next.url}, events = ${next.events}, description = ${next.description},
            updated_at = ${now} WHERE id = ${id}`,
    );
    await auditIn(ctx, tx, `partner:${partnerId}`, 'webhook.update', 'webhook_endpoint', id, {
      url: next.url,
      events: input.events && input.events.length ? input.events : null,
      ...(row.url !== next.url ? { previous_url: row.url } : {}),
    });
    return next;
  });
}

/**
 * The partner's live endpoint, held until the transaction ends (PostgreSQL): a concurrent
 * change of it waits, and what this one read stays what it changes.
 */
async function lockEndpoint(ctx: CoreCtx, tx: Queryable, partnerId: string, id: string): Promise<EndpointRow> {
  const row = await tx.get<EndpointRow>(
    sql`SELECT * FROM webhook_endpoints WHERE id = ${id} AND partner_id = ${partnerId} AND deleted_at IS NULL
         ${forUpdate(ctx.store.dialect)}`,
  );
  if (!row) throw notFound('webhook endpoint', id);
  return row;
}

/** A new secret; the current one keeps signing beside it until the grace period ends. */
export async function rotateSecret(
  ctx: CoreCtx,
  partnerId: string,
  id: string,
  graceMs: number,
): Promise<{ endpoint: EndpointRow; secret: string }> {
  const secret = newSigningSecret();
  const sealed = seal(ctx.masterKey, secret);
  return ctx.store.transaction(async (tx) => {
    // The secret it replaces is the one a rotation just before this one wrote, never an older one.
    const row = await lockEndpoint(ctx, tx, partnerId, id);
    const now = ctx.now();
    const next: EndpointRow = {
      ...row,
      secret: sealed,
      previous_secret: row.secret,
      previous_secret_expires_at: now + graceMs,
      updated_at: now,
    };
    await tx.run(
      sql`UPDATE webhook_endpoints SET secret = ${next.secret}, previous_secret = ${next.previous_secret},
            previous_secret_expires_at = ${next.previous_secret_expires_at}, updated_at = ${now} WHERE id = ${id}`,
    );
    await auditIn(ctx, tx, `partner:${partnerId}`, 'webhook.rotate_secret', 'webhook_endpoint', id, {
      grace_ms: graceMs,
    });
    return { endpoint: next, secret };
  });
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

const disableSql = (id: string, reason: string, now: number) =>
  sql`UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ${reason}, updated_at = ${now}
       WHERE id = ${id} AND status = 'enabled'`;

/** msgd disables an endpoint (410, failing too long), in `q`: the transaction that settles the attempt. False when it was no longer enabled. */
export async function disableEndpointIn(ctx: CoreCtx, q: Queryable, id: string, reason: string): Promise<boolean> {
  const changed = (await q.run(disableSql(id, reason, ctx.now()))).changes === 1;
  if (changed) await auditIn(ctx, q, 'system', 'webhook.disable', 'webhook_endpoint', id, { reason });
  return changed;
}

/** Operator: enable a disabled endpoint; its failure clock starts again. */
export async function enableEndpoint(ctx: CoreCtx, id: string, actor: string): Promise<EndpointRow> {
  return ctx.store.transaction(async (tx) => {
    // Held: of two operators enabling it at once, the second finds it enabled.
    const row = await tx.get<EndpointRow>(
      sql`SELECT * FROM webhook_endpoints WHERE id = ${id} ${forUpdate(ctx.store.dialect)}`,
    );
    if (!row || row.deleted_at !== null) throw notFound('webhook endpoint', id);
    if (row.status === 'enabled') throw new AppError('conflict', `webhook endpoint ${id} is already enabled`);
    const now = ctx.now();
    await tx.run(
      sql`UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, failing_since = NULL, updated_at = ${now}
           WHERE id = ${id}`,
    );
    await auditIn(ctx, tx, actor, 'webhook.enable', 'webhook_endpoint', id, { previous_reason: row.disabled_reason });
    return { ...row, status: 'enabled' as const, disabled_reason: null, failing_since: null, updated_at: now };
  });
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
export async function endpointHealthCounts(ctx: CoreCtx): Promise<{ failing: number; disabled: number }> {
  const row = await ctx.store.get<{ failing: number; disabled: number }>(
    sql`SELECT CAST(COUNT(*) FILTER (WHERE status = 'enabled' AND failing_since IS NOT NULL) AS BIGINT) AS failing,
               CAST(COUNT(*) FILTER (WHERE status = 'disabled') AS BIGINT) AS disabled
          FROM webhook_endpoints WHERE deleted_at IS NULL`,
  );
  return row!;
}
