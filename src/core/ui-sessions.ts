import { createHash, randomBytes } from 'node:crypto';
import type { Row } from '../db/rows.js';
import type { uiSessions, users } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
import { newId } from '../lib/ids.js';
import { auditEvent } from './audit.js';
import type { CoreCtx } from './context.js';
import type { Role } from './users.js';

// Console sessions, server-side. The cookie carries a random secret; the table keeps only its
// SHA-256, so a copy of the database logs nobody in. A session is valid while it is within its
// idle and absolute limits, its user is active with a password set no later than the session
// began, and its partner is active: checked on every request, so msgctl's changes bite at once.

export interface SessionUser {
  sessionId: string;
  userId: string;
  email: string;
  role: Role;
  partnerId: string;
  partnerName: string;
  currency: string;
  createdAt: number;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/** Touch last_seen_at at most this often: idle expiry needs no finer resolution. */
const TOUCH_MS = 60_000;

export function createSession(ctx: CoreCtx, userId: string, meta: { ip: string }): { secret: string; id: string } {
  const secret = randomBytes(32).toString('base64url');
  const id = newId('ses');
  const now = ctx.now();
  ctx.db.sqlite
    .transaction(() => {
      stmt(
        ctx.db.sqlite,
        'INSERT INTO ui_sessions (id, hash, user_id, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)',
      ).run(id, sha256(secret), userId, now, now, now + ctx.config.ui.sessionMaxHours * 3_600_000);
      stmt(ctx.db.sqlite, 'UPDATE users SET last_login_at = ? WHERE id = ?').run(now, userId);
      auditEvent(ctx, `user:${userId}`, 'ui.login', 'user', userId, { ip: meta.ip, session: id });
    })
    .immediate();
  return { secret, id };
}

type SessionRow = Pick<Row<typeof uiSessions>, 'id' | 'user_id' | 'created_at' | 'last_seen_at' | 'expires_at'> &
  Pick<Row<typeof users>, 'email' | 'role' | 'status' | 'password_hash' | 'sessions_valid_after' | 'partner_id'> & {
    partner_name: string;
    partner_status: string;
    currency: string;
  };

/** The session's user, or null when the secret names no valid session (an expired one is deleted). */
export function lookupSession(ctx: CoreCtx, secret: string | undefined): SessionUser | null {
  if (!secret || secret.length > 100) return null;
  const row = stmt<[string], SessionRow>(
    ctx.db.sqlite,
    `SELECT s.id, s.user_id, s.created_at, s.last_seen_at, s.expires_at, u.email, u.role, u.status, u.password_hash,
            u.sessions_valid_after, p.id AS partner_id, p.name AS partner_name, p.status AS partner_status, p.currency
       FROM ui_sessions s JOIN users u ON u.id = s.user_id JOIN partners p ON p.id = u.partner_id
      WHERE s.hash = ?`,
  ).get(sha256(secret));
  if (!row) return null;
  const now = ctx.now();
  const idleMs = ctx.config.ui.sessionIdleMinutes * 60_000;
  const expired = row.expires_at <= now || row.last_seen_at + idleMs <= now;
  const revoked =
    row.status !== 'active' ||
    row.partner_status !== 'active' ||
    row.password_hash === null ||
    row.created_at < row.sessions_valid_after;
  if (expired || revoked) {
    stmt(ctx.db.sqlite, 'DELETE FROM ui_sessions WHERE id = ?').run(row.id);
    return null;
  }
  if (now - row.last_seen_at >= TOUCH_MS)
    stmt(ctx.db.sqlite, 'UPDATE ui_sessions SET last_seen_at = ? WHERE id = ?').run(now, row.id);
  return {
    sessionId: row.id,
    userId: row.user_id,
    email: row.email,
    role: row.role,
    partnerId: row.partner_id,
    partnerName: row.partner_name,
    currency: row.currency,
    createdAt: row.created_at,
  };
}

export function endSession(ctx: CoreCtx, sessionId: string, userId: string) {
  stmt(ctx.db.sqlite, 'DELETE FROM ui_sessions WHERE id = ? AND user_id = ?').run(sessionId, userId);
  auditEvent(ctx, `user:${userId}`, 'ui.logout', 'user', userId, { session: sessionId });
}

/** "Log out everywhere": every session of the user, this one included. */
export function endAllSessions(ctx: CoreCtx, userId: string): number {
  const n = stmt(ctx.db.sqlite, 'DELETE FROM ui_sessions WHERE user_id = ?').run(userId).changes;
  auditEvent(ctx, `user:${userId}`, 'ui.logout_everywhere', 'user', userId, { sessions: n });
  return n;
}

/** Expired sessions are deleted on sight; this removes the ones nobody comes back to. */
export function pruneSessions(ctx: CoreCtx): number {
  const now = ctx.now();
  return stmt(ctx.db.sqlite, 'DELETE FROM ui_sessions WHERE expires_at <= ? OR last_seen_at <= ?').run(
    now,
    now - ctx.config.ui.sessionIdleMinutes * 60_000,
  ).changes;
}
