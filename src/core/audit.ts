import type { Row } from '../db/rows.js';
import type { auditLog } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
import type { CoreCtx } from './context.js';
import { iso } from '../lib/time.js';
import { settingsChanged } from './settings-version.js';

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
  stmt(
    ctx.db.sqlite,
    'INSERT INTO audit_log (actor, action, target_type, target_id, details, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  ).run(actor, action, targetType, targetId, details ? JSON.stringify(details) : null, ctx.now());
}

export function listAudit(ctx: CoreCtx, limit = 100) {
  return stmt<[number], Row<typeof auditLog>>(ctx.db.sqlite, 'SELECT * FROM audit_log ORDER BY id DESC LIMIT ?')
    .all(limit)
    .map((r) => ({
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
  stmt(
    ctx.db.sqlite,
    'INSERT INTO audit_log (actor, action, target_type, target_id, details, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  ).run(actor, action, targetType, targetId, details ? JSON.stringify(details) : null, ctx.now());
}
