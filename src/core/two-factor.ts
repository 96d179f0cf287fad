import { createHash, randomInt } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import type { Queryable, Tx } from '../db/query.js';
import { sql } from '../db/sql.js';
import { AppError, invalid } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { auditIn } from './audit.js';
import type { CoreCtx } from './context.js';
import { readPartner } from './partners.js';
import { seal, unseal } from './secrets.js';
import { getMember, getUser, type Member, type UserRow } from './users.js';

// Two-factor authentication for console users: TOTP (RFC 6238: SHA-1, 6 digits, 30-second
// steps, the parameters every authenticator app takes) and one-time recovery codes. It belongs
// to the person (columns on users); a partner may require it of its users. The TOTP secret is
// sealed with the master key like gateway secrets, shown once at enrolment and never again;
// recovery codes are kept only as SHA-256 (they carry 79 random bits, so a fast hash is enough).

const PERIOD_S = 30;
const DIGITS = 6;
/** Codes of the step before and after are accepted too: clocks drift and people type slowly. */
const WINDOW = 1;
export const RECOVERY_CODES = 10;
/** No 0/o, 1/i/l: read off paper and typed back without doubt. */
const RECOVERY_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

const totpFor = (secretBase32: string, label: string) =>
  new TOTP({
    issuer: 'msgd',
    label,
    algorithm: 'SHA1',
    digits: DIGITS,
    period: PERIOD_S,
    secret: Secret.fromBase32(secretBase32),
  });

export const twoFactorOn = (user: Pick<UserRow, 'totp_enabled_at'>) => user.totp_enabled_at !== null;

/**
 * Whether the session's user must enrol before doing anything else: their partner requires
 * two-factor authentication and they have not turned it on. The one place the rule is decided.
 */
export async function enrolmentRequired(ctx: CoreCtx, userId: string, partnerId: string): Promise<boolean> {
  const row = await ctx.store.get<{ required: number; enabled: number }>(
    sql`SELECT p.require_2fa AS required, CASE WHEN u.totp_enabled_at IS NULL THEN 0 ELSE 1 END AS enabled
          FROM users u JOIN partners p ON p.id = ${partnerId} WHERE u.id = ${userId}`,
  );
  return !!row && row.required === 1 && row.enabled === 0;
}

/** A partner's admin turns the requirement on or off for all of the partner's users. */
export async function setTwoFactorRequired(
  ctx: CoreCtx,
  partnerId: string,
  required: boolean,
  actor: string,
): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    const partner = await readPartner(tx, partnerId);
    await tx.run(
      sql`UPDATE partners SET require_2fa = ${required ? 1 : 0}, updated_at = ${ctx.now()} WHERE id = ${partner.id}`,
    );
    await auditIn(ctx, tx, actor, required ? 'partner.require_2fa' : 'partner.allow_no_2fa', 'partner', partner.id);
  });
}

export interface Enrolment {
  /** Base32, for typing into an app. Shown once. */
  secret: string;
  /** otpauth://totp/… for an app that reads links or QR codes. Shown once. */
  uri: string;
}

/**
 * Start (or start over) enrolment: a new secret, stored sealed, not in force until a first
 * valid code confirms it. Refused while two-factor authentication is on.
 */
export async function startEnrolment(ctx: CoreCtx, userId: string): Promise<Enrolment> {
  return ctx.store.transaction(async (tx) => {
    const user = await getUser(ctx, userId, tx);
    if (!user) throw new AppError('not_found', 'user not found');
    if (twoFactorOn(user)) throw new AppError('conflict', 'two-factor authentication is already on');
    const secret = new Secret({ size: 20 }).base32;
    // Conditional: a confirmation that committed since the read keeps its secret.
    const { changes } = await tx.run(
      sql`UPDATE users SET totp_secret = ${seal(ctx.masterKey, secret)}, totp_last_step = NULL, updated_at = ${ctx.now()}
           WHERE id = ${userId} AND totp_enabled_at IS NULL`,
    );
    if (changes === 0) throw new AppError('conflict', 'two-factor authentication is already on');
    return { secret, uri: totpFor(secret, user.email).toString() };
  });
}

/** The 30-second step this TOTP code is valid for around now, or null. */
function totpStep(ctx: CoreCtx, user: UserRow, code: string): number | null {
  if (!user.totp_secret || !/^\d{6}$/.test(code)) return null;
  const now = ctx.now();
  const delta = totpFor(unseal(ctx.masterKey, user.totp_secret), user.email).validate({
    token: code,
    timestamp: now,
    window: WINDOW,
  });
  return delta === null ? null : Math.floor(now / 1000 / PERIOD_S) + delta;
}

function newRecoveryCode(): string {
  let s = '';
  for (let i = 0; i < 16; i++) s += RECOVERY_ALPHABET[randomInt(RECOVERY_ALPHABET.length)];
  return s.match(/.{4}/g)!.join('-');
}

const normalizeCode = (code: string) => (typeof code === 'string' ? code.toLowerCase().replace(/[\s-]/g, '') : '');

/** Replace the user's recovery codes with fresh ones; returns them (shown once). */
async function issueRecoveryCodes(ctx: CoreCtx, tx: Tx, userId: string): Promise<string[]> {
  const now = ctx.now();
  await tx.run(sql`DELETE FROM user_recovery_codes WHERE user_id = ${userId}`);
  const codes = Array.from({ length: RECOVERY_CODES }, newRecoveryCode);
  await tx.run(
    sql`INSERT INTO user_recovery_codes (id, user_id, hash, used_at, created_at) VALUES ${sql.join(
      codes.map((code) => sql`(${newId('rc')}, ${userId}, ${sha256(normalizeCode(code))}, NULL, ${now})`),
    )}`,
  );
  return codes;
}

/**
 * Confirm enrolment with the first code from the app: two-factor authentication is on from
 * now, and the recovery codes are returned, to be shown once.
 */
export async function confirmEnrolment(ctx: CoreCtx, userId: string, code: string): Promise<string[]> {
  return ctx.store.transaction(async (tx) => {
    const user = await getUser(ctx, userId, tx);
    if (!user) throw new AppError('not_found', 'user not found');
    if (twoFactorOn(user)) throw new AppError('conflict', 'two-factor authentication is already on');
    if (!user.totp_secret) throw new AppError('conflict', 'start the set-up first');
    const step = totpStep(ctx, user, normalizeCode(code));
    if (step === null)
      throw invalid('that code is not right: check the time on your phone and enter the code shown now', [
        { field: 'code', message: 'not right' },
      ]);
    const now = ctx.now();
    // Conditional on the secret the code was checked against, still off: a set-up started again
    // or confirmed by another request since the read is not turned on with a secret unchecked.
    const { changes } = await tx.run(
      sql`UPDATE users SET totp_enabled_at = ${now}, totp_last_step = ${step}, updated_at = ${now}
           WHERE id = ${userId} AND totp_enabled_at IS NULL AND totp_secret = ${user.totp_secret}`,
    );
    if (changes === 0) {
      const again = await getUser(ctx, userId, tx);
      throw new AppError(
        'conflict',
        again && twoFactorOn(again)
          ? 'two-factor authentication is already on'
          : 'the set-up was started again meanwhile: enter a code for the new key',
      );
    }
    await auditIn(ctx, tx, `user:${userId}`, 'user.enable_2fa', 'user', userId);
    return issueRecoveryCodes(ctx, tx, userId);
  });
}

export type SecondFactor =
  { ok: true; kind: 'totp' | 'recovery'; recoveryLeft: number } | { ok: false; replay: boolean };

/**
 * Check a second factor: a TOTP code not used before (its step is remembered, so a code
 * cannot be replayed within its window), or an unused recovery code (used up by this call).
 * The step moves only forward, by a conditional UPDATE, so two requests racing with one code
 * cannot both pass on any store.
 */
export async function checkSecondFactor(ctx: CoreCtx, userId: string, input: string): Promise<SecondFactor> {
  const code = normalizeCode(input);
  return ctx.store.transaction(async (tx): Promise<SecondFactor> => {
    const user = await getUser(ctx, userId, tx);
    if (!user || !twoFactorOn(user)) return { ok: false, replay: false };
    if (/^\d{6}$/.test(code)) {
      const step = totpStep(ctx, user, code);
      if (step === null) return { ok: false, replay: false };
      const { changes } = await tx.run(
        sql`UPDATE users SET totp_last_step = ${step}
             WHERE id = ${userId} AND (totp_last_step IS NULL OR totp_last_step < ${step})`,
      );
      if (changes === 0) return { ok: false, replay: true };
      return { ok: true, kind: 'totp', recoveryLeft: await recoveryCodesLeft(ctx, userId, tx) };
    }
    if (code.length !== 16) return { ok: false, replay: false };
    const { changes } = await tx.run(
      sql`UPDATE user_recovery_codes SET used_at = ${ctx.now()}
           WHERE user_id = ${userId} AND hash = ${sha256(code)} AND used_at IS NULL`,
    );
    if (!changes) return { ok: false, replay: false };
    await auditIn(ctx, tx, `user:${userId}`, 'user.use_recovery_code', 'user', userId);
    return { ok: true, kind: 'recovery', recoveryLeft: await recoveryCodesLeft(ctx, userId, tx) };
  });
}

export async function recoveryCodesLeft(ctx: CoreCtx, userId: string, q: Queryable = ctx.store): Promise<number> {
  const row = await q.get<{ n: number }>(
    sql`SELECT COUNT(*) AS n FROM user_recovery_codes WHERE user_id = ${userId} AND used_at IS NULL`,
  );
  return Number(row!.n);
}

async function clearTwoFactor(ctx: CoreCtx, tx: Tx, userId: string) {
  await tx.run(
    sql`UPDATE users SET totp_secret = NULL, totp_enabled_at = NULL, totp_last_step = NULL, updated_at = ${ctx.now()}
         WHERE id = ${userId}`,
  );
  await tx.run(sql`DELETE FROM user_recovery_codes WHERE user_id = ${userId}`);
  await tx.run(sql`DELETE FROM ui_pending_logins WHERE user_id = ${userId}`);
}

/** The user turns it off themselves (the console has checked their password and a code). */
export async function disableTwoFactor(ctx: CoreCtx, userId: string): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    await clearTwoFactor(ctx, tx, userId);
    await auditIn(ctx, tx, `user:${userId}`, 'user.disable_2fa', 'user', userId);
  });
}

/**
 * The operator's reset for a user who lost their phone and codes: two-factor authentication is
 * off and every session of the user ends; if the partner requires it, they enrol again at their
 * next login.
 */
export async function resetTwoFactor(ctx: CoreCtx, partnerId: string, ref: string, actor: string): Promise<Member> {
  return ctx.store.transaction(async (tx) => {
    const member = await getMember(ctx, partnerId, ref, tx);
    const user = (await getUser(ctx, member.user_id, tx))!;
    if (!user.totp_secret) throw new AppError('conflict', `${user.email} has no two-factor authentication to reset`);
    await clearTwoFactor(ctx, tx, user.id);
    await tx.run(sql`DELETE FROM ui_sessions WHERE user_id = ${user.id}`);
    await auditIn(ctx, tx, actor, 'user.reset_2fa', 'user', user.id, { email: user.email, partner: partnerId });
    return getMember(ctx, partnerId, user.id, tx);
  });
}
