import type { FastifyReply, FastifyRequest } from 'fastify';
import { auditEventIn } from '../core/audit.js';
import { startPendingLogin, PENDING_LOGIN_MS } from '../core/pending-logins.js';
import { enrolmentRequired } from '../core/two-factor.js';
import { createSession, endSession } from '../core/ui-sessions.js';
import { findUserByEmail, type UserRow } from '../core/users.js';
import { setCookie } from './cookies.js';
import { query, type Ui } from './context.js';

// The steps a login is made of, shared by the login form, the second-factor form and the
// other places that ask for a proof of identity (Your account): throttle → password →
// second factor → session. Each is a function, so the login handler reads as that list.

export const ENROL_PATH = '/ui/account/2fa';

/** Only a path inside the console: never another host (//evil.example) or scheme. */
export function safeNext(next: string | undefined): string {
  return next && /^\/ui\/[A-Za-z0-9/_.?=&%-]*$/.test(next) && !next.startsWith('//') ? next : '/ui/overview';
}

/** Where a login lands: the page asked for once a partner is picked, else the partner picker first. */
export function afterLogin(req: FastifyRequest, partnerId: string | null): string {
  const next = query(req).next;
  const dest = safeNext(next);
  if (partnerId || dest.startsWith('/ui/invite/')) return dest;
  return `/ui/partners${next ? `?next=${encodeURIComponent(dest)}` : ''}`;
}

export type Admitted = { attempt: number } | { sent: unknown };

export function loginSteps(ui: Ui) {
  const { ctx, config } = ui.rt;

  /**
   * Throttle: refused (and audited) past the limit, answered by `refused` with a 429 page;
   * otherwise the attempt counts from now on, while it is checked.
   */
  const admit = async (
    reply: FastifyReply,
    email: string,
    ip: string,
    step: string,
    refused: (error: string) => unknown,
  ): Promise<Admitted> => {
    const admission = await ui.throttle.begin(email, ip);
    if (admission.ok) return { attempt: admission.attempt };
    const user = await findUserByEmail(ctx, email);
    await auditEventIn(ctx, ctx.store, 'anonymous', 'ui.login_throttled', 'user', user?.id ?? null, {
      email,
      ip,
      step,
    });
    reply.header('retry-after', String(Math.ceil(admission.waitMs / 1000)));
    return { sent: refused(`Too many attempts. Try again in ${Math.ceil(admission.waitMs / 60_000)} minute(s).`) };
  };

  /** A wrong password or code, in the audit log with where it was tried (never what was tried). */
  const auditFailure = async (email: string, ip: string, step: string, actor = 'anonymous') => {
    const user = await findUserByEmail(ctx, email);
    await auditEventIn(ctx, ctx.store, actor, 'ui.login_failed', 'user', user?.id ?? null, { email, ip, step });
  };

  /** Second factor: the password was right; the browser holds the pending login and is asked for a code. */
  const askForCode = async (req: FastifyRequest, reply: FastifyReply, user: UserRow, attempt: number) => {
    const { secret } = await startPendingLogin(ctx, user.id, attempt);
    setCookie(reply, ui.names, ui.names.pending, secret, PENDING_LOGIN_MS / 1000);
    const next = query(req).next;
    return reply.redirect(`/ui/login/code${next ? `?next=${encodeURIComponent(safeNext(next))}` : ''}`, 303);
  };

  /**
   * Session: the account's throttle count starts again (the `attempts` of this login no longer
   * count against the address) and a fresh session begins. A person whose partner (picked for
   * the session) requires two-factor authentication and who has none is sent to set it up.
   */
  const startSession = async (req: FastifyRequest, reply: FastifyReply, user: UserRow, attempts: number[]) => {
    await ui.throttle.succeeded(user.email, attempts);
    // A session this browser already had ends: every login starts a fresh one.
    if (req.ui?.session) await endSession(ctx, req.ui.session.sessionId, req.ui.session.userId);
    const { secret, partnerId } = await createSession(ctx, user.id, { ip: req.ip });
    setCookie(reply, ui.names, ui.names.session, secret, config.ui.sessionMaxHours * 3600);
    const enrol = partnerId !== null && (await enrolmentRequired(ctx, user.id, partnerId));
    return reply.redirect(enrol ? ENROL_PATH : afterLogin(req, partnerId), 303);
  };

  return { admit, auditFailure, askForCode, startSession };
}
