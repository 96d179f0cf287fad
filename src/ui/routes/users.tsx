import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  ROLES,
  getMember,
  inviteUser,
  listMembers,
  memberState,
  removeUser,
  resetUser,
  setUserStatus,
  type IssuedLink,
} from '../../core/users.js';
import { readPartner } from '../../core/partners.js';
import { setTwoFactorRequired } from '../../core/two-factor.js';
import { statusFor } from '../../web/errors.js';
import { AppError } from '../../lib/errors.js';
import { actorOf, field, form, type Ui } from '../context.js';
import { Csrf, Notice, ShownOnce, When } from '../layout.js';
import { StatusText, pageCtx } from '../pages.js';

// Users (admins only): the partner's members. Invite with a role (a one-time link, shown once,
// the same answer whether or not the address is known to msgd), disable, enable, remove, and a
// new link. The same core functions as msgctl user.

export const userRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  const linkBase = (req: FastifyRequest) =>
    rt.config.server.publicUrl?.replace(/\/+$/, '') ?? `${req.protocol}://${req.headers.host ?? 'localhost'}`;

  const page = async (
    req: FastifyRequest,
    reply: FastifyReply,
    msg: { error?: string; ok?: string; link?: IssuedLink } = {},
    status = 200,
  ) => {
    const p = pageCtx(ui, req, reply, 'users');
    const rows = await listMembers(rt.ctx, p.user.partnerId);
    const required = (await readPartner(rt.ctx.store, p.user.partnerId)).require_2fa === 1;
    return p.render(
      'Users',
      <>
        {msg.error && <Notice kind="error">{msg.error}</Notice>}
        {msg.ok && <Notice kind="ok">{msg.ok}</Notice>}
        {msg.link && (
          <ShownOnce
            id="new-link"
            value={`${linkBase(req)}/ui/invite/${msg.link.secret}`}
            intro={
              <>
                Send this link to <strong>{msg.link.member.email}</strong> ({msg.link.member.role}). It works once,
                until <When ms={msg.link.expiresAt} />, and is not shown again.
              </>
            }
          />
        )}
        <table>
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">State</th>
              <th scope="col">Two-factor</th>
              <th scope="col">Last login</th>
              <th scope="col">
                <span className="muted">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((u) => {
              const state = memberState(u);
              const on = u.status !== 'disabled';
              return (
                <tr key={u.user_id}>
                  <td>{u.email}</td>
                  <td>{u.role}</td>
                  <td>
                    <StatusText status={state} />
                  </td>
                  <td>{u.status === 'pending' ? '' : u.two_factor ? 'on' : 'off'}</td>
                  {/* Until the invitation is accepted, nothing of the person shows: they may use msgd elsewhere. */}
                  <td>
                    <When ms={u.status === 'pending' ? null : u.last_login_at} />
                  </td>
                  <td>
                    {u.user_id !== p.user.userId && (
                      <>
                        {on && (
                          <form method="post" action={`/ui/users/${u.user_id}/reset`} className="inline">
                            <Csrf token={p.csrf} />
                            <button type="submit" className="secondary" aria-label={`New link for ${u.email}`}>
                              New link
                            </button>
                          </form>
                        )}{' '}
                        <form
                          method="post"
                          action={`/ui/users/${u.user_id}/${on ? 'disable' : 'enable'}`}
                          className="inline"
                          data-confirm={on ? `Disable ${u.email}? Their sessions end at once.` : undefined}
                        >
                          <Csrf token={p.csrf} />
                          <button
                            type="submit"
                            className={on ? 'danger' : 'secondary'}
                            aria-label={`${on ? 'Disable' : 'Enable'} ${u.email}`}
                          >
                            {on ? 'Disable' : 'Enable'}
                          </button>
                        </form>{' '}
                        <form
                          method="post"
                          action={`/ui/users/${u.user_id}/remove`}
                          className="inline"
                          data-confirm={`Remove ${u.email} from ${p.user.partnerName}? Their sessions here end at once.`}
                        >
                          <Csrf token={p.csrf} />
                          <button type="submit" className="danger" aria-label={`Remove ${u.email}`}>
                            Remove
                          </button>
                        </form>
                      </>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
        <h2>Two-factor authentication</h2>
        <form method="post" action="/ui/users/2fa-requirement">
          <Csrf token={p.csrf} />
          <p>
            {required
              ? 'Required: users without it set it up right after they log in, and can do nothing else until they have.'
              : 'Not required: each user decides on Your account.'}
          </p>
          <input type="hidden" name="required" value={required ? 'no' : 'yes'} />
          <button type="submit" className="secondary">
            {required ? 'Stop requiring two-factor authentication' : 'Require two-factor authentication for every user'}
          </button>
        </form>
        <h2>Invite a user</h2>
        <form method="post" action="/ui/users">
          <Csrf token={p.csrf} />
          <label htmlFor="u-email">Email</label>
          <input id="u-email" name="email" type="email" required />
          <label htmlFor="u-role">Role</label>
          <select id="u-role" name="role" defaultValue="developer">
            {ROLES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
          <p className="muted">
            admin: everything, users included; developer: tokens, webhooks, messages, conversations, channels; billing:
            balance and ledger.
          </p>
          <p>
            <button type="submit">Invite</button>
          </p>
        </form>
      </>,
      status,
    );
  };

  const attempt = async (
    req: FastifyRequest,
    reply: FastifyReply,
    act: () => Promise<Parameters<typeof page>[2]>,
    status = 200,
  ) => {
    let msg: Parameters<typeof page>[2];
    try {
      msg = await act();
    } catch (e) {
      if (e instanceof AppError && statusFor(e.code) < 500)
        return page(req, reply, { error: e.message }, statusFor(e.code));
      throw e;
    }
    return page(req, reply, msg, status);
  };

  app.get('/users', async (req, reply) => page(req, reply));

  app.post('/users', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'users');
    const f = form(req);
    return attempt(
      req,
      reply,
      async () => ({
        link: await inviteUser(
          rt.ctx,
          { partner: p.user.partnerId, email: field(f, 'email'), role: field(f, 'role') },
          actorOf(p.user),
        ),
      }),
      201,
    );
  });

  app.post('/users/2fa-requirement', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'users');
    const required = field(form(req), 'required') === 'yes';
    await setTwoFactorRequired(rt.ctx, p.user.partnerId, required, actorOf(p.user));
    return page(req, reply, {
      ok: required
        ? 'Two-factor authentication is required: users without it set it up at their next page.'
        : 'Two-factor authentication is no longer required.',
    });
  });

  for (const action of ['disable', 'enable', 'reset', 'remove'] as const) {
    app.post<{ Params: { id: string } }>(`/users/:id/${action}`, async (req, reply) => {
      const p = pageCtx(ui, req, reply, 'users');
      return attempt(req, reply, async () => {
        // The target is resolved once (id or email, any case); the checks and the change use it.
        const target = await getMember(rt.ctx, p.user.partnerId, req.params.id);
        if (target.user_id === p.user.userId)
          throw new AppError('conflict', 'You cannot change your own account here.');
        const actor = actorOf(p.user);
        if (action === 'reset')
          return { link: await resetUser(rt.ctx, p.user.partnerId, target.user_id, actor, 'console') };
        if (action === 'remove') {
          await removeUser(rt.ctx, p.user.partnerId, target.user_id, actor);
          return { ok: `${target.email} is removed from ${p.user.partnerName}: their sessions here have ended.` };
        }
        const u = await setUserStatus(
          rt.ctx,
          p.user.partnerId,
          target.user_id,
          action === 'disable' ? 'disabled' : 'active',
          actor,
        );
        return {
          ok: `${u.email} is ${u.status === 'disabled' ? 'disabled: their sessions have ended' : 'enabled again'}.`,
        };
      });
    });
  }
};
