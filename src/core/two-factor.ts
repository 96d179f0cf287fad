import { createHash, randomInt } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import { stmt } from '../db/stmt.js';
import { AppError, invalid } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { audit } from './audit.js';
import type { CoreCtx } from './context.js';
import { getPartner } from './partners.js';
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
export function enrolmentRequired(ctx: CoreCtx, userId: string, partnerId: string): boolean {
  const row = stmt<[string, string], { required: number; on: number }>(
    ctx.db.sqlite,
    `SELECT p.require_2fa AS required, u.totp_enabled_at IS NOT NULL AS "on"
       FROM users u JOIN partners p ON p.id = ? WHERE u.id = ?`,
  ).get(partnerId, userId);
  return !!row && row.required === 1 && row.on === 0;
}

/** A partner's admin turns the requirement on or off for all of the partner's users. */
export function setTwoFactorRequired(ctx: CoreCtx, partnerId: string, required: boolean, actor: string) {
  ctx.db.sqlite
    .transaction(() => {
      const partner = getPartner(ctx, partnerId);
      stmt(ctx.db.sqlite, 'UPDATE partners SET require_2fa = ?, updated_at = ? WHERE id = ?').run(
        required ? 1 : 0,
        ctx.now(),
        partner.id,
      );
      audit(ctx, actor, required ? 'partner.require_2fa' : 'partner.allow_no_2fa', 'partner', partner.id);
    })
    .immediate();
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
export function startEnrolment(ctx: CoreCtx, userId: string): Enrolment {
  return ctx.db.sqlite
    .transaction(() => {
      const user = getUser(ctx, userId);
      if (!user) throw new AppError('not_found', 'user not found');
      if (twoFactorOn(user)) throw new AppError('conflict', 'two-factor authentication is already on');
      const secret = new Secret({ size: 20 }).base32;
      stmt(ctx.db.sqlite, 'UPDATE users SET totp_secret = ?, totp_last_step = NULL, updated_at = ? WHERE id = ?').run(
        seal(ctx.masterKey, secret),
        ctx.now(),
        userId,
      );
      return { secret, uri: totpFor(secret, user.email).toString() };
    })
    .immediate();
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
function issueRecoveryCodes(ctx: CoreCtx, userId: string): string[] {
  const now = ctx.now();
  stmt(ctx.db.sqlite, 'DELETE FROM user_recovery_codes WHERE user_id = ?').run(userId);
  const insert = stmt(
    ctx.db.sqlite,
    'INSERT INTO user_recovery_codes (id, user_id, hash, used_at, created_at) VALUES (?, ?, ?, NULL, ?)',
  );
  const codes = Array.from({ length: RECOVERY_CODES }, newRecoveryCode);
  for (const code of codes) insert.run(newId('rc'), userId, sha256(normalizeCode(code)), now);
  return codes;
}

/**
 * Confirm enrolment with the first code from the app: two-factor authentication is on from
 * now, and the recovery codes are returned, to be shown once.
 */
export function confirmEnrolment(ctx: CoreCtx, userId: string, code: string): string[] {
  return ctx.db.sqlite
    .transaction(() => {
      const user = getUser(ctx, userId);
      if (!user) throw new AppError('not_found', 'user not found');
      if (twoFactorOn(user)) throw new AppError('conflict', 'two-factor authentication is already on');
      if (!user.totp_secret) throw new AppError('conflict', 'start the set-up first');
      const step = totpStep(ctx, user, normalizeCode(code));
      if (step === null)
        throw invalid('that code is not right: check the time on your phone and enter the code shown now', [
          { field: 'code', message: 'not right' },
        ]);
      const now = ctx.now();
      stmt(ctx.db.sqlite, 'UPDATE users SET totp_enabled_at = ?, totp_last_step = ?, updated_at = ? WHERE id = ?').run(
        now,
        step,
        now,
        userId,
      );
      audit(ctx, `user:${userId}`, 'user.enable_2fa', 'user', userId);
      return issueRecoveryCodes(ctx, userId);
    })
    .immediate();
}

export type SecondFactor =
  { ok: true; kind: 'totp' | 'recovery'; recoveryLeft: number } | { ok: false; replay: boolean };

/**
 * Check a second factor: a TOTP code not used before (its step is remembered, so a code
 * cannot be replayed within its window), or an unused recovery code (used up by this call).
 */
export function checkSecondFactor(ctx: CoreCtx, userId: string, input: string): SecondFactor {
  const code = normalizeCode(input);
  return ctx.db.sqlite
    .transaction((): SecondFactor => {
      const user = getUser(ctx, userId);
      if (!user || !twoFactorOn(user)) return { ok: false, replay: false };
      const left = () => recoveryCodesLeft(ctx, userId);
      if (/^\d{6}$/.test(code)) {
        const step = totpStep(ctx, user, code);
        if (step === null) return { ok: false, replay: false };
        if (user.totp_last_step !== null && step <= user.totp_last_step) return { ok: false, replay: true };
        stmt(ctx.db.sqlite, 'UPDATE users SET totp_last_step = ? WHERE id = ?').run(step, userId);
        return { ok: true, kind: 'totp', recoveryLeft: left() };
      }
      if (code.length !== 16) return { ok: false, replay: false };
      const used = stmt(
        ctx.db.sqlite,
        'UPDATE user_recovery_codes SET used_at = ? WHERE user_id = ? AND hash = ? AND used_at IS NULL',
      ).run(ctx.now(), userId, sha256(code)).changes;
      if (!used) return { ok: false, replay: false };
      audit(ctx, `user:${userId}`, 'user.use_recovery_code', 'user', userId);
      return { ok: true, kind: 'recovery', recoveryLeft: left() };
    })
    .immediate();
}

export function recoveryCodesLeft(ctx: CoreCtx, userId: string): number {
  return stmt<[string], { n: number }>(
    ctx.db.sqlite,
    'SELECT COUNT(*) AS n FROM user_recovery_codes WHERE user_id = ? AND used_at IS NULL',
  ).get(userId)!.n;
}

function clearTwoFactor(ctx: CoreCtx, userId: string) {
  stmt(
    ctx.db.sqlite,
    'UPDATE users SET totp_secret = NULL, totp_enabled_at = NULL, totp_last_step = NULL, updated_at = ? WHERE id = ?',
  ).run(ctx.now(), userId);
  stmt(ctx.db.sqlite, 'DELETE FROM user_recovery_codes WHERE user_id = ?').run(userId);
  stmt(ctx.db.sqlite, 'DELETE FROM ui_pending_logins WHERE user_id = ?').run(userId);
}

/** The user turns it off themselves (the console has checked their password and a code). */
export function disableTwoFactor(ctx: CoreCtx, userId: string) {
  ctx.db.sqlite
    .transaction(() => {
      clearTwoFactor(ctx, userId);
      audit(ctx, `user:${userId}`, 'user.disable_2fa', 'user', userId);
    })
    .immediate();
}

/**
 * The operator's reset for a user who lost their phone and codes: two-factor authentication is
 * off and every session of the user ends; if the partner requires it, they enrol again at their
 * next login.
 */
export function resetTwoFactor(ctx: CoreCtx, partnerId: string, ref: string, actor: string): Member {
  return ctx.db.sqlite
    .transaction(() => {
      const member = getMember(ctx, partnerId, ref);
      const user = getUser(ctx, member.user_id)!;
      if (!user.totp_secret) throw new AppError('conflict', `${user.email} has no two-factor authentication to reset`);
      clearTwoFactor(ctx, user.id);
      stmt(ctx.db.sqlite, 'DELETE FROM ui_sessions WHERE user_id = ?').run(user.id);
      audit(ctx, actor, 'user.reset_2fa', 'user', user.id, { email: user.email, partner: partnerId });
      return getMember(ctx, partnerId, user.id);
    })
    .immediate();
}
