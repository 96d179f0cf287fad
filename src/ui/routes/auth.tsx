import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { PASSWORD_MIN } from '../../core/passwords.js';
import { twoFactorOn } from '../../core/two-factor.js';
import { createSession, endAllSessions, endSession, selectPartner } from '../../core/ui-sessions.js';
import { acceptJoinLink, acceptLink, changePassword, checkLogin, getUser, openLink } from '../../core/users.js';
import { AppError } from '../../lib/errors.js';
import { clearCookie, setCookie } from '../cookies.js';
import { csrfToken, field, form, personFor, query, type Ui } from '../context.js';
import { Csrf, Notice, Page, sendPage } from '../layout.js';
import { afterLogin, loginSteps } from '../login-steps.js';

// Logging in and out, accepting an invite or reset link, and the account page.

const GENERIC_FAILURE = 'The email or password is not right, or the account cannot log in.';

const NEW_PASSWORD = `New password (at least ${PASSWORD_MIN} characters)`;

/** A field for a password being chosen: browsers may suggest one, and enforce the minimum before sending. */
function NewPassword({ name, label }: { name: string; label: string }) {
  return (
    <>
      <label htmlFor={name}>{label}</label>
      <input id={name} name={name} type="password" autoComplete="new-password" minLength={PASSWORD_MIN} required />
    </>
  );
}

export const authRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  const loginPage = (
    req: FastifyRequest,
    reply: FastifyReply,
    opts: { error?: string; notice?: string; email?: string; status?: number } = {},
  ) =>
    sendPage(
      reply,
      <Page title="Log in" user={null} csrf="">
        <div className="login">
          {opts.notice && <Notice kind="ok">{opts.notice}</Notice>}
          {opts.error && <Notice kind="error">{opts.error}</Notice>}
          <form method="post" action={`/ui/login${req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : ''}`}>
            <Csrf token={csrfToken(ui, req, reply)} />
            <label htmlFor="email">Email</label>
            <input id="email" name="email" type="email" autoComplete="username" required defaultValue={opts.email} />
            <label htmlFor="password">Password</label>
            <input id="password" name="password" type="password" autoComplete="current-password" required />
            <p>
              <button type="submit">Log in</button>
            </p>
          </form>
          <p className="muted">Forgot your password? Ask your admin or operator for a reset link.</p>
        </div>
      </Page>,
      opts.status ?? 200,
    );

  app.get('/login', async (req, reply) => {
    if (req.ui?.session) return reply.redirect(afterLogin(req, req.ui.user?.partnerId ?? null), 303);
    const q = query(req);
    return loginPage(req, reply, {
      notice:
        q.done === 'password'
          ? 'Your password is set. Log in with it.'
          : q.done === 'logout'
            ? 'You are logged out.'
            : q.done === 'expired'
              ? 'That login took too long or was already used. Log in again.'
              : undefined,
    });
  });

  const { admit, auditFailure, askForCode, startSession } = loginSteps(ui);

  app.post('/login', async (req, reply) => {
    const f = form(req);
    const email = field(f, 'email').slice(0, 254);
    const ip = req.ip;
    // Throttle: counted before the password is hashed, so parallel guesses count too.
    const admitted = await admit(reply, email, ip, 'password', (error) =>
      loginPage(req, reply, { error, email, status: 429 }),
    );
    if ('sent' in admitted) return admitted.sent;
    // Password.
    const user = await checkLogin(rt.ctx, email, field(f, 'password'));
    if (!user) {
      await auditFailure(email, ip, 'password');
      return loginPage(req, reply, { error: GENERIC_FAILURE, email, status: 401 });
    }
    // Second factor, when the person has one on.
    if (twoFactorOn(user)) return askForCode(req, reply, user, admitted.attempt);
    // Session.
    return await startSession(req, reply, user, [admitted.attempt]);
  });

  app.post('/logout', async (req, reply) => {
    const session = req.ui?.session;
    if (session) await endSession(rt.ctx, session.sessionId, session.userId);
    clearCookie(reply, ui.names, ui.names.session);
    return reply.redirect('/ui/login?done=logout', 303);
  });

  app.post('/logout-everywhere', async (req, reply) => {
    const person = personFor(req);
    await endAllSessions(rt.ctx, person.userId);
    clearCookie(reply, ui.names, ui.names.session);
    return reply.redirect('/ui/login?done=logout', 303);
  });

  const linkPage = async (req: FastifyRequest, reply: FastifyReply, secret: string, error?: string, status = 200) => {
    const info = await openLink(rt.ctx, secret);
    if (!info)
      return sendPage(
        reply,
        <Page title="Link expired" user={null} csrf="">
          <Notice kind="error">
            This link has expired or was already used. Ask your admin or operator for a new one.
          </Notice>
          <p>
            <a href="/ui/login">Log in</a>
          </p>
        </Page>,
        410,
      );
    if (info.kind === 'join') {
      // An invitation for a person who logs in to accept it: this link sets no password.
      const session = req.ui?.session ?? null;
      const mine = session?.userId === info.user.id;
      return sendPage(
        reply,
        <Page
          title={`Join ${info.partnerName}`}
          user={req.ui?.user ?? null}
          person={session}
          csrf={csrfToken(ui, req, reply)}
        >
          <div className="login">
            {error && <Notice kind="error">{error}</Notice>}
            <p>
              {info.user.email} is invited to the {info.partnerName} console as {info.role}.
            </p>
            {mine ? (
              <form method="post" action={`/ui/invite/${secret}/accept`}>
                <Csrf token={csrfToken(ui, req, reply)} />
                <p>
                  <button type="submit">Accept and open {info.partnerName}</button>
                </p>
              </form>
            ) : (
              <>
                <p>Log in with {info.user.email} to accept.</p>
                <p>
                  <a href={`/ui/login?next=${encodeURIComponent(`/ui/invite/${secret}`)}`}>Log in</a>
                </p>
                <p className="muted">
                  No password yet? Use the link of your first invitation, or ask your operator for a new one.
                </p>
              </>
            )}
          </div>
        </Page>,
        status,
      );
    }
    return sendPage(
      reply,
      <Page title={info.kind === 'invite' ? `Join ${info.partnerName}` : 'Set a new password'} user={null} csrf="">
        <div className="login">
          {error && <Notice kind="error">{error}</Notice>}
          <p>
            {info.kind === 'invite'
              ? `You are invited to the ${info.partnerName} console as ${info.role}. Choose a password to finish.`
              : 'Choose a new password. Every session of this account will end.'}
          </p>
          <form method="post" action={`/ui/invite/${secret}`}>
            <Csrf token={csrfToken(ui, req, reply)} />
            <label htmlFor="email">Email</label>
            <input id="email" name="email" type="email" autoComplete="username" readOnly value={info.user.email} />
            <NewPassword name="password" label={NEW_PASSWORD} />
            <NewPassword name="confirm" label="Repeat the password" />
            <p>
              <button type="submit">Set password</button>
            </p>
          </form>
        </div>
      </Page>,
      status,
    );
  };

  app.get<{ Params: { secret: string } }>('/invite/:secret', async (req, reply) =>
    linkPage(req, reply, req.params.secret),
  );

  app.post<{ Params: { secret: string } }>('/invite/:secret', async (req, reply) => {
    const f = form(req);
    const password = field(f, 'password');
    if (password !== field(f, 'confirm'))
      return linkPage(req, reply, req.params.secret, 'The two passwords differ.', 400);
    try {
      await acceptLink(rt.ctx, req.params.secret, password);
    } catch (e) {
      if (e instanceof AppError && e.code === 'invalid_request')
        return linkPage(req, reply, req.params.secret, e.message, 400);
      throw e;
    }
    // Any session in this browser belonged to the account before: it ended with the password.
    clearCookie(reply, ui.names, ui.names.session);
    return reply.redirect('/ui/login?done=password', 303);
  });

  app.post<{ Params: { secret: string } }>('/invite/:secret/accept', async (req, reply) => {
    const person = personFor(req);
    try {
      const { partnerId } = await acceptJoinLink(rt.ctx, req.params.secret, person.userId);
      await selectPartner(rt.ctx, person, partnerId);
    } catch (e) {
      if (e instanceof AppError && e.code === 'forbidden')
        return linkPage(req, reply, req.params.secret, e.message, 403);
      throw e;
    }
    return reply.redirect('/ui/overview', 303);
  });

  const accountPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    msg: { error?: string; ok?: string } = {},
    status = 200,
  ) => {
    const person = personFor(req);
    const twoFactor = twoFactorOn((await getUser(rt.ctx, person.userId))!);
    const user = req.ui?.user ?? null;
    const csrf = csrfToken(ui, req, reply);
    return sendPage(
      reply,
      <Page title="Your account" user={user} person={person} csrf={csrf}>
        {msg.error && <Notice kind="error">{msg.error}</Notice>}
        {msg.ok && <Notice kind="ok">{msg.ok}</Notice>}
        <dl className="kv">
          <dt>Email</dt>
          <dd>{person.email}</dd>
          {user && (
            <>
              <dt>Role</dt>
              <dd>{user.role}</dd>
              <dt>Partner</dt>
              <dd>{user.partnerName}</dd>
            </>
          )}
          {person.partners.length > 1 && (
            <>
              <dt>Partners</dt>
              <dd>{person.partners.map((m) => `${m.partner_name} (${m.role})`).join(', ')}</dd>
            </>
          )}
        </dl>
        <h2>Change password</h2>
        <form method="post" action="/ui/account/password">
          <Csrf token={csrf} />
          <label htmlFor="current">Current password</label>
          <input id="current" name="current" type="password" autoComplete="current-password" required />
          <NewPassword name="password" label={NEW_PASSWORD} />
          <p>
            <button type="submit">Change password</button>
          </p>
        </form>
        <h2>Two-factor authentication</h2>
        <p>
          {twoFactor
            ? 'On: logging in takes your password and a code from your phone.'
            : 'Off: logging in takes only your password.'}{' '}
          <a href="/ui/account/2fa">Two-factor authentication settings</a>
        </p>
        <h2>Sessions</h2>
        <form method="post" action="/ui/logout-everywhere" data-confirm="Log out of every browser, this one included?">
          <Csrf token={csrf} />
          <p>
            Ends every session of your account, on every device, this one included, and every unused invite or reset
            link sent for it.
          </p>
          <button type="submit" className="danger">
            Log out everywhere
          </button>
        </form>
      </Page>,
      status,
    );
  };

  app.get('/account', async (req, reply) =>
    accountPage(
      req,
      reply,
      query(req).done === 'password'
        ? { ok: 'Your password is changed; your other sessions have ended.' }
        : query(req).done === '2fa-off'
          ? { ok: 'Two-factor authentication is off.' }
          : {},
    ),
  );

  app.post('/account/password', async (req, reply) => {
    const person = personFor(req);
    const f = form(req);
    // The current password is a proof of identity like a login's: the same throttle and audit.
    const admitted = await admit(reply, person.email, req.ip, 'account_password', (error) =>
      accountPage(req, reply, { error }, 429),
    );
    if ('sent' in admitted) return admitted.sent;
    try {
      await changePassword(rt.ctx, person.userId, field(f, 'current'), field(f, 'password'));
    } catch (e) {
      if (e instanceof AppError && e.code === 'invalid_request') {
        if (e.details.some((d) => d.field === 'current'))
          await auditFailure(person.email, req.ip, 'account_password', `user:${person.userId}`);
        else await ui.throttle.succeeded(person.email, [admitted.attempt]);
        return accountPage(req, reply, { error: e.message }, 400);
      }
      throw e;
    }
    await ui.throttle.succeeded(person.email, [admitted.attempt]);
    // Every session ended with the password; this browser starts a fresh one.
    const { secret } = await createSession(rt.ctx, person.userId, { ip: req.ip, partnerId: req.ui?.user?.partnerId });
    setCookie(reply, ui.names, ui.names.session, secret, rt.config.ui.sessionMaxHours * 3600);
    return reply.redirect('/ui/account?done=password', 303);
  });
};
