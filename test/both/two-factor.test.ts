import { Secret, TOTP } from 'otpauth';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  checkSecondFactor,
  confirmEnrolment,
  disableTwoFactor,
  enrolmentRequired,
  RECOVERY_CODES,
  recoveryCodesLeft,
  resetTwoFactor,
  setTwoFactorRequired,
  startEnrolment,
} from '../../src/core/two-factor.js';
import { createSession, lookupSession } from '../../src/core/ui-sessions.js';
import { acceptLink, getUser, inviteUser, listMembers } from '../../src/core/users.js';
import { sql } from '../../src/db/sql.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { raceOnRow } from './race.js';

// Two-factor authentication of console users on both stores: enrolment, codes, replays and
// races, recovery codes, the partner's requirement, turning it off and the operator's reset.

let t: StoreCtx;
let userId: string;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await insertPartner(t, { id: 'prt_a', slug: 'acme', name: 'Acme' });
  const link = await inviteUser(t.ctx, { partner: 'prt_a', email: 'ann@example.com', role: 'developer' }, 'op');
  userId = (await acceptLink(t.ctx, link.secret, 'correct horse battery staple 42')).id;
});
afterEach(() => t.close());

const codeAt = (secret: string, ms: number) =>
  new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({
    timestamp: ms,
  });

async function enrol(): Promise<{ secret: string; recovery: string[] }> {
  const { secret, uri } = await startEnrolment(t.ctx, userId);
  expect(uri).toMatch(/^otpauth:\/\/totp\/msgd:ann%40example\.com\?/);
  const recovery = await confirmEnrolment(t.ctx, userId, codeAt(secret, t.clock.now));
  return { secret, recovery };
}

describe('two-factor authentication', () => {
  it('is required by the partner until the user enrols; the secret is stored sealed', async () => {
    expect(await enrolmentRequired(t.ctx, userId, 'prt_a')).toBe(false);
    await setTwoFactorRequired(t.ctx, 'prt_a', true, 'user:admin');
    expect(await enrolmentRequired(t.ctx, userId, 'prt_a')).toBe(true);
    const { secret, recovery } = await enrol();
    expect(recovery).toHaveLength(RECOVERY_CODES);
    expect(await enrolmentRequired(t.ctx, userId, 'prt_a')).toBe(false);
    const row = (await getUser(t.ctx, userId))!;
    expect(row.totp_enabled_at).toBe(t.clock.now);
    expect(row.totp_secret).not.toContain(secret);
    expect((await listMembers(t.ctx, 'prt_a'))[0].two_factor).toBe(1);
    await expect(startEnrolment(t.ctx, userId)).rejects.toMatchObject({ code: 'conflict' });
  });

  it('refuses a wrong first code, and confirms only after a start', async () => {
    await expect(confirmEnrolment(t.ctx, userId, '000000')).rejects.toMatchObject({ code: 'conflict' });
    const { secret } = await startEnrolment(t.ctx, userId);
    const wrong = codeAt(secret, t.clock.now + 10 * 60_000);
    await expect(confirmEnrolment(t.ctx, userId, wrong)).rejects.toMatchObject({ code: 'invalid_request' });
    expect((await getUser(t.ctx, userId))?.totp_enabled_at).toBeNull();
  });

  it('takes each code once: a replay is refused, and of 12 racing with one code one passes', async () => {
    const { secret } = await enrol();
    // The confirming code's step is used up.
    expect(await checkSecondFactor(t.ctx, userId, codeAt(secret, t.clock.now))).toEqual({ ok: false, replay: true });
    t.clock.now += 30_000;
    const code = codeAt(secret, t.clock.now);
    // Every connection of PostgreSQL's pool open first, so the checks really run side by side.
    await Promise.all(Array.from({ length: 4 }, () => t.ctx.store.transaction((tx) => tx.get(sql`SELECT 1 AS one`))));
    const raced = await Promise.all(Array.from({ length: 12 }, () => checkSecondFactor(t.ctx, userId, code)));
    expect(raced.filter((r) => r.ok)).toEqual([{ ok: true, kind: 'totp', recoveryLeft: RECOVERY_CODES }]);
    expect(raced.filter((r) => !r.ok)).toEqual(Array(11).fill({ ok: false, replay: true }));
    expect(await checkSecondFactor(t.ctx, userId, '12345')).toEqual({ ok: false, replay: false });
  });

  it('uses a recovery code up, in any spelling', async () => {
    const { recovery } = await enrol();
    const spelled = ` ${recovery[0].toUpperCase().replace(/-/g, ' ')} `;
    expect(await checkSecondFactor(t.ctx, userId, spelled)).toEqual({
      ok: true,
      kind: 'recovery',
      recoveryLeft: RECOVERY_CODES - 1,
    });
    expect(await checkSecondFactor(t.ctx, userId, recovery[0])).toEqual({ ok: false, replay: false });
    expect(await recoveryCodesLeft(t.ctx, userId)).toBe(RECOVERY_CODES - 1);
  });

  it('is turned off by the user, or reset by the operator with every session ended', async () => {
    const { secret } = await enrol();
    await disableTwoFactor(t.ctx, userId);
    expect((await getUser(t.ctx, userId))?.totp_secret).toBeNull();
    expect(await recoveryCodesLeft(t.ctx, userId)).toBe(0);
    expect(await checkSecondFactor(t.ctx, userId, codeAt(secret, t.clock.now))).toEqual({ ok: false, replay: false });

    await enrol();
    const s = await createSession(t.ctx, userId, { ip: '192.0.2.1' });
    const member = await resetTwoFactor(t.ctx, 'prt_a', 'ann@example.com', 'op');
    expect(member.two_factor).toBe(0);
    expect(await lookupSession(t.ctx, s.secret)).toBeNull();
    await expect(resetTwoFactor(t.ctx, 'prt_a', userId, 'op')).rejects.toMatchObject({ code: 'conflict' });
  });

  it('confirms the secret whose code it checked: a set-up started again meanwhile wins or loses whole', async () => {
    const { secret } = await startEnrolment(t.ctx, userId);
    const lockUser = sql`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`;
    const [confirmed, restarted] = await raceOnRow(t, lockUser, [
      () => confirmEnrolment(t.ctx, userId, codeAt(secret, t.clock.now)),
      () => startEnrolment(t.ctx, userId),
    ]);
    expect([confirmed.status, restarted.status].sort()).toEqual(['fulfilled', 'rejected']);
    const user = (await getUser(t.ctx, userId))!;
    t.clock.now += 30_000;
    if (confirmed.status === 'fulfilled') {
      // On, with the secret the confirming code came from: the app keeps working.
      expect(user.totp_enabled_at).not.toBeNull();
      expect(await checkSecondFactor(t.ctx, userId, codeAt(secret, t.clock.now))).toMatchObject({ ok: true });
    } else {
      // Still off, waiting for a code of the new secret.
      expect(user.totp_enabled_at).toBeNull();
      const fresh = (restarted as PromiseFulfilledResult<{ secret: string }>).value.secret;
      expect(await confirmEnrolment(t.ctx, userId, codeAt(fresh, t.clock.now))).toHaveLength(RECOVERY_CODES);
    }
  });

  it('confirms once when two confirmations race: one set of recovery codes', async () => {
    const { secret } = await startEnrolment(t.ctx, userId);
    const code = codeAt(secret, t.clock.now);
    const outcomes = await raceOnRow(t, sql`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`, [
      () => confirmEnrolment(t.ctx, userId, code),
      () => confirmEnrolment(t.ctx, userId, code),
    ]);
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason)).toMatchObject([{ code: 'conflict' }]);
    expect(await recoveryCodesLeft(t.ctx, userId)).toBe(RECOVERY_CODES);
  });
});
