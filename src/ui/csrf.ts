import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import { readCookie, setCookie, type CookieNames } from './cookies.js';

// One CSRF token per session: an HMAC of the session id under a key derived from the master
// key, so nothing more is stored and a token from one session is worthless in another. Before
// login the token is bound the same way to a random cookie. Every unsafe method must carry it
// (form field _csrf or header X-CSRF-Token) and must not come from another site.

export const CSRF_FIELD = '_csrf';
export const CSRF_HEADER = 'x-csrf-token';

/** Makes and checks the tokens (the pages carry one in the hidden field layout.tsx's `Csrf` draws). */
export class CsrfTokens {
  private key: Buffer;

  constructor(masterKey: Buffer) {
    this.key = createHmac('sha256', masterKey).update('msgd console csrf v1').digest();
  }

  tokenFor(binding: string): string {
    return createHmac('sha256', this.key).update(binding).digest('base64url');
  }

  matches(binding: string | null, presented: unknown): boolean {
    if (!binding || typeof presented !== 'string' || presented.length > 100) return false;
    const a = Buffer.from(this.tokenFor(binding));
    const b = Buffer.from(presented);
    return a.length === b.length && timingSafeEqual(a, b);
  }
}

/** The pre-login binding: the anonymous cookie, set now if the browser has none. */
export function anonBinding(req: FastifyRequest, reply: FastifyReply, names: CookieNames): string {
  let value = readCookie(req, names.anon);
  if (!value) {
    value = randomBytes(24).toString('base64url');
    setCookie(reply, names, names.anon, value, null);
  }
  return `anon:${value}`;
}

/**
 * Is this request from another site? Sec-Fetch-Site when the browser sends it (all current
 * ones do), else Origin against this server's own origin(s).
 */
export function crossSite(req: FastifyRequest, config: Config): boolean {
  // A browser sets Sec-Fetch-Site itself and no page can forge it: when present, it decides.
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string') return site !== 'same-origin' && site !== 'none';
  const origin = req.headers.origin;
  if (typeof origin !== 'string') return false;
  if (origin === 'null') return true;
  const own = new Set<string>();
  const host = req.headers.host;
  if (host) own.add(`${req.protocol}://${host}`.toLowerCase());
  if (config.server.publicUrl) own.add(new URL(config.server.publicUrl).origin.toLowerCase());
  return !own.has(origin.toLowerCase());
}
