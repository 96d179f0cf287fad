import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { renderSVG } from 'uqr';
import { endPendingLogin, openPendingLogin } from '../../core/pending-logins.js';
import { verifyPassword } from '../../core/passwords.js';
import {
  RECOVERY_CODES,
  checkSecondFactor,
  confirmEnrolment,
  disableTwoFactor,
  enrolmentRequired,
  recoveryCodesLeft,
  startEnrolment,
  twoFactorOn,
  type Enrolment,
} from '../../core/two-factor.js';
import { getUser, mayLogIn } from '../../core/users.js';
import { AppError } from '../../lib/errors.js';
import { clearCookie, readCookie } from '../cookies.js';
import { csrfToken, field, form, personFor, type Ui } from '../context.js';
import { Csrf, Notice, Page, ShownOnce, sendPage, When } from '../layout.js';
import { ENROL_PATH, loginSteps } from '../login-steps.js';

// Two-factor authentication in the console: the code step of a login, and its page under Your
// account (set up, confirm with a first code, recovery codes shown once, turn off). The QR code
// is drawn here as an SVG (uqr, no network), inlined as a data: image the CSP allows.

const CODE_HELP = 'Enter the 6-digit code from your authenticator app, or one of your recovery codes.';

function CodeField() {
  return (
    <>
      <label htmlFor="code">Code</label>
      <input
        id="code"
        name="code"
        type="text"
        autoComplete="one-time-code"
        autoCapitalize="none"
        spellCheck={false}
        maxLength={40}
        required
      />
    </>
  );
}

export const twoFactorRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;
  const { admit, auditFailure, startSession } = loginSteps(ui);

  // ---- The second step of a login ----

  const codePage = (req: FastifyRequest, reply: FastifyReply, error?: string, status = 200) =>
    sendPage(
      reply,
      <Page title="Two-factor code" user={null} csrf="">
        <div className="login">
          {error && <Notice kind="error">{error}</Notice>}
          <p>{CODE_HELP}</p>
          <form
            method="post"
            action={`/ui/login/code${req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : ''}`}
          >
            <Csrf token={csrfToken(ui, req, reply)} />
            <CodeField />
            <p>
              <button type="submit">Log in</button>
            </p>
          </form>
          <p className="muted">
            Lost your phone and your recovery codes? Ask your operator to reset two-factor authentication.
          </p>
        </div>
      </Page>,
      status,
    );

  const expired = (reply: FastifyReply) => {
    clearCookie(reply, ui.names, ui.names.pending);
    return reply.redirect('/ui/login?done=expired', 303);
  };

  app.get('/login/code', async (req, reply) => {
    if (!(await openPendingLogin(rt.ctx, readCookie(req, ui.names.pending)))) return expired(reply);
    return codePage(req, reply);
  });

  app.post('/login/code', async (req, reply) => {
    const pending = await openPendingLogin(rt.ctx, readCookie(req, ui.names.pending));
    const user = pending && (await getUser(rt.ctx, pending.userId));
    // Disabled, or left with no partner, since the password step: that login is over.
    if (!pending || !user || !(await mayLogIn(rt.ctx, user))) return expired(reply);
    const ip = req.ip;
    // Throttle: the same count as the password's, so a known password buys no extra guesses.
    const admitted = await admit(reply, user.email, ip, 'code', (error) => codePage(req, reply, error, 429));
    if ('sent' in admitted) return admitted.sent;
    // Second factor.
    const check = await checkSecondFactor(rt.ctx, user.id, field(form(req), 'code'));
    if (!check.ok) {
      await auditFailure(user.email, ip, 'code');
      return codePage(
        req,
        reply,
        check.replay ? 'That code was already used. Wait for the next one.' : 'That code is not right.',
        401,
      );
    }
    // Single use: of two requests racing with one pending login, only one logs in.
    if (!(await endPendingLogin(rt.ctx, pending.id))) return expired(reply);
    clearCookie(reply, ui.names, ui.names.pending);
    // Session.
    return await startSession(req, reply, user, [pending.attempt, admitted.attempt]);
  });

  // ---- Your account: two-factor authentication ----

  const accountPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    body: { error?: string; ok?: string; enrolment?: Enrolment; codes?: string[] } = {},
    status = 200,
  ) => {
    const person = personFor(req);
    const user = req.ui?.user ?? null;
    const row = (await getUser(rt.ctx, person.userId))!;
    const csrf = csrfToken(ui, req, reply);
    const on = twoFactorOn(row);
    const required = user !== null && (await enrolmentRequired(rt.ctx, user.userId, user.partnerId));
    const recoveryLeft = on ? await recoveryCodesLeft(rt.ctx, person.userId) : 0;
    return sendPage(
      reply,
      <Page title="Two-factor authentication" user={user} person={person} csrf={csrf}>
        {body.error && <Notice kind="error">{body.error}</Notice>}
        {body.ok && <Notice kind="ok">{body.ok}</Notice>}
        {required && !body.enrolment && (
          <Notice kind="error">
            {user?.partnerName} requires two-factor authentication: set it up to use the console.
          </Notice>
        )}
        {body.codes ? (
          <ShownOnce
            id="recovery-codes"
            value={body.codes.join('\n')}
            intro={
              <>
                Two-factor authentication is on. These {body.codes.length} recovery codes each log you in once without
                your phone. Keep them somewhere safe, apart from your phone: they are not shown again.
              </>
            }
          />
        ) : body.enrolment ? (
          <>
            <p>
              Add this key to an authenticator app (any app for time-based codes), then enter the code it shows to turn
              two-factor authentication on.
            </p>
            <ShownOnce
              id="totp-secret"
              value={body.enrolment.secret.match(/.{1,4}/g)!.join(' ')}
              intro="The key, to type into the app. It is not shown again."
            />
            <p>Or scan this QR code with the app:</p>
            <p>
              <img
                id="totp-qr"
                src={`data:image/svg+xml;base64,${Buffer.from(renderSVG(body.enrolment.uri)).toString('base64')}`}
                alt="QR code of the otpauth link below"
                width={200}
                height={200}
              />
            </p>
            <p>Or open this link on the phone with the app, or paste it into an app that takes links:</p>
            <code className="secret" id="totp-uri">
              {body.enrolment.uri}
            </code>
            <ConfirmForm csrf={csrf} />
          </>
        ) : on ? (
          <>
            <p>
              Two-factor authentication is on since <When ms={row.totp_enabled_at} />. Recovery codes left:{' '}
              <strong id="recovery-left">{recoveryLeft}</strong> of {RECOVERY_CODES}.
            </p>
            <h2>Turn it off</h2>
            <form method="post" action={`${ENROL_PATH}/disable`}>
              <Csrf token={csrf} />
              <label htmlFor="current">Current password</label>
              <input id="current" name="current" type="password" autoComplete="current-password" required />
              <CodeField />
              <p>
                <button type="submit" className="danger">
                  Turn off two-factor authentication
                </button>
              </p>
            </form>
            <p className="muted">To get new recovery codes, turn it off and set it up again.</p>
          </>
        ) : (
          <>
            <p>
              With two-factor authentication, logging in takes your password and a code from an app on your phone, so a
              stolen password alone does not open your account.
            </p>
            {row.totp_secret && status === 400 && <ConfirmForm csrf={csrf} />}
            <form method="post" action={`${ENROL_PATH}/setup`}>
              <Csrf token={csrf} />
              <button type="submit" className={row.totp_secret && status === 400 ? 'secondary' : undefined}>
                {row.totp_secret && status === 400 ? 'Start over with a new key' : 'Set up two-factor authentication'}
              </button>
            </form>
          </>
        )}
        {(on || body.codes) && (
          <p>
            <a href="/ui/account">Back to your account</a>
          </p>
        )}
      </Page>,
      status,
    );
  };

  app.get('/account/2fa', async (req, reply) => accountPage(req, reply));

  app.post('/account/2fa/setup', async (req, reply) => {
    const person = personFor(req);
    try {
      const enrolment = await startEnrolment(rt.ctx, person.userId);
      return accountPage(req, reply, { enrolment });
    } catch (e) {
      if (e instanceof AppError && e.code === 'conflict') return accountPage(req, reply, { error: e.message }, 409);
      throw e;
    }
  });

  app.post('/account/2fa/confirm', async (req, reply) => {
    const person = personFor(req);
    try {
      const codes = await confirmEnrolment(rt.ctx, person.userId, field(form(req), 'code'));
      return accountPage(req, reply, { codes });
    } catch (e) {
      if (e instanceof AppError && (e.code === 'invalid_request' || e.code === 'conflict'))
        return accountPage(req, reply, { error: e.message }, e.code === 'conflict' ? 409 : 400);
      throw e;
    }
  });

  app.post('/account/2fa/disable', async (req, reply) => {
    const person = personFor(req);
    const f = form(req);
    // Password and code are proofs of identity: the login's throttle and audit.
    const admitted = await admit(reply, person.email, req.ip, 'account_2fa', (error) =>
      accountPage(req, reply, { error }, 429),
    );
    if ('sent' in admitted) return admitted.sent;
    const row = (await getUser(rt.ctx, person.userId))!;
    if (!twoFactorOn(row)) return accountPage(req, reply, { error: 'Two-factor authentication is off.' }, 409);
    const passwordOk = await verifyPassword(field(f, 'current'), row.password_hash);
    const codeOk = passwordOk && (await checkSecondFactor(rt.ctx, person.userId, field(f, 'code'))).ok;
    if (!codeOk) {
      await auditFailure(person.email, req.ip, 'account_2fa', `user:${person.userId}`);
      return accountPage(
        req,
        reply,
        { error: passwordOk ? 'That code is not right.' : 'The current password is not right.' },
        400,
      );
    }
    await ui.throttle.succeeded(person.email, [admitted.attempt]);
    await disableTwoFactor(rt.ctx, person.userId);
    return reply.redirect(`/ui/account?done=2fa-off`, 303);
  });
};

function ConfirmForm({ csrf }: { csrf: string }) {
  return (
    <form method="post" action={`${ENROL_PATH}/confirm`}>
      <Csrf token={csrf} />
      <label htmlFor="code">Code from the app</label>
      <input
        id="code"
        name="code"
        type="text"
        inputMode="numeric"
        autoComplete="one-time-code"
        pattern="[0-9 ]{6,7}"
        maxLength={7}
        required
      />
      <p>
        <button type="submit">Turn on</button>
      </p>
    </form>
  );
}
