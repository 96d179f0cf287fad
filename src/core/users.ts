import { createHash, randomBytes } from 'node:crypto';
import type { Row } from '../db/rows.js';
import type { users } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
import { AppError, invalid, notFound } from '../lib/errors.js';
import { normalizeEmail } from '../lib/email.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/time.js';
import { audit } from './audit.js';
import type { CoreCtx } from './context.js';
import { getPartner } from './partners.js';
import { checkPasswordRules, hashPassword, verifyPassword } from './passwords.js';

// Partner users of the web console. The operator invites the first (msgctl user invite); an
// admin user invites more from the console. Both call inviteUser: one rule for both.

export const ROLES = ['admin', 'developer', 'billing'] as const;
export type Role = (typeof ROLES)[number];

/** What each role may see and do in the console. */
export type Area = 'overview' | 'messages' | 'conversations' | 'tokens' | 'webhooks' | 'channels' | 'ledger' | 'users';
const AREAS: Record<Role, readonly Area[]> = {
  admin: ['overview', 'messages', 'conversations', 'tokens', 'webhooks', 'channels', 'ledger', 'users'],
  developer: ['overview', 'messages', 'conversations', 'tokens', 'webhooks', 'channels'],
  billing: ['overview', 'ledger'],
};

export function can(role: Role, area: Area): boolean {
  return AREAS[role].includes(area);
}

export type UserRow = Row<typeof users>;

export const linkHash = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('hex');

function parseRole(role: string): Role {
  if (!(ROLES as readonly string[]).includes(role))
    throw invalid(`unknown role "${role}"`, [{ field: 'role', message: `one of ${ROLES.join(', ')}` }]);
  return role as Role;
}

function parseEmail(email: string): string {
  const e = normalizeEmail(email ?? '');
  if (!e) throw invalid('a valid email address is required', [{ field: 'email', message: 'not a valid address' }]);
  return e.toLowerCase();
}

export function findUserByEmail(ctx: CoreCtx, email: string): UserRow | undefined {
  return stmt<[string], UserRow>(ctx.db.sqlite, 'SELECT * FROM users WHERE email = ?').get(email.trim().toLowerCase());
}

export function getUser(ctx: CoreCtx, id: string): UserRow | undefined {
  return stmt<[string], UserRow>(ctx.db.sqlite, 'SELECT * FROM users WHERE id = ?').get(id);
}

/** A user of this partner, by id or email; another partner's user is not found. */
export function getPartnerUser(ctx: CoreCtx, partnerId: string, ref: string): UserRow {
  const u = stmt<[string, string, string], UserRow>(
    ctx.db.sqlite,
    'SELECT * FROM users WHERE partner_id = ? AND (id = ? OR email = ?)',
  ).get(partnerId, ref, ref.trim().toLowerCase());
  if (!u) throw notFound('user', ref);
  return u;
}

export function listUsers(ctx: CoreCtx, partnerId: string): UserRow[] {
  return stmt<[string], UserRow>(ctx.db.sqlite, 'SELECT * FROM users WHERE partner_id = ? ORDER BY email').all(
    partnerId,
  );
}

export interface IssuedLink {
  user: UserRow;
  /** The link's secret: shown once, only its hash is kept. */
  secret: string;
  expiresAt: number;
}

function issueLink(ctx: CoreCtx, user: UserRow, kind: 'invite' | 'reset'): IssuedLink {
  const secret = randomBytes(32).toString('base64url');
  const now = ctx.now();
  const expiresAt = now + ctx.config.ui.inviteHours * 3_600_000;
  // An older unused link of the user stops working: only the newest one is valid.
  stmt(ctx.db.sqlite, 'UPDATE user_invites SET used_at = ? WHERE user_id = ? AND used_at IS NULL').run(now, user.id);
  stmt(
    ctx.db.sqlite,
    'INSERT INTO user_invites (id, user_id, hash, kind, expires_at, used_at, created_at) VALUES (?, ?, ?, ?, ?, NULL, ?)',
  ).run(newId('inv'), user.id, linkHash(secret), kind, expiresAt, now);
  return { user, secret, expiresAt };
}

/**
 * Invite a user to a partner's console. Inviting an address again that has not accepted yet
 * issues a fresh link (the old one stops working); an address already in use is refused.
 */
export function inviteUser(
  ctx: CoreCtx,
  input: { partner: string; email: string; role: string },
  actor: string,
): IssuedLink {
  const email = parseEmail(input.email);
  const role = parseRole(input.role);
  return ctx.db.sqlite
    .transaction(() => {
      const partner = getPartner(ctx, input.partner);
      const now = ctx.now();
      let user = findUserByEmail(ctx, email);
      if (user && (user.partner_id !== partner.id || user.password_hash !== null))
        throw new AppError('conflict', `${email} already has a console account`);
      if (user) {
        stmt(ctx.db.sqlite, 'UPDATE users SET role = ?, status = ?, updated_at = ? WHERE id = ?').run(
          role,
          'active',
          now,
          user.id,
        );
        user = getUser(ctx, user.id)!;
      } else {
        const id = newId('usr');
        stmt(
          ctx.db.sqlite,
          `INSERT INTO users (id, partner_id, email, role, password_hash, status, sessions_valid_after, created_at, updated_at)
           VALUES (?, ?, ?, ?, NULL, 'active', 0, ?, ?)`,
        ).run(id, partner.id, email, role, now, now);
        user = getUser(ctx, id)!;
      }
      audit(ctx, actor, 'user.invite', 'user', user.id, { partner: partner.slug, email, role });
      return issueLink(ctx, user, 'invite');
    })
    .immediate();
}

/** A reset link for an existing user; the current password keeps working until the link is used. */
export function resetUser(ctx: CoreCtx, partnerId: string, ref: string, actor: string): IssuedLink {
  return ctx.db.sqlite
    .transaction(() => {
      const user = getPartnerUser(ctx, partnerId, ref);
      if (user.status !== 'active') throw new AppError('conflict', `${user.email} is disabled; enable it first`);
      audit(ctx, actor, 'user.reset', 'user', user.id, { email: user.email });
      return issueLink(ctx, user, user.password_hash === null ? 'invite' : 'reset');
    })
    .immediate();
}

function endSessionsOf(ctx: CoreCtx, userId: string) {
  stmt(ctx.db.sqlite, 'DELETE FROM ui_sessions WHERE user_id = ?').run(userId);
}

/** Disabled users cannot log in; their sessions and unused links end now. */
export function setUserStatus(
  ctx: CoreCtx,
  partnerId: string,
  ref: string,
  status: 'active' | 'disabled',
  actor: string,
): UserRow {
  return ctx.db.sqlite
    .transaction(() => {
      const user = getPartnerUser(ctx, partnerId, ref);
      if (user.status === status) throw new AppError('conflict', `${user.email} is already ${status}`);
      const now = ctx.now();
      stmt(ctx.db.sqlite, 'UPDATE users SET status = ?, updated_at = ? WHERE id = ?').run(status, now, user.id);
      if (status === 'disabled') {
        endSessionsOf(ctx, user.id);
        stmt(ctx.db.sqlite, 'UPDATE user_invites SET used_at = ? WHERE user_id = ? AND used_at IS NULL').run(
          now,
          user.id,
        );
      }
      audit(ctx, actor, status === 'disabled' ? 'user.disable' : 'user.enable', 'user', user.id, {
        email: user.email,
      });
      return getUser(ctx, user.id)!;
    })
    .immediate();
}

export interface LinkInfo {
  user: UserRow;
  kind: 'invite' | 'reset';
  partnerName: string;
}

/** The link's user if the link can still be used: unused, unexpired, user and partner active. */
export function openLink(ctx: CoreCtx, secret: string): LinkInfo | null {
  if (typeof secret !== 'string' || secret.length < 20 || secret.length > 100) return null;
  const row = stmt<[string], { user_id: string; kind: 'invite' | 'reset'; expires_at: number; used_at: number | null }>(
    ctx.db.sqlite,
    'SELECT user_id, kind, expires_at, used_at FROM user_invites WHERE hash = ?',
  ).get(linkHash(secret));
  if (!row || row.used_at !== null || row.expires_at <= ctx.now()) return null;
  const user = getUser(ctx, row.user_id);
  if (!user || user.status !== 'active') return null;
  const partner = getPartner(ctx, user.partner_id);
  if (partner.status !== 'active') return null;
  return { user, kind: row.kind, partnerName: partner.name };
}

/** Set the password through a link (single use); every session of the user ends. */
export async function acceptLink(ctx: CoreCtx, secret: string, password: string): Promise<UserRow> {
  checkPasswordRules(password);
  if (!openLink(ctx, secret)) throw expiredLink();
  const hash = await hashPassword(password);
  return ctx.db.sqlite
    .transaction(() => {
      // Checked again after the hash: the link may have been used meanwhile.
      const info = openLink(ctx, secret);
      if (!info) throw expiredLink();
      const now = ctx.now();
      stmt(ctx.db.sqlite, 'UPDATE user_invites SET used_at = ? WHERE hash = ?').run(now, linkHash(secret));
      setPassword(ctx, info.user.id, hash, now);
      audit(
        ctx,
        `user:${info.user.id}`,
        info.kind === 'invite' ? 'user.accept_invite' : 'user.reset_password',
        'user',
        info.user.id,
      );
      return getUser(ctx, info.user.id)!;
    })
    .immediate();
}

function setPassword(ctx: CoreCtx, userId: string, hash: string, now: number) {
  stmt(ctx.db.sqlite, 'UPDATE users SET password_hash = ?, sessions_valid_after = ?, updated_at = ? WHERE id = ?').run(
    hash,
    now,
    now,
    userId,
  );
  endSessionsOf(ctx, userId);
}

const expiredLink = () =>
  new AppError('link_expired', 'this link has expired or was already used; ask your admin for a new one');

/** Change a password knowing the current one; every session of the user ends. */
export async function changePassword(ctx: CoreCtx, userId: string, current: string, next: string): Promise<void> {
  const user = getUser(ctx, userId);
  if (!user || !(await verifyPassword(current ?? '', user.password_hash)))
    throw invalid('the current password is not right', [{ field: 'current', message: 'not right' }]);
  checkPasswordRules(next);
  const hash = await hashPassword(next);
  ctx.db.sqlite
    .transaction(() => {
      setPassword(ctx, userId, hash, ctx.now());
      audit(ctx, `user:${userId}`, 'user.change_password', 'user', userId);
    })
    .immediate();
}

/** The user whose email and password these are, if active with an active partner; else null. */
export async function checkLogin(ctx: CoreCtx, email: string, password: string): Promise<UserRow | null> {
  const user = typeof email === 'string' && email.length <= 254 ? findUserByEmail(ctx, email) : undefined;
  const ok = await verifyPassword(typeof password === 'string' ? password : '', user?.password_hash ?? null);
  if (!ok || !user || user.status !== 'active') return null;
  if (getPartner(ctx, user.partner_id).status !== 'active') return null;
  return user;
}

export function userJson(u: UserRow) {
  return {
    id: u.id,
    partner_id: u.partner_id,
    email: u.email,
    role: u.role,
    status: u.status,
    state: u.status === 'disabled' ? 'disabled' : u.password_hash === null ? 'invited' : 'active',
    two_factor: u.totp_enabled_at !== null,
    last_login_at: iso(u.last_login_at),
    created_at: iso(u.created_at),
  };
}
