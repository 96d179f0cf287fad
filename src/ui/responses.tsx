import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from '../web/errors.js';
import { loggedPath } from '../web/logger.js';
import { csrfToken, type Ui } from './context.js';
import { Notice, Page, sendPage } from './layout.js';

// Answers several console routes share: not found, and the 419 "page expired".

/** The client asked for JSON (a script) rather than a page. */
export function wantsJson(req: FastifyRequest): boolean {
  const accept = req.headers.accept ?? '';
  return accept.includes('application/json') && !accept.includes('text/html');
}

export function notFoundPage(ui: Ui, req: FastifyRequest, reply: FastifyReply) {
  return sendPage(
    reply,
    <Page title="Not found" user={req.ui?.user ?? null} csrf={csrfToken(ui, req, reply)}>
      <p>There is nothing here. It may have been removed, or the link is mistyped.</p>
      <p>
        <a href="/ui">Back to the console</a>
      </p>
    </Page>,
    404,
  );
}

/** 419: the page's CSRF token is missing, wrong or from an old session, or the request came from another site. */
export function pageExpired(ui: Ui, req: FastifyRequest, reply: FastifyReply, why: 'token' | 'cross-site') {
  req.log.info(
    { path: loggedPath(req.url), why, site: req.headers['sec-fetch-site'], origin: req.headers.origin },
    'console request refused: CSRF',
  );
  const message =
    why === 'cross-site'
      ? 'this request came from another site and was refused'
      : 'the page has expired (its security token is missing or no longer valid); reload it and try again';
  if (wantsJson(req)) return sendError(reply, 'csrf_token_mismatch', message, [], 419);
  return sendPage(
    reply,
    <Page title="Page expired" user={req.ui?.user ?? null} csrf={csrfToken(ui, req, reply)}>
      <Notice kind="error">
        {why === 'cross-site'
          ? 'This request came from another site, so it was refused. Nothing was changed.'
          : 'This page has expired, so nothing was changed. Reload the page and try again.'}
      </Notice>
      <p>
        <a href={safeBack(req)}>Reload the page</a>
      </p>
    </Page>,
    419,
  );
}

/** Where "reload" goes: the page the form was on when it is ours, else the console's start. */
function safeBack(req: FastifyRequest): string {
  const path = req.url.split('?')[0];
  if (path === '/ui/login' || path === '/ui/logout') return '/ui/login';
  if (/^\/ui\/invite\/[A-Za-z0-9_-]+$/.test(path)) return path;
  return '/ui';
}
