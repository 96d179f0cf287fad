import { createHash, randomBytes } from 'node:crypto';
import type { Row } from '../db/rows.js';
import type { memberships, users } from '../db/schema.js';
import type { Queryable, Tx } from '../db/query.js';
import { sql } from '../db/sql.js';
import { AppError, invalid, notFound } from '../lib/errors.js';
import { loginEmail, normalizeEmail } from '../lib/email.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/time.js';
import { auditIn } from './audit.js';
import type { CoreCtx } from './context.js';
import { readPartner } from './partners.js';
import { checkPasswordRules, hashPassword, passwordContext, verifyPassword } from './passwords.js';

// People of the web console. A user is a person (the email is the login, one password); what a
// person may do for a partner is a membership with a role. The operator invites a partner's
// first admin (msgctl user invite); an admin invites more from the console. Both call
// inviteUser: one rule for both. An invitation never tells the inviter whether the address is
// known elsewhere: the answer is the same link and message either way.

export const ROLES = ['admin', 'developer', 'billing'] as const;
export type Role = (typeof ROLES)[number];

/** What each role may see and do in the console. */
export type Area =
  | 'overview'
  | 'messages'
  | 'conversations'
  | 'tokens'
  | 'webhooks'
  | 'channels'
  | 'templates'
  | 'ledger'
  | 'users'
  | 'suppressions'
  /** Adding to and removing from the suppression list (reading it is 'suppressions'). */
  | 'suppressions-manage';
const AREAS: Record<Role, readonly Area[]> = {
  admin: [
    'overview',
    'messages',
    'conversations',
    'tokens',
    'webhooks',
    'channels',
    'templates',
    'ledger',
    'users',
    'suppressions',
    'suppressions-manage',
  ],
  developer: [
    'overview',
    'messages',
    'conversations',
    'tokens',
    'webhooks',
    'channels',
    'templates',
    'suppressions',
    'suppressions-manage',
  ],
  billing: ['overview', 'ledger', 'suppressions'],
};

export function can(role: Role, area: Area): boolean {
  return AREAS[role].includes(area);
}

export type UserRow = Row<typeof users>;
export type MembershipRow = Row<typeof memberships>;

/** A membership with its person's email and login facts: one row of a partner's Users list. */
export interface Member {
  membership_id: string;
  user_id: string;
  partner_id: string;
  email: string;
  role: Role;
  status: MembershipRow['status'];
  accept_by_link: number;
  has_password: number;
  /** 1 when the person has two-factor authentication on. */
  two_factor: number;
  invited_by: string | null;
  last_login_at: number | null;
  created_at: number;
  accepted_at: number | null;
}

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

export async function findUserByEmail(
  ctx: CoreCtx,
  email: string,
  q: Queryable = ctx.store,
): Promise<UserRow | undefined> {
  return q.get<UserRow>(sql`SELECT * FROM users WHERE email = ${loginEmail(email)}`);
}

export async function getUser(ctx: CoreCtx, id: string, q: Queryable = ctx.store): Promise<UserRow | undefined> {
  return q.get<UserRow>(sql`SELECT * FROM users WHERE id = ${id}`);
}

// Flags as 0/1 integers on every store (a bare IS NOT NULL is a boolean on PostgreSQL).
const MEMBER_SELECT = sql`SELECT m.id AS membership_id, m.user_id, m.partner_id, u.email, m.role, m.status, m.accept_by_link,
       CASE WHEN u.password_hash IS NULL THEN 0 ELSE 1 END AS has_password,
       CASE WHEN u.totp_enabled_at IS NULL THEN 0 ELSE 1 END AS two_factor,
       m.invited_by, u.last_login_at, m.created_at, m.accepted_at
  FROM memberships m JOIN users u ON u.id = m.user_id`;

/**
 * A member of this partner, by user id or email (any case), resolved once: every check and
 * change that follows uses the row found here. Another partner's person is not found.
 */
export async function getMember(
  ctx: CoreCtx,
  partnerId: string,
  ref: string,
  q: Queryable = ctx.store,
): Promise<Member> {
  const r = typeof ref === 'string' ? ref.trim() : '';
  const m = await q.get<Member>(
    sql`${MEMBER_SELECT} WHERE m.partner_id = ${partnerId} AND (u.id = ${r} OR u.email = ${loginEmail(r)})`,
  );
  if (!m) throw notFound('user', ref);
  return m;
}

export async function listMembers(ctx: CoreCtx, partnerId: string): Promise<Member[]> {
  return ctx.store.all<Member>(sql`${MEMBER_SELECT} WHERE m.partner_id = ${partnerId} ORDER BY u.email`);
}

/** The other partners a person belongs to (in any state), for the operator's notices. */
export async function otherPartners(
  ctx: CoreCtx,
  userId: string,
  partnerId: string,
  q: Queryable = ctx.store,
): Promise<number> {
  const row = await q.get<{ n: number }>(
    sql`SELECT COUNT(*) AS n FROM memberships WHERE user_id = ${userId} AND partner_id <> ${partnerId}`,
  );
  return Number(row!.n);
}

export interface IssuedLink {
  member: Member;
  partner: { id: string; slug: string; name: string };
  kind: LinkKind;
  /** The link's secret: shown once, only its hash is kept. */
  secret: string;
  expiresAt: number;
}

export type LinkKind = 'invite' | 'join' | 'reset';

/** Unused invite and reset links of a person stop working (join links only ask to log in). */
async function endPasswordLinks(tx: Tx, userId: string, now: number) {
  await tx.run(
    sql`UPDATE user_invites SET used_at = ${now}
         WHERE user_id = ${userId} AND used_at IS NULL AND kind IN ('invite', 'reset')`,
  );
}

async function endMembershipLinks(tx: Tx, membershipId: string, now: number) {
  await tx.run(sql`UPDATE user_invites SET used_at = ${now} WHERE membership_id = ${membershipId} AND used_at IS NULL`);
}

/**
 * A new link. A reset link from the console is bound to the membership it was issued for, so it
 * works only while the policy that allowed it still holds (see openLink); the operator's reset
 * links are bound to nothing.
 */
async function issueLink(
  ctx: CoreCtx,
  tx: Tx,
  member: Member,
  kind: LinkKind,
  bound = kind !== 'reset',
): Promise<IssuedLink> {
  const secret = randomBytes(32).toString('base64url');
  const now = ctx.now();
  const expiresAt = now + ctx.config.ui.inviteHours * 3_600_000;
  // Only the newest link of a membership (or the newest reset of a person) works.
  if (kind === 'reset')
    await tx.run(
      sql`UPDATE user_invites SET used_at = ${now}
           WHERE user_id = ${member.user_id} AND used_at IS NULL AND kind = 'reset'`,
    );
  else await endMembershipLinks(tx, member.membership_id, now);
  await tx.run(
    sql`INSERT INTO user_invites (id, user_id, hash, kind, membership_id, expires_at, used_at, created_at)
        VALUES (${newId('inv')}, ${member.user_id}, ${linkHash(secret)}, ${kind},
                ${bound ? member.membership_id : null}, ${expiresAt}, NULL, ${now})`,
  );
  const p = await readPartner(tx, member.partner_id);
  return { member, partner: { id: p.id, slug: p.slug, name: p.name }, kind, secret, expiresAt };
}

/**
 * The link that goes with a pending membership. A person with no password and no membership
 * elsewhere gets a link that sets the password; anyone else a link that asks them to log in
 * and accept, so a link shown to one partner's admin never opens another partner's console.
 */
async function pendingLink(ctx: CoreCtx, tx: Tx, member: Member): Promise<IssuedLink> {
  const solo = !member.has_password && (await otherPartners(ctx, member.user_id, member.partner_id, tx)) === 0;
  return issueLink(ctx, tx, member, solo ? 'invite' : 'join');
}

/**
 * Invite a person to a partner's console with a role: a pending membership and a link, the
 * same answer whether or not the address is known to msgd. Inviting again while the invitation
 * is pending issues a fresh link (the old one stops working); a member of this partner already
 * (active or disabled) is refused.
 */
export async function inviteUser(
  ctx: CoreCtx,
  input: { partner: string; email: string; role: string },
  actor: string,
): Promise<IssuedLink> {
  const email = parseEmail(input.email);
  const role = parseRole(input.role);
  return ctx.store.transaction(async (tx) => {
    const partner = await readPartner(tx, input.partner);
    const now = ctx.now();
    // The same address invited at once by several requests (PostgreSQL runs them side by side):
    // an insert another transaction made first is waited for and then read, never a 500.
    let user = await findUserByEmail(ctx, email, tx);
    if (!user) {
      await tx.run(
        sql`INSERT INTO users (id, email, password_hash, status, sessions_valid_after, created_at, updated_at)
            VALUES (${newId('usr')}, ${email}, NULL, 'active', 0, ${now}, ${now}) ON CONFLICT (email) DO NOTHING`,
      );
      user = (await findUserByEmail(ctx, email, tx))!;
    }
    const membership = () =>
      tx.get<MembershipRow>(sql`SELECT * FROM memberships WHERE user_id = ${user.id} AND partner_id = ${partner.id}`);
    let existing = await membership();
    if (!existing) {
      const inserted = await tx.run(
        sql`INSERT INTO memberships (id, user_id, partner_id, role, status, accept_by_link, invited_by, created_at, accepted_at, updated_at)
            VALUES (${newId('mem')}, ${user.id}, ${partner.id}, ${role}, 'pending', ${user.password_hash === null ? 1 : 0},
                    ${actor}, ${now}, NULL, ${now})
            ON CONFLICT (user_id, partner_id) DO NOTHING`,
      );
      if (inserted.changes === 0) existing = await membership();
    }
    if (existing && existing.status !== 'pending')
      throw new AppError('conflict', `${email} is already a user of ${partner.name}`);
    if (existing)
      await tx.run(
        sql`UPDATE memberships SET role = ${role}, invited_by = ${actor}, updated_at = ${now} WHERE id = ${existing.id}`,
      );
    const member = await getMember(ctx, partner.id, user.id, tx);
    await auditIn(ctx, tx, actor, 'user.invite', 'user', user.id, { partner: partner.slug, email, role });
    return pendingLink(ctx, tx, member);
  });
}

/** Who issues a reset: the operator (msgctl) may reset anyone; a partner's admin only some. */
export type ResetBy = 'operator' | 'console';

/**
 * A new link for a member. A pending invitation gets a fresh invitation link. For an accepted
 * member, a reset link: the current password keeps working until the link is used. A reset
 * link opens every partner the person belongs to, so from the console an admin may reset only
 * a developer or billing user who belongs to no other partner; admins, and people of several
 * partners, are reset by the operator.
 */
export async function resetUser(
  ctx: CoreCtx,
  partnerId: string,
  ref: string,
  actor: string,
  by: ResetBy,
): Promise<IssuedLink> {
  return ctx.store.transaction(async (tx) => {
    const member = await getMember(ctx, partnerId, ref, tx);
    if (member.status === 'disabled')
      throw new AppError('conflict', `${member.email} is disabled for this partner; enable it first`);
    if (member.status === 'pending') {
      await auditIn(ctx, tx, actor, 'user.reinvite', 'user', member.user_id, { email: member.email });
      // The operator may hand a person with no password the link that sets it.
      return by === 'operator' && !member.has_password
        ? issueLink(ctx, tx, member, 'invite')
        : pendingLink(ctx, tx, member);
    }
    if (by === 'console' && (member.role === 'admin' || (await otherPartners(ctx, member.user_id, partnerId, tx)) > 0))
      throw new AppError(
        'forbidden',
        `the console issues reset links only for developer and billing users who use no other partner's console; ask your operator to run: msgctl user reset <partner> ${member.email}`,
      );
    await auditIn(ctx, tx, actor, 'user.reset', 'user', member.user_id, { email: member.email });
    return member.has_password
      ? issueLink(ctx, tx, member, 'reset', by === 'console')
      : issueLink(ctx, tx, member, 'invite');
  });
}

/** Sessions of a person that are in this partner end (another partner's sessions stay). */
async function endPartnerSessions(tx: Tx, userId: string, partnerId: string) {
  await tx.run(sql`DELETE FROM ui_sessions WHERE user_id = ${userId} AND partner_id = ${partnerId}`);
}

async function endSessionsOf(tx: Tx, userId: string): Promise<number> {
  return (await tx.run(sql`DELETE FROM ui_sessions WHERE user_id = ${userId}`)).changes;
}

/**
 * Disable or enable a membership. A disabled member's sessions in this partner end at once and
 * its unused links stop working; enabling brings back what it was (pending until accepted).
 */
export async function setUserStatus(
  ctx: CoreCtx,
  partnerId: string,
  ref: string,
  status: 'active' | 'disabled',
  actor: string,
): Promise<Member> {
  return ctx.store.transaction(async (tx) => {
    const member = await getMember(ctx, partnerId, ref, tx);
    const enabled = member.status !== 'disabled';
    if ((status === 'disabled') !== enabled)
      throw new AppError('conflict', `${member.email} is already ${status === 'active' ? 'enabled' : 'disabled'}`);
    const now = ctx.now();
    const next = status === 'disabled' ? 'disabled' : member.accepted_at === null ? 'pending' : 'active';
    await tx.run(sql`UPDATE memberships SET status = ${next}, updated_at = ${now} WHERE id = ${member.membership_id}`);
    if (status === 'disabled') {
      await endPartnerSessions(tx, member.user_id, partnerId);
      await endMembershipLinks(tx, member.membership_id, now);
    }
    await auditIn(ctx, tx, actor, status === 'disabled' ? 'user.disable' : 'user.enable', 'user', member.user_id, {
      email: member.email,
    });
    return getMember(ctx, partnerId, member.user_id, tx);
  });
}

/** A person left without any membership is deleted, with their sessions and links: the address is free again. */
async function deleteIfAlone(tx: Tx, userId: string): Promise<boolean> {
  const left = await tx.get<{ n: number }>(sql`SELECT COUNT(*) AS n FROM memberships WHERE user_id = ${userId}`);
  if (Number(left!.n) > 0) return false;
  await endSessionsOf(tx, userId);
  await tx.run(sql`DELETE FROM user_invites WHERE user_id = ${userId}`);
  await tx.run(sql`DELETE FROM users WHERE id = ${userId}`);
  return true;
}

/**
 * End a membership: the person's sessions in this partner end and its links stop working. A
 * person left without any membership is deleted with their sessions and links, so the address
 * is free again everywhere.
 */
export async function removeUser(ctx: CoreCtx, partnerId: string, ref: string, actor: string): Promise<Member> {
  return ctx.store.transaction(async (tx) => {
    const member = await getMember(ctx, partnerId, ref, tx);
    await endPartnerSessions(tx, member.user_id, partnerId);
    await tx.run(sql`DELETE FROM user_invites WHERE membership_id = ${member.membership_id}`);
    // A removal running beside this one (PostgreSQL) may have deleted it first: then it is not found.
    const removed = await tx.run(sql`DELETE FROM memberships WHERE id = ${member.membership_id}`);
    if (removed.changes === 0) throw notFound('user', ref);
    const deleted = await deleteIfAlone(tx, member.user_id);
    await auditIn(ctx, tx, actor, 'user.remove', 'user', member.user_id, {
      email: member.email,
      role: member.role,
      person_deleted: deleted,
    });
    return member;
  });
}

/** A partner the person may open, or an invitation waiting for them. */
export interface PartnerMembership {
  partner_id: string;
  partner_name: string;
  partner_slug: string;
  currency: string;
  role: Role;
  status: 'active' | 'pending';
  created_at: number;
}

/** The person's active memberships and pending invitations, in partners that are active. */
export async function membershipsOf(
  ctx: CoreCtx,
  userId: string,
  q: Queryable = ctx.store,
): Promise<PartnerMembership[]> {
  return q.all<PartnerMembership>(
    sql`SELECT m.partner_id, p.name AS partner_name, p.slug AS partner_slug, p.currency, m.role, m.status,
               m.created_at
          FROM memberships m JOIN partners p ON p.id = m.partner_id
         WHERE m.user_id = ${userId} AND m.status IN ('active', 'pending') AND p.status = 'active'
         ORDER BY p.name, p.id`,
  );
}

async function acceptMembership(ctx: CoreCtx, tx: Tx, membershipId: string, userId: string, now: number) {
  // Conditional: an invitation accepted, removed or changed since it was read is not accepted again.
  const { changes } = await tx.run(
    sql`UPDATE memberships SET status = 'active', accepted_at = ${now}, updated_at = ${now}
         WHERE id = ${membershipId} AND status = 'pending'`,
  );
  if (changes === 0) throw expiredLink();
  await endMembershipLinks(tx, membershipId, now);
  await auditIn(ctx, tx, `user:${userId}`, 'user.accept_invite', 'user', userId, { membership: membershipId });
}

/**
 * Decline an invitation while logged in. Accepting takes the invitation's own link, opened while
 * logged in (acceptJoinLink): a password proves only the person who set it, and whoever was shown
 * the link that set it (another partner's admin) must not take this partner's invitation with it.
 */
export async function declineInvitation(ctx: CoreCtx, userId: string, partnerId: string): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    const m = await tx.get<MembershipRow>(
      sql`SELECT * FROM memberships WHERE user_id = ${userId} AND partner_id = ${partnerId} AND status = 'pending'`,
    );
    if (!m || (await readPartner(tx, partnerId)).status !== 'active') throw notFound('invitation', partnerId);
    await tx.run(sql`DELETE FROM user_invites WHERE membership_id = ${m.id}`);
    await tx.run(sql`DELETE FROM memberships WHERE id = ${m.id}`);
    await auditIn(ctx, tx, `user:${userId}`, 'user.decline_invite', 'user', userId, { partner: partnerId });
    await deleteIfAlone(tx, userId);
  });
}

export interface LinkInfo {
  user: UserRow;
  kind: LinkKind;
  partnerName: string | null;
  /** The role an invite or join link offers. */
  role: Role | null;
  membershipId: string | null;
}

type LinkRow = {
  user_id: string;
  kind: LinkKind;
  membership_id: string | null;
  expires_at: number;
  used_at: number | null;
};

/** The link's person if the link can still be used: unused, unexpired, and what it is for still open. */
export async function openLink(ctx: CoreCtx, secret: string, q: Queryable = ctx.store): Promise<LinkInfo | null> {
  if (typeof secret !== 'string' || secret.length < 20 || secret.length > 100) return null;
  const row = await q.get<LinkRow>(
    sql`SELECT user_id, kind, membership_id, expires_at, used_at FROM user_invites WHERE hash = ${linkHash(secret)}`,
  );
  if (!row || row.used_at !== null || row.expires_at <= ctx.now()) return null;
  const user = await getUser(ctx, row.user_id, q);
  if (!user || user.status !== 'active') return null;
  if (row.kind === 'reset') {
    // A reset opens the person's partners: it is good while they have one to open.
    if (!(await membershipsOf(ctx, user.id, q)).length) return null;
    // One from the console holds only while the person is still a developer or billing member of
    // that partner alone: once they belong to another partner too, or became an admin, the admin
    // who was shown the link must not set the password that opens those.
    if (row.membership_id !== null) {
      const m = await q.get<MembershipRow>(sql`SELECT * FROM memberships WHERE id = ${row.membership_id}`);
      if (!m || m.status !== 'active' || m.role === 'admin' || (await otherPartners(ctx, user.id, m.partner_id, q)) > 0)
        return null;
    }
    return { user, kind: row.kind, partnerName: null, role: null, membershipId: null };
  }
  const m = await q.get<MembershipRow & { partner_name: string; partner_status: string }>(
    sql`SELECT m.*, p.name AS partner_name, p.status AS partner_status
          FROM memberships m JOIN partners p ON p.id = m.partner_id WHERE m.id = ${row.membership_id ?? ''}`,
  );
  if (!m || m.status !== 'pending' || m.partner_status !== 'active') return null;
  return { user, kind: row.kind, partnerName: m.partner_name, role: m.role, membershipId: m.id };
}

/** The words a password of this person must not be built on. */
async function contextOf(ctx: CoreCtx, user: UserRow): Promise<string[]> {
  const rows = await ctx.store.all<{ name: string; slug: string }>(
    sql`SELECT p.name, p.slug FROM memberships m JOIN partners p ON p.id = m.partner_id
         WHERE m.user_id = ${user.id} ORDER BY p.id`,
  );
  return passwordContext(
    user.email,
    rows.flatMap((p) => [p.name, p.slug]),
  );
}

/**
 * Set the password through an invite or reset link (single use). An invite link also accepts
 * its membership. Every session and every other invite or reset link of the person ends.
 */
export async function acceptLink(ctx: CoreCtx, secret: string, password: string): Promise<UserRow> {
  const first = await openLink(ctx, secret);
  if (!first || first.kind === 'join') throw expiredLink();
  await checkPasswordRules(password, await contextOf(ctx, first.user));
  const hash = await hashPassword(password);
  return ctx.store.transaction(async (tx) => {
    // Checked again after the hash: the link may have been used meanwhile.
    const info = await openLink(ctx, secret, tx);
    if (!info || info.kind === 'join') throw expiredLink();
    const now = ctx.now();
    // Conditional: of two uses racing, the one that did not mark the link used is refused, on
    // every store (PostgreSQL's second UPDATE waits for the first and finds the link used).
    const { changes } = await tx.run(
      sql`UPDATE user_invites SET used_at = ${now} WHERE hash = ${linkHash(secret)} AND used_at IS NULL`,
    );
    if (changes === 0) throw expiredLink();
    await setPassword(tx, info.user.id, hash, now);
    if (info.kind === 'invite' && info.membershipId)
      await acceptMembership(ctx, tx, info.membershipId, info.user.id, now);
    else await auditIn(ctx, tx, `user:${info.user.id}`, 'user.reset_password', 'user', info.user.id);
    return (await getUser(ctx, info.user.id, tx))!;
  });
}

/** Accept the invitation of a join link, as the logged-in person it was made for. */
export async function acceptJoinLink(ctx: CoreCtx, secret: string, userId: string): Promise<{ partnerId: string }> {
  return ctx.store.transaction(async (tx) => {
    const info = await openLink(ctx, secret, tx);
    if (!info || !info.membershipId) throw expiredLink();
    if (info.user.id !== userId)
      throw new AppError('forbidden', 'this invitation is for another address: log in with the invited one');
    const m = (await tx.get<MembershipRow>(sql`SELECT * FROM memberships WHERE id = ${info.membershipId}`))!;
    await acceptMembership(ctx, tx, m.id, userId, ctx.now());
    return { partnerId: m.partner_id };
  });
}

async function setPassword(tx: Tx, userId: string, hash: string, now: number) {
  await tx.run(
    sql`UPDATE users SET password_hash = ${hash}, sessions_valid_after = ${now}, updated_at = ${now} WHERE id = ${userId}`,
  );
  await endSessionsOf(tx, userId);
  await endPasswordLinks(tx, userId, now);
}

const expiredLink = () =>
  new AppError('link_expired', 'this link has expired or was already used; ask your admin for a new one');

/** Change a password knowing the current one; every session and invite or reset link of the person ends. */
export async function changePassword(ctx: CoreCtx, userId: string, current: string, next: string): Promise<void> {
  const user = await getUser(ctx, userId);
  if (!user || !(await verifyPassword(current ?? '', user.password_hash)))
    throw invalid('the current password is not right', [{ field: 'current', message: 'not right' }]);
  await checkPasswordRules(next, await contextOf(ctx, user));
  const hash = await hashPassword(next);
  await ctx.store.transaction(async (tx) => {
    await setPassword(tx, userId, hash, ctx.now());
    await auditIn(ctx, tx, `user:${userId}`, 'user.change_password', 'user', userId);
  });
}

/** "Log out everywhere": every session of the person ends, and every unused invite or reset link. */
export async function endEverywhere(ctx: CoreCtx, userId: string): Promise<number> {
  return ctx.store.transaction(async (tx) => {
    const n = await endSessionsOf(tx, userId);
    await endPasswordLinks(tx, userId, ctx.now());
    return n;
  });
}

/**
 * The person whose email and password these are, if active and with a partner to open or an
 * invitation to answer; else null.
 */
export async function checkLogin(ctx: CoreCtx, email: string, password: string): Promise<UserRow | null> {
  const user = typeof email === 'string' && email.length <= 254 ? await findUserByEmail(ctx, email) : undefined;
  const ok = await verifyPassword(typeof password === 'string' ? password : '', user?.password_hash ?? null);
  if (!ok || !user || !(await mayLogIn(ctx, user))) return null;
  return user;
}

/** Whether this person may log in now: active, with a membership of an active partner. */
export async function mayLogIn(ctx: CoreCtx, user: UserRow): Promise<boolean> {
  return user.status === 'active' && (await membershipsOf(ctx, user.id)).length > 0;
}

export const memberState = (m: Member) =>
  m.status === 'disabled' ? 'disabled' : m.status === 'pending' ? 'invited' : 'active';

export function memberJson(m: Member) {
  return {
    id: m.user_id,
    membership_id: m.membership_id,
    partner_id: m.partner_id,
    email: m.email,
    role: m.role,
    status: m.status,
    state: memberState(m),
    two_factor: m.two_factor === 1,
    last_login_at: iso(m.last_login_at),
    created_at: iso(m.created_at),
    accepted_at: iso(m.accepted_at),
  };
}
