import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { clearCookie, readCookies, setCookie, type CookieNames } from './cookies.js';

// What a POST shows on the page it redirects to (Post/Redirect/Get): a reload of that page
// repeats a GET, never the POST, so issuing a token or registering an endpoint happens once.
// A one-time secret travels here, never in the URL. The note rides in a cookie of its own,
// sealed (AES-256-GCM under a key derived from the master key, so the browser holds only
// ciphertext) and bound to the session that made it: whichever msgd instance answers the
// redirect's GET opens it, with nothing stored on any instance or in the database. That GET
// takes it (the answer clears the cookie, so a reload shows it no more); a note whose GET never
// comes is refused after FLASH_TTL_MS (its expiry is inside the seal) and the browser drops it.

export const FLASH_TTL_MS = 2 * 60_000;
/** Notes a browser holds at once: a user posting in several tabs gets each, and the Cookie header stays small. */
export const PER_BROWSER = 4;
/** The sealed note's size bound (UTF-8 bytes of its JSON): each cookie stays well under browsers' 4 KB. */
const NOTE_BYTES = 1200;
const VERSION = 'f1';

export interface FlashNote {
  ok?: string;
  error?: string;
  /** A one-time secret and the words that introduce it. */
  secret?: { label: string; value: string };
}

interface Sealed {
  /** The page that shows it. */
  p: string;
  /** When it expires (ms, msgd's clock). */
  e: number;
  n: FlashNote;
}

export class Flash {
  private key: Buffer;

  constructor(
    masterKey: Buffer,
    private names: CookieNames,
    private now: () => number,
  ) {
    this.key = createHmac('sha256', masterKey).update('msgd console flash v1').digest();
  }

  /**
   * Keep a note for the session's next GET of `path`; the returned key goes in the redirect's
   * query (`?flash=…`) and names the cookie, so that a second tab's note is not shown in the first.
   */
  put(req: FastifyRequest, reply: FastifyReply, sessionId: string, path: string, note: FlashNote): string {
    const now = this.now();
    // Notes already held: unreadable or expired ones go, and the oldest beyond the bound.
    const held: { name: string; expires: number }[] = [];
    for (const [name, value] of readCookies(req, this.names.flash)) {
      const open = this.open(sessionId, name.slice(this.names.flash.length), value);
      if (open && open.e > now) held.push({ name, expires: open.e });
      else clearCookie(reply, this.names, name);
    }
    held.sort((a, b) => a.expires - b.expires);
    for (const old of held.slice(0, Math.max(0, held.length - (PER_BROWSER - 1)))) {
      clearCookie(reply, this.names, old.name);
    }
    const key = randomBytes(9).toString('base64url');
    const sealed: Sealed = { p: path, e: now + FLASH_TTL_MS, n: fit(note) };
    setCookie(reply, this.names, this.names.flash + key, this.seal(sessionId, key, sealed), FLASH_TTL_MS / 1000);
    return key;
  }

  /** The note kept for the session, page and key, cleared as it is read; null when none. */
  take(
    req: FastifyRequest,
    reply: FastifyReply,
    sessionId: string,
    path: string,
    key: string | undefined,
  ): FlashNote | null {
    if (!key || !/^[A-Za-z0-9_-]{12}$/.test(key)) return null;
    const name = this.names.flash + key;
    const value = readCookies(req, this.names.flash).get(name);
    if (value === undefined) return null;
    const open = this.open(sessionId, key, value);
    // Another page's note waits for its own page.
    if (open && open.p !== path) return null;
    clearCookie(reply, this.names, name);
    return open && open.e > this.now() ? open.n : null;
  }

  private seal(sessionId: string, key: string, sealed: Sealed): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(`${VERSION}\n${sessionId}\n${key}`));
    const body = Buffer.concat([cipher.update(JSON.stringify(sealed), 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
  }

  /** The note, if `value` was sealed by this master key for this session and key; else null. */
  private open(sessionId: string, key: string, value: string): Sealed | null {
    try {
      const raw = Buffer.from(value, 'base64url');
      if (raw.length < 29) return null;
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(`${VERSION}\n${sessionId}\n${key}`));
      decipher.setAuthTag(raw.subarray(12, 28));
      const text = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
      const sealed = JSON.parse(text) as Sealed;
      return typeof sealed.p === 'string' && typeof sealed.e === 'number' && sealed.n ? sealed : null;
    } catch {
      return null;
    }
  }
}

/** The note within NOTE_BYTES: a long message is shortened (with "…"), a secret never. */
function fit(note: FlashNote): FlashNote {
  const out = { ...note };
  for (;;) {
    const excess = Buffer.byteLength(JSON.stringify(out)) - NOTE_BYTES;
    if (excess <= 0) return out;
    const field = (out.error?.length ?? 0) >= (out.ok?.length ?? 0) ? 'error' : 'ok';
    const text = out[field];
    if (!text) return out;
    const cut = excess + 3; // "…" is 3 bytes: each pass shrinks the note
    out[field] = text.length > cut ? `${text.slice(0, text.length - cut)}…` : '';
  }
}
