import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createSession,
  endAllSessions,
  endSession,
  lookupSession,
  pruneSessions,
  selectPartner,
} from '../../src/core/ui-sessions.js';
import { acceptLink, inviteUser } from '../../src/core/users.js';
import { sql } from '../../src/db/sql.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// Console sessions on both stores: what a session opens, its limits, switching, ending.

let t: StoreCtx;
let userId: string;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await insertPartner(t, { id: 'prt_a', slug: 'acme', name: 'Acme' });
  await insertPartner(t, { id: 'prt_g', slug: 'globex', name: 'Globex' });
  await insertPartner(t, { id: 'prt_i', slug: 'initech', name: 'Initech' });
  const link = await inviteUser(t.ctx, { partner: 'prt_a', email: 'ann@example.com', role: 'admin' }, 'op');
  userId = (await acceptLink(t.ctx, link.secret, 'correct horse battery staple 42')).id;
});
afterEach(() => t.close());

const audited = async () =>
  (await t.ctx.store.all<{ action: string }>(sql`SELECT action FROM audit_log ORDER BY id`)).map((r) => r.action);

describe('console sessions', () => {
  it('opens the one partner at once, with the role, and records the login', async () => {
    const s = await createSession(t.ctx, userId, { ip: '192.0.2.1' });
    expect(s.partnerId).toBe('prt_a');
    const found = await lookupSession(t.ctx, s.secret);
    expect(found?.user).toMatchObject({ role: 'admin', partnerId: 'prt_a', partnerName: 'Acme', currency: 'USD' });
    expect(found?.person).toMatchObject({ email: 'ann@example.com', invitations: [] });
    expect(await lookupSession(t.ctx, `${s.secret}x`)).toBeNull();
    expect(await lookupSession(t.ctx, undefined)).toBeNull();
    const last = await t.ctx.store.get<{ last_login_at: number }>(
      sql`SELECT last_login_at FROM users WHERE id = ${userId}`,
    );
    expect(last?.last_login_at).toBe(t.clock.now);
    expect(await audited()).toContain('ui.login');
  });

  it('asks a person of several partners to pick, and switches only to their own', async () => {
    await t.exec(
      `INSERT INTO memberships (id, user_id, partner_id, role, status, accept_by_link, invited_by, created_at, accepted_at, updated_at)
       VALUES ('mem_g', '${userId}', 'prt_g', 'billing', 'active', 0, 'op', 0, 0, 0)`,
    );
    const s = await createSession(t.ctx, userId, { ip: '192.0.2.1' });
    expect(s.partnerId).toBeNull();
    const found = (await lookupSession(t.ctx, s.secret))!;
    expect(found.user).toBeNull();
    expect(found.person.partners.map((p) => p.partner_name)).toEqual(['Acme', 'Globex']);
    await selectPartner(t.ctx, found.person, 'prt_g');
    expect((await lookupSession(t.ctx, s.secret))?.user).toMatchObject({ partnerId: 'prt_g', role: 'billing' });
    await expect(selectPartner(t.ctx, found.person, 'prt_i')).rejects.toMatchObject({ code: 'not_found' });
    // Suspending the picked partner ends the session's access there at once.
    await t.exec(`UPDATE partners SET status = 'suspended' WHERE id = 'prt_g'`);
    expect(await lookupSession(t.ctx, s.secret)).toBeNull();
  });

  it('ends a session idle past its limit, and prunes the ones nobody comes back to', async () => {
    const idleMs = t.ctx.config.ui.sessionIdleMinutes * 60_000;
    const a = await createSession(t.ctx, userId, { ip: '192.0.2.1' });
    await createSession(t.ctx, userId, { ip: '192.0.2.2' });
    t.clock.now += idleMs - 1_000;
    expect(await lookupSession(t.ctx, a.secret)).not.toBeNull();
    t.clock.now += idleMs - 1_000;
    // `a` was seen (touched) above; the other one is idle and pruned.
    expect(await pruneSessions(t.ctx)).toBe(1);
    t.clock.now += idleMs;
    expect(await lookupSession(t.ctx, a.secret)).toBeNull();
    expect(await pruneSessions(t.ctx)).toBe(0);
  });

  it('logs out one session, or every session of the person', async () => {
    const a = await createSession(t.ctx, userId, { ip: '192.0.2.1' });
    const b = await createSession(t.ctx, userId, { ip: '192.0.2.2' });
    const c = await createSession(t.ctx, userId, { ip: '192.0.2.3' });
    await endSession(t.ctx, a.id, userId);
    expect(await lookupSession(t.ctx, a.secret)).toBeNull();
    expect(await lookupSession(t.ctx, b.secret)).not.toBeNull();
    expect(await endAllSessions(t.ctx, userId)).toBe(2);
    expect(await lookupSession(t.ctx, c.secret)).toBeNull();
    expect(await audited()).toEqual(expect.arrayContaining(['ui.logout', 'ui.logout_everywhere']));
  });
});
