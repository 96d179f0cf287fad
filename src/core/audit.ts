import type { Queryable } from '../db/query.js';
import type { Row } from '../db/rows.js';
import type { auditLog } from '../db/schema.js';
import { render, sql, type Sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import type { CoreCtx } from './context.js';
import { iso } from '../lib/time.js';
import { settingsChanged, settingsChangedIn } from './settings-version.js';

// audit() and auditEvent() run on the connection itself: they are called inside synchronous
// transactions (db.transaction bodies of other modules). auditIn() and auditEventIn() are the
// same entries written through the store, in a caller's Tx (or the store itself).

export function audit(
  ctx: CoreCtx,
  actor: string,
  action: string,
  targetType: string,
  targetId: string | null,
  details?: Record<string, unknown>,
) {
  // Every operator change is audited; those to settings must be seen by this process at once.
  settingsChanged(ctx.db.sqlite);
  auditEvent(ctx, actor, action, targetType, targetId, details);
}

/** The one audit entry, written by auditEvent() on the connection and auditEventIn() through the store. */
function entry(
  ctx: CoreCtx,
  actor: string,
  action: string,
  targetType: string,
  targetId: string | null,
  details?: Record<string, unknown>,
): Sql {
  return sql`INSERT INTO audit_log (actor, action, target_type, target_id, details, created_at)
    VALUES (${actor}, ${action}, ${targetType}, ${targetId}, ${details ? JSON.stringify(details) : null}, ${ctx.now()})`;
}

/** audit() through the store: in `q`, the caller's transaction (or the store). */
export async function auditIn(
  ctx: CoreCtx,
  q: Queryable,
  actor: string,
  action: string,
  targetType: string,
  targetId: string | null,
  details?: Record<string, unknown>,
): Promise<void> {
  // Every operator change is audited; those to settings must be seen by this process at once.
  settingsChangedIn(ctx.store);
  await auditEventIn(ctx, q, actor, action, targetType, targetId, details);
}

/** auditEvent() through the store: an entry that moves no settings version. */
export async function auditEventIn(
  ctx: CoreCtx,
  q: Queryable,
  actor: string,
  action: string,
  targetType: string,
  targetId: string | null,
  details?: Record<string, unknown>,
): Promise<void> {
  await q.run(entry(ctx, actor, action, targetType, targetId, details));
}

export async function listAudit(ctx: CoreCtx, limit = 100) {
  const rows = await ctx.store.all<Row<typeof auditLog>>(sql`SELECT * FROM audit_log ORDER BY id DESC LIMIT ${limit}`);
  return rows.map((r) => ({
    id: r.id,
    actor: r.actor,
    action: r.action,
    target_type: r.target_type,
    target_id: r.target_id,
    details: r.details ? JSON.parse(r.details) : null,
    created_at: iso(r.created_at),
  }));
}

/**
 * An audit entry that changes no setting (console logins and their failures): written without
 * moving the settings version, so a burst of failed logins does not empty every request cache.
 */
export function auditEvent(
  ctx: CoreCtx,
  actor: string,
  action: string,
  targetType: string,
  targetId: string | null,
  details?: Record<string, unknown>,
) {
  const { text, values } = render(entry(ctx, actor, action, targetType, targetId, details), 'sqlite');
  stmt(ctx.db.sqlite, text).run(...values);
}
