import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { selectPartner } from '../../core/ui-sessions.js';
import { declineInvitation } from '../../core/users.js';
import { statusFor } from '../../web/errors.js';
import { AppError } from '../../lib/errors.js';
import { csrfToken, field, form, personFor, query, type Ui } from '../context.js';
import { Csrf, Notice, Page, sendPage, When } from '../layout.js';

// The partner picker: a person of several partners picks the one to work in (and switches from
// the header), and sees the invitations waiting for them (declined here, accepted through their
// own link). Logged in, no partner needed.

/** Only a path inside the console, never the picker itself. */
function safeNext(next: string | undefined): string {
  return next && /^\/ui\/[A-Za-z0-9/_.?=&%-]*$/.test(next) && !next.startsWith('/ui/partners') ? next : '/ui/overview';
}

export const partnerRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  const page = (req: FastifyRequest, reply: FastifyReply, msg: { error?: string; ok?: string } = {}, status = 200) => {
    const person = personFor(req);
    const csrf = csrfToken(ui, req, reply);
    const next = query(req).next;
    const current = req.ui?.user?.partnerId;
    return sendPage(
      reply,
      <Page title="Partners" user={req.ui?.user ?? null} person={person} csrf={csrf}>
        {msg.error && <Notice kind="error">{msg.error}</Notice>}
        {msg.ok && <Notice kind="ok">{msg.ok}</Notice>}
        {person.partners.length ? (
          <>
            <p>Pick the partner to work in. You can switch at any time from the top of every page.</p>
            <ul className="partners">
              {person.partners.map((m) => (
                <li key={m.partner_id}>
                  <form method="post" action="/ui/partners" className="inline">
                    <Csrf token={csrf} />
                    <input type="hidden" name="partner" value={m.partner_id} />
                    {next && <input type="hidden" name="next" value={next} />}
                    <button type="submit" className={m.partner_id === current ? 'secondary' : undefined}>
                      {m.partner_name}
                    </button>
                  </form>{' '}
                  <span className="muted">
                    as {m.role}
                    {m.partner_id === current ? ' (open now)' : ''}
                  </span>
                </li>
              ))}
            </ul>
          </>
        ) : (
          <p>You have no partner to open yet: accept an invitation below.</p>
        )}
        <h2>Invitations</h2>
        {person.invitations.length ? (
          <table>
            <thead>
              <tr>
                <th scope="col">Partner</th>
                <th scope="col">Role</th>
                <th scope="col">Invited</th>
                <th scope="col">
                  <span className="muted">Answer</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {person.invitations.map((m) => (
                <tr key={m.partner_id}>
                  <td>{m.partner_name}</td>
                  <td>{m.role}</td>
                  <td>
                    <When ms={m.created_at} />
                  </td>
                  <td>
                    <span className="muted">Accept it through the link it came with. </span>
                    <form
                      method="post"
                      action={`/ui/invitations/${m.partner_id}/decline`}
                      className="inline"
                      data-confirm={`Decline the invitation of ${m.partner_name}?`}
                    >
                      <Csrf token={csrf} />
                      <button type="submit" className="secondary" aria-label={`Decline ${m.partner_name}`}>
                        Decline
                      </button>
                    </form>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <p className="muted">No invitations are waiting.</p>
        )}
      </Page>,
      status,
    );
  };

  app.get('/partners', async (req, reply) => {
    const q = query(req).done;
    return page(req, reply, q === 'declined' ? { ok: 'The invitation is declined.' } : {});
  });

  app.post('/partners', async (req, reply) => {
    const person = personFor(req);
    const f = form(req);
    try {
      await selectPartner(rt.ctx, person, field(f, 'partner'));
    } catch (e) {
      if (e instanceof AppError && statusFor(e.code) < 500)
        return page(req, reply, { error: 'You cannot open that partner.' }, statusFor(e.code));
      throw e;
    }
    return reply.redirect(safeNext(field(f, 'next') || undefined), 303);
  });

  // Accepting takes the invitation's own link (/ui/invite/…/accept): a password alone may be known
  // to another partner's admin, who was shown the link that set it.
  app.post<{ Params: { partner: string } }>('/invitations/:partner/accept', async (req, reply) => {
    personFor(req);
    return page(
      req,
      reply,
      { error: 'An invitation is accepted through the link it came with: open that link while logged in.' },
      403,
    );
  });

  app.post<{ Params: { partner: string } }>('/invitations/:partner/decline', async (req, reply) => {
    const person = personFor(req);
    try {
      await declineInvitation(rt.ctx, person.userId, req.params.partner);
    } catch (e) {
      if (e instanceof AppError && statusFor(e.code) < 500)
        return page(req, reply, { error: e.message }, statusFor(e.code));
      throw e;
    }
    return reply.redirect('/ui/partners?done=declined', 303);
  });
};
