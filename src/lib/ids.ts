import { randomBytes } from 'node:crypto';

// Crockford base32: ids sort lexicographically in creation order (ULID layout:
// 48-bit millisecond time, then 80 random bits), so keyset pagination on id is stable.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

let lastTime = -1;
let lastRandom: Uint8Array = new Uint8Array(10);

function encodeTime(ms: number): string {
  let out = '';
  let t = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out;
    t = Math.floor(t / 32);
  }
  return out;
}

function encodeRandom(bytes: Uint8Array): string {
  // 80 bits -> 16 base32 chars
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return out;
}

function incrementRandom(bytes: Uint8Array): Uint8Array {
  const next = new Uint8Array(bytes);
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i] === 255) {
      next[i] = 0;
    } else {
      next[i]++;
      break;
    }
  }
  return next;
}

/** A monotonic ULID body (26 chars). Within one millisecond ids still increase. */
export function ulid(now: number = Date.now()): string {
  if (now <= lastTime) {
    lastRandom = incrementRandom(lastRandom);
    now = lastTime;
  } else {
    lastTime = now;
    lastRandom = new Uint8Array(randomBytes(10));
  }
  return encodeTime(now) + encodeRandom(lastRandom);
}

export type IdPrefix =
  | 'prt'
  | 'tok'
  | 'gw'
  | 'ch'
  | 'prc'
  | 'msg'
  | 'conv'
  | 'ct'
  | 'evt'
  | 'whe'
  | 'dlv'
  | 'pwh'
  | 'req'
  | 'aud'
  | 'usr'
  | 'mem'
  | 'ses'
  | 'inv'
  | 'rc'
  | 'pl'
  | 'tpl'
  | 'sup'
  | 'ins';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ulid()}`;
}
