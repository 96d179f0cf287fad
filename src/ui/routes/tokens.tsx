import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { SCOPES, issueToken, listTokens, renameToken, revokeToken, tokenJson } from '../../core/tokens.js';
import { AppError } from '../../lib/errors.js';
import { actorOf, field, fields, form, redirectWithNote, takeNote, type Ui } from '../context.js';
import type { FlashNote } from '../flash.js';
import { Csrf, Notice, ShownOnce, When } from '../layout.js';
import { StatusText, pageCtx, publicBase } from '../pages.js';
import { notFoundPage } from '../responses.js';

// API tokens: issue with a scope picker (the secret shown once, on the page the POST redirects
// to, and never again), list with last use, rename, revoke. The same core functions as msgctl token.

/** The expiry choices: a label and the lifetime in days (null = never). */
const EXPIRY: Record<string, [string, number | null]> = {
  never: ['never', null],
  '30d': ['in 30 days', 30],
  '90d': ['in 90 days', 90],
  '365d': ['in a year', 365],
};

const SCOPE_HELP: Record<string, string> = {
  'messages:send': 'send messages',
  'messages:read': 'read messages',
  'conversations:read': 'read conversations',
  'contacts:read': 'read contacts',
  'contacts:write': 'create and update contacts',
  'webhooks:manage': 'manage webhook endpoints',
  'channels:read': 'read channels',
  'templates:read': 'read WhatsApp templates',
  'suppressions:read': 'read the suppression list',
  'suppressions:write': 'add to and remove from the suppression list',
};

export const tokenRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  const page = async (
    req: FastifyRequest,
    reply: FastifyReply,
    msg: FlashNote = takeNote(ui, req, reply, '/ui/tokens'),
    status = 200,
  ) => {
    const p = pageCtx(ui, req, reply, 'tokens');
    const now = rt.ctx.now();
    const rows = await listTokens(rt.ctx, p.user.partnerId);
    const base = publicBase(ui, req);
    return p.render(
      'API tokens',
      <>
        {msg.error && <Notice kind="error">{msg.error}</Notice>}
        {msg.ok && <Notice kind="ok">{msg.ok}</Notice>}
        {msg.secret && (
          <ShownOnce
            id="new-secret"
            value={msg.secret.value}
            intro={
              <>
                <strong>Token “{msg.secret.label}” issued.</strong> Copy its secret now: it is not stored and will not
                be shown again.
              </>
            }
          >
            <p className="muted">Try it:</p>
            <pre className="body">{`curl -s ${base}/v1/channels -H "Authorization: Bearer ${msg.secret.value}"`}</pre>
          </ShownOnce>
        )}
        <h2>Issue a token</h2>
        <form method="post" action="/ui/tokens">
          <Csrf token={p.csrf} />
          <label htmlFor="t-name">Name</label>
          <input id="t-name" name="name" type="text" required maxLength={100} placeholder="production" />
          <fieldset className="scopes">
            <legend>Scopes</legend>
            {SCOPES.map((s) => (
              <label key={s}>
                <input type="checkbox" name="scopes" value={s} /> {s} <span className="muted">({SCOPE_HELP[s]})</span>
              </label>
            ))}
          </fieldset>
          <label htmlFor="t-expires">Expires</label>
          <select id="t-expires" name="expires" defaultValue="never">
            {Object.entries(EXPIRY).map(([value, [label]]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
          <p>
            <button type="submit">Issue token</button>
          </p>
        </form>
        <h2>Tokens</h2>
        {rows.length === 0 ? (
          <p>No tokens yet.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Prefix</th>
                <th scope="col">Scopes</th>
                <th scope="col">State</th>
                <th scope="col">Expires</th>
                <th scope="col">Last used</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span className="muted">Action</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((t) => {
                const state = tokenJson(t, now).state;
                return (
                  <tr key={t.id}>
                    <td>
                      <form method="post" action={`/ui/tokens/${t.id}/rename`} className="rename">
                        <Csrf token={p.csrf} />
                        <label htmlFor={`rn-${t.id}`} className="visually-hidden">
                          Name of the token {t.prefix}…
                        </label>
                        <input
                          id={`rn-${t.id}`}
                          name="name"
                          type="text"
                          required
                          maxLength={100}
                          defaultValue={t.name}
                        />{' '}
                        <button type="submit" className="secondary" aria-label={`Rename ${t.name}`}>
                          Rename
                        </button>
                      </form>
                    </td>
                    <td>
                      <code>{t.prefix}…</code>
                    </td>
                    <td>{t.scopes.split(' ').join(', ')}</td>
                    <td>
                      <StatusText status={state} />
                    </td>
                    <td>{t.expires_at === null ? 'never' : <When ms={t.expires_at} />}</td>
                    <td>
                      <When ms={t.last_used_at} />
                    </td>
                    <td>
                      <When ms={t.created_at} />
                    </td>
                    <td>
                      {state === 'active' && (
                        <form
                          method="post"
                          action={`/ui/tokens/${t.id}/revoke`}
                          data-confirm={`Revoke the token “${t.name}”? Requests with it fail at once.`}
                        >
                          <Csrf token={p.csrf} />
                          <button type="submit" className="danger" aria-label={`Revoke ${t.name}`}>
                            Revoke
                          </button>
                        </form>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </>,
      status,
    );
  };

  app.get('/tokens', async (req, reply) => page(req, reply));

  app.post('/tokens', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'tokens');
    const f = form(req);
    try {
      const expiry = EXPIRY[field(f, 'expires') || 'never'];
      if (!expiry) throw new AppError('invalid_request', 'choose when the token expires from the list');
      const issued = await issueToken(
        rt.ctx,
        {
          partner: p.user.partnerId,
          name: field(f, 'name').trim(),
          scopes: fields(f, 'scopes'),
          expiresAt: expiry[1] === null ? null : rt.ctx.now() + expiry[1] * 86_400_000,
        },
        actorOf(p.user),
      );
      return redirectWithNote(ui, req, reply, '/ui/tokens', {
        secret: { label: issued.token.name, value: issued.secret },
      });
    } catch (e) {
      if (e instanceof AppError && e.code === 'invalid_request') return page(req, reply, { error: e.message }, 400);
      throw e;
    }
  });

  app.post<{ Params: { id: string } }>('/tokens/:id/revoke', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'tokens');
    const own = (await listTokens(rt.ctx, p.user.partnerId)).find((t) => t.id === req.params.id);
    if (!own) return notFoundPage(ui, req, reply);
    try {
      await revokeToken(rt.ctx, own.id, actorOf(p.user));
    } catch (e) {
      if (e instanceof AppError && e.code === 'conflict') return page(req, reply, { error: e.message }, 409);
      throw e;
    }
    return redirectWithNote(ui, req, reply, '/ui/tokens', {
      ok: `Token “${own.name}” is revoked: requests with it are refused from now on.`,
    });
  });

  app.post<{ Params: { id: string } }>('/tokens/:id/rename', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'tokens');
    const own = (await listTokens(rt.ctx, p.user.partnerId)).find((t) => t.id === req.params.id);
    if (!own) return notFoundPage(ui, req, reply);
    const name = field(form(req), 'name').trim();
    try {
      await renameToken(rt.ctx, own.id, name, actorOf(p.user));
    } catch (e) {
      if (e instanceof AppError && e.code === 'invalid_request') return page(req, reply, { error: e.message }, 400);
      throw e;
    }
    return redirectWithNote(ui, req, reply, '/ui/tokens', { ok: `Token “${own.name}” is now named “${name}”.` });
  });
};
