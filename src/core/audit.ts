import { desc } from 'drizzle-orm';
import { auditLog } from '../db/schema.js';
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
  ctx.db.orm
    .insert(auditLog)
    .values({
      actor,
      action,
      targetType,
      targetId,
      details: details ? JSON.stringify(details) : null,
      createdAt: ctx.now(),
    })
    .run();
}

export function listAudit(ctx: CoreCtx, limit = 100) {
  return ctx.db.orm
    .select()
    .from(auditLog)
    .orderBy(desc(auditLog.id))
    .limit(limit)
    .all()
    .map((r) => ({
      id: r.id,
      actor: r.actor,
      action: r.action,
      target_type: r.targetType,
      target_id: r.targetId,
      details: r.details ? JSON.parse(r.details) : null,
      created_at: iso(r.createdAt),
    }));
}
