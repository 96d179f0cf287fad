import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import type { ZxcvbnResult } from '@zxcvbn-ts/core';
import { invalid } from '../lib/errors.js';

// Console passwords, hashed with scrypt (memory-hard: 32 MiB per hash at N=2^15, r=8), so a
// stolen database costs an attacker that much memory for every guess. The parameters are
// stored with each hash, so raising them later leaves old hashes verifiable.

const N = 1 << 15;
const R = 8;
const P = 1;
const KEYLEN = 32;
const MAXMEM = 64 * 1024 * 1024;

export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 256;

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEYLEN, { N: n, r, p, maxmem: MAXMEM }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

/** Refuses passwords too short to resist guessing, or too long to hash cheaply. */
function checkLength(password: string): void {
  if (password.length < PASSWORD_MIN)
    throw invalid(`the password must be at least ${PASSWORD_MIN} characters`, [
      { field: 'password', message: `at least ${PASSWORD_MIN} characters` },
    ]);
  if (password.length > PASSWORD_MAX)
    throw invalid(`the password must be at most ${PASSWORD_MAX} characters`, [
      { field: 'password', message: `at most ${PASSWORD_MAX} characters` },
    ]);
}

/** zxcvbn's lowest score that is accepted: 3 is "safely unguessable" (about 10^8 guesses and more). */
export const PASSWORD_MIN_SCORE = 3;

/** How much of a password the estimator reads (a few milliseconds at most). */
const ESTIMATE_MAX = 64;

type Estimator = { check(password: string, userInputs?: string[]): ZxcvbnResult };
let estimator: Promise<Estimator> | undefined;

/**
 * The strength estimator with its common-password and English dictionaries: loaded on the first
 * password set, not at start (it takes about half a second and some megabytes).
 */
function loadEstimator(): Promise<Estimator> {
  estimator ??= (async () => {
    const [{ ZxcvbnFactory }, common, en] = await Promise.all([
      import('@zxcvbn-ts/core'),
      import('@zxcvbn-ts/language-common'),
      import('@zxcvbn-ts/language-en'),
    ]);
    return new ZxcvbnFactory({
      translations: en.translations,
      graphs: common.adjacencyGraphs,
      dictionary: { ...common.dictionary, ...en.dictionary },
      // Matching grows much faster than the length, most of all through l33t substitutions (a
      // 256-character password of symbols takes seconds of CPU with the defaults): only the first
      // ESTIMATE_MAX characters are judged, which must then be strong on their own, and at most
      // 8 substitutions are tried (common l33t passwords are still caught); at most about 0.25 s.
      maxLength: ESTIMATE_MAX,
      l33tMaxSubstitutions: 8,
    });
  })();
  return estimator;
}

/** The words of a person's context a password must not be built on: the email, its parts, partner names. */
export function passwordContext(email: string, partnerNames: string[]): string[] {
  const local = email.split('@')[0] ?? '';
  const domain = email.split('@')[1] ?? '';
  const names = partnerNames.flatMap((n) => [n, n.replace(/[\s._-]+/g, ''), ...n.split(/[\s._-]+/)]);
  const words = [email, local, ...local.split(/[._+-]+/), domain, ...domain.split('.'), ...names];
  return [...new Set(words.map((w) => w.trim().toLowerCase()).filter((w) => w.length >= 3))];
}

/**
 * Refuses a password that is too short or too long, or that an attacker would guess early:
 * common passwords, dictionary words, repeats and sequences, and words of the person's own
 * context (NIST SP 800-63B 3.1.1.2), judged by zxcvbn. The message says why, in zxcvbn's words.
 */
export async function checkPasswordRules(password: string, context: string[] = []): Promise<void> {
  checkLength(password);
  const result = (await loadEstimator()).check(password, context);
  if (result.score >= PASSWORD_MIN_SCORE) return;
  const why = [result.feedback.warning, ...result.feedback.suggestions].filter(Boolean).join(' ');
  throw invalid(`this password is too easy to guess. ${why || 'Use a few uncommon words together.'}`, [
    { field: 'password', message: 'too easy to guess' },
  ]);
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, N, R, P);
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  // A user without a password (invite not accepted) costs the same time as one with: the
  // response time does not tell which emails have accounts.
  const parts = (stored ?? DUMMY).split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [n, r, p] = parts.slice(1, 4).map(Number);
  const expected = Buffer.from(parts[5], 'base64');
  const key = await derive(password.slice(0, PASSWORD_MAX), Buffer.from(parts[4], 'base64'), n, r, p);
  return stored !== null && key.length === expected.length && timingSafeEqual(key, expected);
}

const DUMMY = `scrypt$${N}$${R}$${P}$${Buffer.alloc(16).toString('base64')}$${Buffer.alloc(KEYLEN).toString('base64')}`;
