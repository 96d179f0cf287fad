import { createHash, randomBytes } from 'node:crypto';
import type { Row } from '../db/rows.js';
import type { uiSessions, users } from '../db/schema.js';
import { sql } from '../db/sql.js';
import { notFound } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { auditEventIn } from './audit.js';
import type { CoreCtx } from './context.js';
import { endEverywhere, membershipsOf, type PartnerMembership, type Role } from './users.js';

// Console sessions, server-side. The cookie carries a random secret; the table keeps only its
// SHA-256, so a copy of the database logs nobody in. A session belongs to a person and carries
// the partner they picked. It is valid while it is within its idle and absolute limits, its
// person is active with a password set no later than the session began, and the picked
// partner is active with the person's membership active: checked on every request, so
// msgctl's changes bite at once.

/** A logged-in person, with or without a partner picked. */
export interface SessionPerson {
  sessionId: string;
  userId: string;
  email: string;
  createdAt: number;
  /** The partners the person may open (active memberships of active partners). */
  partners: PartnerMembership[];
  /** Invitations waiting for an answer. */
  invitations: PartnerMembership[];
}

/** A logged-in person working in a partner: the membership's role decides what they see. */
export interface SessionUser extends SessionPerson {
  role: Role;
  partnerId: string;
  partnerName: string;
  currency: string;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/** Touch last_seen_at at most this often: idle expiry needs no finer resolution. */
const TOUCH_MS = 60_000;

/**
 * A new session for a person who has just logged in. With exactly one partner to open it is
 * picked at once (or the one asked for, when the person may open it); otherwise the person
 * picks one (or answers an invitation) first.
 */
export async function createSession(
  ctx: CoreCtx,
  userId: string,
  meta: { ip: string; partnerId?: string },
): Promise<{ secret: string; id: string; partnerId: string | null }> {
  const secret = randomBytes(32).toString('base64url');
  const id = newId('ses');
  const now = ctx.now();
  const active = (await membershipsOf(ctx, userId)).filter((m) => m.status === 'active');
  const partnerId =
    active.find((m) => m.partner_id === meta.partnerId)?.partner_id ??
    (active.length === 1 ? active[0].partner_id : null);
  await ctx.store.transaction(async (tx) => {
    await tx.run(
      sql`INSERT INTO ui_sessions (id, hash, user_id, partner_id, created_at, last_seen_at, expires_at)
          VALUES (${id}, ${sha256(secret)}, ${userId}, ${partnerId}, ${now}, ${now},
                  ${now + ctx.config.ui.sessionMaxHours * 3_600_000})`,
    );
    await tx.run(sql`UPDATE users SET last_login_at = ${now} WHERE id = ${userId}`);
    await auditEventIn(ctx, tx, `user:${userId}`, 'ui.login', 'user', userId, {
      ip: meta.ip,
      session: id,
      partner: partnerId,
    });
  });
  return { secret, id, partnerId };
}

/** Work in another of the person's partners in the current session; 404 for a partner they may not open. */
export async function selectPartner(ctx: CoreCtx, session: SessionPerson, partnerId: string): Promise<void> {
  if (!(await membershipsOf(ctx, session.userId)).some((m) => m.status === 'active' && m.partner_id === partnerId))
    throw notFound('partner', partnerId);
  await ctx.store.run(sql`UPDATE ui_sessions SET partner_id = ${partnerId} WHERE id = ${session.sessionId}`);
  await auditEventIn(ctx, ctx.store, `user:${session.userId}`, 'ui.switch_partner', 'user', session.userId, {
    session: session.sessionId,
    partner: partnerId,
  });
}

type SessionRow = Pick<
  Row<typeof uiSessions>,
  'id' | 'user_id' | 'partner_id' | 'created_at' | 'last_seen_at' | 'expires_at'
> &
  Pick<Row<typeof users>, 'email' | 'status' | 'password_hash' | 'sessions_valid_after'>;

/**
 * The session's person and, when a partner is picked, their place in it; null when the secret
 * names no valid session (an expired or revoked one is deleted).
 */
export async function lookupSession(
  ctx: CoreCtx,
  secret: string | undefined,
): Promise<{ person: SessionPerson; user: SessionUser | null } | null> {
  if (!secret || secret.length > 100) return null;
  const row = await ctx.store.get<SessionRow>(
    sql`SELECT s.id, s.user_id, s.partner_id, s.created_at, s.last_seen_at, s.expires_at, u.email, u.status,
               u.password_hash, u.sessions_valid_after
          FROM ui_sessions s JOIN users u ON u.id = s.user_id
         WHERE s.hash = ${sha256(secret)}`,
  );
  if (!row) return null;
  const now = ctx.now();
  const idleMs = ctx.config.ui.sessionIdleMinutes * 60_000;
  const expired = row.expires_at <= now || row.last_seen_at + idleMs <= now;
  const all = expired ? [] : await membershipsOf(ctx, row.user_id);
  const partners = all.filter((m) => m.status === 'active');
  const current = row.partner_id === null ? null : (partners.find((m) => m.partner_id === row.partner_id) ?? null);
  const revoked =
    row.status !== 'active' ||
    row.password_hash === null ||
    row.created_at < row.sessions_valid_after ||
    all.length === 0 ||
    // The picked partner was suspended, or the membership disabled or removed: access ends now.
    (row.partner_id !== null && current === null);
  if (expired || revoked) {
    await ctx.store.run(sql`DELETE FROM ui_sessions WHERE id = ${row.id}`);
    return null;
  }
  if (now - row.last_seen_at >= TOUCH_MS)
    await ctx.store.run(sql`UPDATE ui_sessions SET last_seen_at = ${now} WHERE id = ${row.id}`);
  const person: SessionPerson = {
    sessionId: row.id,
    userId: row.user_id,
    email: row.email,
    createdAt: row.created_at,
    partners,
    invitations: all.filter((m) => m.status === 'pending'),
  };
  return {
    person,
    user: current
      ? {
          ...person,
          role: current.role,
          partnerId: current.partner_id,
          partnerName: current.partner_name,
          currency: current.currency,
        }
      : null,
  };
}

export async function endSession(ctx: CoreCtx, sessionId: string, userId: string): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    await tx.run(sql`DELETE FROM ui_sessions WHERE id = ${sessionId} AND user_id = ${userId}`);
    await auditEventIn(ctx, tx, `user:${userId}`, 'ui.logout', 'user', userId, { session: sessionId });
  });
}

/** "Log out everywhere": every session of the person, this one included, and every unused invite or reset link. */
export async function endAllSessions(ctx: CoreCtx, userId: string): Promise<number> {
  const n = await endEverywhere(ctx, userId);
  await auditEventIn(ctx, ctx.store, `user:${userId}`, 'ui.logout_everywhere', 'user', userId, { sessions: n });
  return n;
}

/** Expired sessions are deleted on sight; this removes the ones nobody comes back to. */
export async function pruneSessions(ctx: CoreCtx): Promise<number> {
  const now = ctx.now();
  const idleSince = now - ctx.config.ui.sessionIdleMinutes * 60_000;
  const { changes } = await ctx.store.run(
    sql`DELETE FROM ui_sessions WHERE expires_at <= ${now} OR last_seen_at <= ${idleSince}`,
  );
  return changes;
}
