import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { LoginThrottle } from '../core/login-throttle.js';
import type { SessionPerson, SessionUser } from '../core/ui-sessions.js';
import { can, type Area } from '../core/users.js';
import { AppError } from '../lib/errors.js';
import type { JobQueue } from '../queue/queue.js';
import { anonBinding, type CsrfTokens } from './csrf.js';
import type { CookieNames } from './cookies.js';
import type { Flash, FlashNote } from './flash.js';

// What every console route receives, and the per-request state the plugin's hooks leave.

/**
 * What the console uses of the running msgd: src/server.ts hands it the runtime, which has all
 * of it (the console imports neither the runtime nor the partner API).
 */
export interface UiDeps {
  ctx: CoreCtx;
  config: Config;
  /** A test event or a replay to a partner's endpoint is a delivery job. */
  queue: JobQueue;
  /** msgd's readiness: told of a write the storage refused (absent where no server runs). */
  storage?: { noteFailure(e: unknown): void };
}

export interface Ui {
  rt: UiDeps;
  names: CookieNames;
  csrf: CsrfTokens;
  throttle: LoginThrottle;
  flash: Flash;
}

export interface UiRequestState {
  /** The logged-in person, whether or not a partner is picked. */
  session: SessionPerson | null;
  /** The person working in the partner picked for the session: what the console's pages need. */
  user: SessionUser | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    ui?: UiRequestState;
  }
}

export type Form = Record<string, string | string[] | undefined>;

export function form(req: FastifyRequest): Form {
  return (req.body && typeof req.body === 'object' ? req.body : {}) as Form;
}

/** One value of a form field (the first, if it came several times). */
export function field(f: Form, name: string): string {
  const v = f[name];
  return (Array.isArray(v) ? v[0] : v) ?? '';
}

export function fields(f: Form, name: string): string[] {
  const v = f[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

export function query(req: FastifyRequest): Record<string, string | undefined> {
  const q = (req.query ?? {}) as Record<string, unknown>;
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(q))
    out[k] = typeof v === 'string' ? v : Array.isArray(v) ? String(v[0]) : undefined;
  return out;
}

/** The CSRF token the page's forms carry: bound to the session, or before login to the anonymous cookie. */
export function csrfToken(ui: Ui, req: FastifyRequest, reply: FastifyReply): string {
  const session = req.ui?.session;
  return ui.csrf.tokenFor(session ? `ses:${session.sessionId}` : anonBinding(req, reply, ui.names));
}

export class LoginRequired extends Error {}

/** A logged-in person who has not picked a partner yet: sent to pick one. */
export class PartnerRequired extends Error {}

/** The logged-in person, with or without a partner picked; a visitor is sent to log in. */
export function personFor(req: FastifyRequest): SessionPerson {
  const session = req.ui?.session;
  if (!session) throw new LoginRequired();
  return session;
}

/**
 * The signed-in user allowed into this area of the partner picked for the session, with the
 * role of their membership there; a visitor is sent to log in, a person without a partner
 * picked to pick one.
 */
export function userFor(req: FastifyRequest, area: Area): SessionUser {
  const user = req.ui?.user;
  if (!user) throw req.ui?.session ? new PartnerRequired() : new LoginRequired();
  if (!can(user.role, area)) throw new AppError('forbidden', `your role (${user.role}) does not include this page`);
  return user;
}

export const actorOf = (user: SessionUser) => `user:${user.userId}`;

/** Post/Redirect/Get: keep `note` for the session's next GET of `path` and send the browser there. */
export function redirectWithNote(ui: Ui, req: FastifyRequest, reply: FastifyReply, path: string, note: FlashNote) {
  const user = req.ui?.user;
  if (!user) throw new LoginRequired();
  const key = ui.flash.put(req, reply, user.sessionId, path, note);
  return reply.redirect(`${path}?flash=${key}`, 303);
}

/** The note a redirect left for this page (shown once: a reload finds none). */
export function takeNote(ui: Ui, req: FastifyRequest, reply: FastifyReply, path: string): FlashNote {
  const user = req.ui?.user;
  const key = query(req).flash;
  return (user && ui.flash.take(req, reply, user.sessionId, path, key)) || {};
}
