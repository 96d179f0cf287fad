import type { FastifyError, FastifyPluginAsync } from 'fastify';
import { LoginThrottle } from '../core/login-throttle.js';
import { enrolmentRequired } from '../core/two-factor.js';
import { lookupSession } from '../core/ui-sessions.js';
import { AppError } from '../lib/errors.js';
import { errorHandler, isStorageError, sendError, statusFor } from '../web/errors.js';
import { CSS, JS } from './assets.js';
import { cookieNames, readCookie } from './cookies.js';
import { CSRF_FIELD, CSRF_HEADER, CsrfTokens, crossSite } from './csrf.js';
import { LoginRequired, PartnerRequired, csrfToken, form, type Ui, type UiDeps } from './context.js';
import { ENROL_PATH } from './login-steps.js';
import { Notice, Page, sendPage } from './layout.js';
import { notFoundPage, pageExpired, wantsJson } from './responses.js';
import { Flash } from './flash.js';
import { authRoutes } from './routes/auth.js';
import { twoFactorRoutes } from './routes/two-factor.js';
import { consoleRoutes } from './routes/index.js';

// The partner web console at /ui: server-rendered pages, sessions in SQLite, one CSRF hook.
// src/server.ts registers it into the HTTP app after the app's own hooks, so the shutdown 503,
// the request id and the request log apply here as on every other path.

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const FORM_LIMIT = 64 * 1024;
/** What a user who must set up two-factor authentication may still open. */
const WHILE_ENROLLING = /^\/ui\/(account\/2fa(\/[a-z]+)?|partners|logout|logout-everywhere|static\/[a-z.]+)$/;

export const uiPlugin: FastifyPluginAsync<{ rt: UiDeps }> = async (app, { rt }) => {
  const names = cookieNames(rt.config);
  const ui: Ui = {
    rt,
    names,
    csrf: new CsrfTokens(rt.ctx.masterKey),
    throttle: new LoginThrottle(rt.ctx),
    flash: new Flash(rt.ctx.masterKey, names, rt.ctx.now),
  };
  const https = names.secure;

  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: FORM_LIMIT },
    (_req, body, done) => {
      const out: Record<string, string | string[]> = Object.create(null);
      for (const [k, v] of new URLSearchParams(body as string)) {
        // PostgreSQL text cannot hold a NUL, and no field of the console's takes one.
        if (k.includes('\0') || v.includes('\0'))
          return done(
            new AppError('invalid_request', 'a form field has a NUL character (%00), which msgd does not take'),
            undefined,
          );
        const prev = out[k];
        out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
      }
      done(null, out);
    },
  );

  app.addHook('onRequest', async (req, reply) => {
    reply.header(
      'content-security-policy',
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on our own forms.
    reply.header('referrer-policy', 'same-origin');
    reply.header('x-content-type-options', 'nosniff');
    reply.header('x-frame-options', 'DENY');
    reply.header('cache-control', 'no-store');
    if (https) reply.header('strict-transport-security', 'max-age=31536000; includeSubDomains');
    const found = await lookupSession(rt.ctx, readCookie(req, names.session));
    req.ui = { session: found?.person ?? null, user: found?.user ?? null };
    // Refused before the body is read, whatever its type: a cross-site form may post text/plain.
    if (UNSAFE.has(req.method) && crossSite(req, rt.config)) return pageExpired(ui, req, reply, 'cross-site');
    // A partner that requires two-factor authentication: its users without it set it up first.
    const user = req.ui.user;
    if (
      user &&
      !WHILE_ENROLLING.test(req.url.split('?')[0]) &&
      (await enrolmentRequired(rt.ctx, user.userId, user.partnerId))
    )
      return reply.redirect(ENROL_PATH, 303);
  });

  app.addHook('preHandler', async (req, reply) => {
    if (!UNSAFE.has(req.method)) return;
    const session = req.ui?.session;
    const anon = readCookie(req, names.anon);
    const binding = session ? `ses:${session.sessionId}` : anon ? `anon:${anon}` : null;
    const header = req.headers[CSRF_HEADER];
    const presented = (typeof header === 'string' ? header : undefined) ?? form(req)[CSRF_FIELD];
    if (!ui.csrf.matches(binding, Array.isArray(presented) ? presented[0] : presented))
      return pageExpired(ui, req, reply, 'token');
  });

  app.setErrorHandler((err: FastifyError | AppError | Error, req, reply) => {
    if (err instanceof LoginRequired) {
      if (req.method !== 'GET') return reply.redirect('/ui/login', 303);
      const next = req.url.startsWith('/ui/') ? `?next=${encodeURIComponent(req.url)}` : '';
      return reply.redirect(`/ui/login${next}`, 303);
    }
    if (err instanceof PartnerRequired) {
      const next = req.method === 'GET' && req.url.startsWith('/ui/') ? `?next=${encodeURIComponent(req.url)}` : '';
      return reply.redirect(`/ui/partners${next}`, 303);
    }
    const storage = isStorageError(err);
    if (storage) rt.storage?.noteFailure(err);
    if (wantsJson(req)) return errorHandler(err, req, reply);
    // The storage refused or is unreachable: 503 with Retry-After, as the APIs answer, not a 500.
    if (storage) reply.header('retry-after', '30');
    const status = storage
      ? 503
      : err instanceof AppError
        ? statusFor(err.code)
        : ((err as FastifyError).statusCode ?? 500) >= 400
          ? ((err as FastifyError).statusCode ?? 500)
          : 500;
    if (status >= 500 && !storage) req.log.error({ err }, 'console error');
    const message = storage
      ? 'msgd cannot reach its storage right now; nothing of this was saved. Try again in a minute.'
      : status >= 500
        ? 'Something went wrong on our side. Try again; if it keeps happening, tell your operator.'
        : err.message;
    return sendPage(
      reply,
      <Page
        title={status === 404 ? 'Not found' : status === 403 ? 'Not allowed' : 'Something is wrong'}
        user={req.ui?.user ?? null}
        csrf={csrfToken(ui, req, reply)}
      >
        <Notice kind="error">{message}</Notice>
        <p>
          <a href="/ui">Back to the console</a>
        </p>
      </Page>,
      status,
    );
  });

  app.setNotFoundHandler((req, reply) => {
    if (wantsJson(req)) return sendError(reply, 'not_found', `no route ${req.method} ${req.url.split('?')[0]}`);
    return notFoundPage(ui, req, reply);
  });

  app.get('/static/console.css', async (_req, reply) =>
    reply.header('cache-control', 'public, max-age=3600').type('text/css; charset=utf-8').send(CSS),
  );
  app.get('/static/console.js', async (_req, reply) =>
    reply.header('cache-control', 'public, max-age=3600').type('text/javascript; charset=utf-8').send(JS),
  );
  app.get('/', async (req, reply) =>
    reply.redirect(req.ui?.user ? '/ui/overview' : req.ui?.session ? '/ui/partners' : '/ui/login', 303),
  );

  await app.register(authRoutes, { ui });
  await app.register(twoFactorRoutes, { ui });
  await app.register(consoleRoutes, { ui });
};
