import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
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
export function checkPasswordRules(password: string): void {
  if (password.length < PASSWORD_MIN)
    throw invalid(`the password must be at least ${PASSWORD_MIN} characters`, [
      { field: 'password', message: `at least ${PASSWORD_MIN} characters` },
    ]);
  if (password.length > PASSWORD_MAX)
    throw invalid(`the password must be at most ${PASSWORD_MAX} characters`, [
      { field: 'password', message: `at most ${PASSWORD_MAX} characters` },
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
