import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../src/core/audit.js';
import {
  acceptJoinLink,
  acceptLink,
  changePassword,
  checkLogin,
  declineInvitation,
  getMember,
  inviteUser,
  listMembers,
  memberJson,
  membershipsOf,
  openLink,
  removeUser,
  resetUser,
  setUserStatus,
} from '../../src/core/users.js';
import { createSession, lookupSession } from '../../src/core/ui-sessions.js';
import { sql } from '../../src/db/sql.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { raceOnRow } from './race.js';

// The console's people on both stores: invitations and their links, passwords, roles and
// states, removal; what the Users page and msgctl user show.

const PASSWORD = 'correct horse battery staple 42';
const NEW_PASSWORD = 'tangerine lighthouse quarrel 77';

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await insertPartner(t, { id: 'prt_a', slug: 'acme', name: 'Acme' });
  await insertPartner(t, { id: 'prt_g', slug: 'globex', name: 'Globex' });
});
afterEach(() => t.close());

describe('console users', () => {
  it('invites a person, whose link sets the password and makes the membership active', async () => {
    const link = await inviteUser(t.ctx, { partner: 'acme', email: 'Ann@Example.com', role: 'developer' }, 'op');
    expect(link).toMatchObject({ kind: 'invite', partner: { id: 'prt_a', slug: 'acme', name: 'Acme' } });
    expect(memberJson(link.member)).toMatchObject({
      email: 'ann@example.com',
      role: 'developer',
      state: 'invited',
      two_factor: false,
    });
    expect(await openLink(t.ctx, link.secret)).toMatchObject({
      kind: 'invite',
      partnerName: 'Acme',
      role: 'developer',
    });
    expect(await checkLogin(t.ctx, 'ann@example.com', PASSWORD)).toBeNull();

    const user = await acceptLink(t.ctx, link.secret, PASSWORD);
    expect(user.password_hash).toMatch(/^scrypt\$/);
    expect(await openLink(t.ctx, link.secret)).toBeNull();
    await expect(acceptLink(t.ctx, link.secret, PASSWORD)).rejects.toMatchObject({ code: 'link_expired' });
    expect((await checkLogin(t.ctx, 'ANN@example.com', PASSWORD))?.id).toBe(user.id);
    expect(await checkLogin(t.ctx, 'ann@example.com', 'not the password at all')).toBeNull();

    const [m] = await listMembers(t.ctx, 'prt_a');
    expect(m).toMatchObject({ email: 'ann@example.com', status: 'active', has_password: 1, two_factor: 0 });
    expect(memberJson(m).state).toBe('active');
    const actions = (await listAudit(t.ctx)).map((a) => a.action);
    expect(actions).toEqual(['user.accept_invite', 'user.invite']);
  });

  it('refuses to invite a member twice; a pending invitation gets a fresh link and the old one stops', async () => {
    const first = await inviteUser(t.ctx, { partner: 'prt_a', email: 'bo@example.com', role: 'billing' }, 'op');
    const again = await inviteUser(t.ctx, { partner: 'prt_a', email: 'bo@example.com', role: 'admin' }, 'op');
    expect(await openLink(t.ctx, first.secret)).toBeNull();
    expect((await openLink(t.ctx, again.secret))?.role).toBe('admin');
    await acceptLink(t.ctx, again.secret, PASSWORD);
    await expect(
      inviteUser(t.ctx, { partner: 'prt_a', email: 'bo@example.com', role: 'admin' }, 'op'),
    ).rejects.toMatchObject({ code: 'conflict', message: 'bo@example.com is already a user of Acme' });
    await expect(
      inviteUser(t.ctx, { partner: 'prt_a', email: 'not an address', role: 'admin' }, 'op'),
    ).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(
      inviteUser(t.ctx, { partner: 'prt_a', email: 'c@example.com', role: 'owner' }, 'op'),
    ).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(
      inviteUser(t.ctx, { partner: 'nobody', email: 'c@example.com', role: 'admin' }, 'op'),
    ).rejects.toMatchObject({ code: 'not_found' });
    // Someone with a password is asked to log in and accept: a join link sets no password.
    const join = await inviteUser(t.ctx, { partner: 'globex', email: 'bo@example.com', role: 'developer' }, 'op');
    expect(join.kind).toBe('join');
    expect((await membershipsOf(t.ctx, join.member.user_id)).map((m) => [m.partner_name, m.status])).toEqual([
      ['Acme', 'active'],
      ['Globex', 'pending'],
    ]);
    await declineInvitation(t.ctx, join.member.user_id, 'prt_g');
    expect(await membershipsOf(t.ctx, join.member.user_id)).toHaveLength(1);
  });

  it('lists members by email, and resolves one by id or any spelling of the email', async () => {
    for (const email of ['zed@example.com', 'amy@example.com', 'mia@example.com'])
      await inviteUser(t.ctx, { partner: 'prt_a', email, role: 'developer' }, 'op');
    expect((await listMembers(t.ctx, 'prt_a')).map((m) => m.email)).toEqual([
      'amy@example.com',
      'mia@example.com',
      'zed@example.com',
    ]);
    const amy = await getMember(t.ctx, 'prt_a', ' AMY@example.com ');
    expect((await getMember(t.ctx, 'prt_a', amy.user_id)).email).toBe('amy@example.com');
    await expect(getMember(t.ctx, 'prt_g', amy.user_id)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('disables a member (sessions and links end), enables it, and removes the person left alone', async () => {
    const link = await inviteUser(t.ctx, { partner: 'prt_a', email: 'cy@example.com', role: 'developer' }, 'op');
    const user = await acceptLink(t.ctx, link.secret, PASSWORD);
    const session = await createSession(t.ctx, user.id, { ip: '192.0.2.1' });
    expect((await lookupSession(t.ctx, session.secret))?.user?.partnerId).toBe('prt_a');
    const reset = await resetUser(t.ctx, 'prt_a', user.id, 'op', 'operator');
    expect(reset.kind).toBe('reset');

    const disabled = await setUserStatus(t.ctx, 'prt_a', 'cy@example.com', 'disabled', 'op');
    expect(memberJson(disabled).state).toBe('disabled');
    expect(await lookupSession(t.ctx, session.secret)).toBeNull();
    expect(await openLink(t.ctx, reset.secret)).toBeNull();
    await expect(setUserStatus(t.ctx, 'prt_a', user.id, 'disabled', 'op')).rejects.toMatchObject({
      code: 'conflict',
    });
    await expect(resetUser(t.ctx, 'prt_a', user.id, 'op', 'operator')).rejects.toMatchObject({ code: 'conflict' });
    expect((await setUserStatus(t.ctx, 'prt_a', user.id, 'active', 'op')).status).toBe('active');

    // A console admin may not reset an admin, nor anyone who uses another partner's console.
    const admin = await inviteUser(t.ctx, { partner: 'prt_a', email: 'ad@example.com', role: 'admin' }, 'op');
    await acceptLink(t.ctx, admin.secret, PASSWORD);
    await expect(resetUser(t.ctx, 'prt_a', 'ad@example.com', 'user:x', 'console')).rejects.toMatchObject({
      code: 'forbidden',
    });
    const byConsole = await resetUser(t.ctx, 'prt_a', user.id, 'user:x', 'console');
    await acceptLink(t.ctx, byConsole.secret, NEW_PASSWORD);
    expect(await checkLogin(t.ctx, 'cy@example.com', PASSWORD)).toBeNull();
    expect((await checkLogin(t.ctx, 'cy@example.com', NEW_PASSWORD))?.id).toBe(user.id);

    const removed = await removeUser(t.ctx, 'prt_a', user.id, 'op');
    expect(removed.email).toBe('cy@example.com');
    const left = await t.ctx.store.get<{ n: number }>(sql`SELECT COUNT(*) AS n FROM users WHERE id = ${user.id}`);
    expect(left?.n).toBe(0);
    expect((await listAudit(t.ctx, 1))[0]).toMatchObject({
      action: 'user.remove',
      details: { email: 'cy@example.com', role: 'developer', person_deleted: true },
    });
  });

  it('changes a password knowing the current one; every session of the person ends', async () => {
    const link = await inviteUser(t.ctx, { partner: 'prt_a', email: 'di@example.com', role: 'billing' }, 'op');
    const user = await acceptLink(t.ctx, link.secret, PASSWORD);
    const s = await createSession(t.ctx, user.id, { ip: '192.0.2.1' });
    await expect(changePassword(t.ctx, user.id, 'wrong current password', NEW_PASSWORD)).rejects.toMatchObject({
      code: 'invalid_request',
    });
    t.clock.now += 1;
    await changePassword(t.ctx, user.id, PASSWORD, NEW_PASSWORD);
    expect(await lookupSession(t.ctx, s.secret)).toBeNull();
    expect((await checkLogin(t.ctx, 'di@example.com', NEW_PASSWORD))?.id).toBe(user.id);
  });

  it('sets the password of a link used twice at once only once: the second is told the link is used', async () => {
    const link = await inviteUser(t.ctx, { partner: 'prt_a', email: 'eve@example.com', role: 'developer' }, 'op');
    const userId = link.member.user_id;
    const outcomes = await raceOnRow(t, sql`SELECT id FROM user_invites WHERE user_id = ${userId} FOR UPDATE`, [
      () => acceptLink(t.ctx, link.secret, PASSWORD),
      () => acceptLink(t.ctx, link.secret, NEW_PASSWORD),
    ]);
    const won = outcomes.filter((o) => o.status === 'fulfilled');
    const lost = outcomes.filter((o) => o.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost.map((o) => o.reason)).toMatchObject([{ code: 'link_expired' }]);
    // The password that works is the one whose answer said it was set.
    const winner = outcomes[0].status === 'fulfilled' ? PASSWORD : NEW_PASSWORD;
    const loser = winner === PASSWORD ? NEW_PASSWORD : PASSWORD;
    expect((await checkLogin(t.ctx, 'eve@example.com', winner))?.id).toBe(userId);
    expect(await checkLogin(t.ctx, 'eve@example.com', loser)).toBeNull();
    expect((await listAudit(t.ctx)).filter((e) => e.action === 'user.accept_invite')).toHaveLength(1);
  });

  it('accepts a join link used twice at once only once', async () => {
    const first = await inviteUser(t.ctx, { partner: 'prt_a', email: 'fay@example.com', role: 'developer' }, 'op');
    const user = await acceptLink(t.ctx, first.secret, PASSWORD);
    const join = await inviteUser(t.ctx, { partner: 'prt_g', email: 'fay@example.com', role: 'billing' }, 'op');
    expect(join.kind).toBe('join');
    const lock = sql`SELECT id FROM memberships WHERE id = ${join.member.membership_id} FOR UPDATE`;
    const outcomes = await raceOnRow(t, lock, [
      () => acceptJoinLink(t.ctx, join.secret, user.id),
      () => acceptJoinLink(t.ctx, join.secret, user.id),
    ]);
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toEqual([
      { status: 'fulfilled', value: { partnerId: 'prt_g' } },
    ]);
    expect(outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason)).toMatchObject([
      { code: 'link_expired' },
    ]);
    const accepted = (await listAudit(t.ctx)).filter((e) => e.action === 'user.accept_invite');
    expect(accepted.map((e) => e.details)).toEqual([
      { membership: join.member.membership_id },
      { membership: first.member.membership_id },
    ]);
  });
});
