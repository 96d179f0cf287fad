import { createHash, randomBytes } from 'node:crypto';
import type { Row } from '../db/rows.js';
import type { uiPendingLogins } from '../db/schema.js';
import { sql } from '../db/sql.js';
import { newId } from '../lib/ids.js';
import type { CoreCtx } from './context.js';

// A login whose password was right and whose second factor is still to come. The browser
// holds a random secret in a cookie, the table only its SHA-256; the code step accepts a code
// only for this user, within a few minutes, and the login it leads to ends it (single use).

export const PENDING_LOGIN_MS = 5 * 60_000;

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

export interface PendingLogin {
  id: string;
  userId: string;
  /** The password's attempt in the login throttle. */
  attempt: number;
  expiresAt: number;
}

export async function startPendingLogin(ctx: CoreCtx, userId: string, attempt: number): Promise<{ secret: string }> {
  const secret = randomBytes(32).toString('base64url');
  const now = ctx.now();
  await ctx.store.transaction(async (tx) => {
    await tx.run(sql`DELETE FROM ui_pending_logins WHERE expires_at <= ${now}`);
    await tx.run(
      sql`INSERT INTO ui_pending_logins (id, hash, user_id, attempt, created_at, expires_at)
          VALUES (${newId('pl')}, ${sha256(secret)}, ${userId}, ${attempt}, ${now}, ${now + PENDING_LOGIN_MS})`,
    );
  });
  return { secret };
}

/** The pending login this secret names, if it has not expired or been used. */
export async function openPendingLogin(ctx: CoreCtx, secret: string | undefined): Promise<PendingLogin | null> {
  if (!secret || secret.length > 100) return null;
  const row = await ctx.store.get<Pick<Row<typeof uiPendingLogins>, 'id' | 'user_id' | 'attempt' | 'expires_at'>>(
    sql`SELECT id, user_id, attempt, expires_at FROM ui_pending_logins WHERE hash = ${sha256(secret)}`,
  );
  if (!row || row.expires_at <= ctx.now()) return null;
  return { id: row.id, userId: row.user_id, attempt: row.attempt, expiresAt: row.expires_at };
}

/** Use it up; false when another request already did (only one login comes of it). */
export async function endPendingLogin(ctx: CoreCtx, id: string): Promise<boolean> {
  const { changes } = await ctx.store.run(sql`DELETE FROM ui_pending_logins WHERE id = ${id}`);
  return changes === 1;
}
