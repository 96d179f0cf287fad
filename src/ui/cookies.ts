import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';

// The console's cookies: the session; before login a random value the login form's CSRF
// token is bound to; between a password and its second factor, the pending login; and after a
// form's POST, a cookie per flash note (flash.ts) for the page it leads to. All HttpOnly and
// SameSite=Lax; Secure with the __Host- prefix whenever msgd's public URL is HTTPS (the prefix
// makes the browser refuse a cookie set by a sibling subdomain or over plain HTTP).

export interface CookieNames {
  session: string;
  anon: string;
  pending: string;
  /** The prefix of the flash notes' cookies (flash.ts), one cookie per note. */
  flash: string;
  secure: boolean;
}

export function cookieNames(config: Config): CookieNames {
  const secure = (config.server.publicUrl ?? '').startsWith('https:');
  return secure
    ? {
        session: '__Host-msgd_session',
        anon: '__Host-msgd_csrf',
        pending: '__Host-msgd_login',
        flash: '__Host-msgd_flash_',
        secure,
      }
    : { session: 'msgd_session', anon: 'msgd_csrf', pending: 'msgd_login', flash: 'msgd_flash_', secure };
}

export function readCookie(req: FastifyRequest, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    return /^[A-Za-z0-9_-]{1,100}$/.test(value) ? value : undefined;
  }
  return undefined;
}

/** The cookies whose names start with `prefix` (values of up to 4,000 URL-safe characters), by name. */
export function readCookies(req: FastifyRequest, prefix: string): Map<string, string> {
  const found = new Map<string, string>();
  const header = req.headers.cookie;
  if (!header) return found;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name.startsWith(prefix) && /^[A-Za-z0-9_-]{1,4000}$/.test(value)) found.set(name, value);
  }
  return found;
}

export function setCookie(
  reply: FastifyReply,
  names: CookieNames,
  name: string,
  value: string,
  maxAgeSeconds: number | null,
) {
  const parts = [`${name}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax'];
  if (names.secure) parts.push('Secure');
  if (maxAgeSeconds !== null) parts.push(`Max-Age=${maxAgeSeconds}`);
  const prev = reply.getHeader('set-cookie');
  const list = Array.isArray(prev) ? prev.map(String) : prev ? [String(prev)] : [];
  reply.header('set-cookie', [...list, parts.join('; ')]);
}

export function clearCookie(reply: FastifyReply, names: CookieNames, name: string) {
  setCookie(reply, names, name, '', 0);
}
