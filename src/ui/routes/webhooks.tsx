import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  rotateSecret,
  type EndpointRow,
} from '../../core/endpoints.js';
import { EVENT_TYPES, type EventType } from '../../core/events.js';
import { statusFor } from '../../http/errors.js';
import { AppError } from '../../lib/errors.js';
import { replayEvent, sendTestEvent } from '../../webhooks/replay.js';
import { checkEndpointUrl } from '../../webhooks/ssrf.js';
import { getDelivery, listAttempts, listDeliveries } from '../../webhooks/store.js';
import { field, fields, form, query, redirectWithNote, takeNote, type Ui } from '../context.js';
import type { FlashNote } from '../flash.js';
import { Csrf, Notice, ShownOnce, When } from '../layout.js';
import { StatusText, pageCtx } from '../pages.js';
import { notFoundPage } from '../responses.js';

// Webhook endpoints: register (HTTPS only, the same URL guard as /v1), the signing secret shown
// once, rotate, send a test event, the deliveries with status codes and times, replay one.

const EVENT_ID = /^evt_[0-9a-z]{26}$/;
const SUBSCRIBABLE = EVENT_TYPES.filter((t) => t !== 'webhook.test');

/** A refusal the partner can act on (bad URL, conflict): shown on the page, not as an error page. */
const shown = (e: unknown): e is AppError => e instanceof AppError && statusFor(e.code) < 500;

export const webhookRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;
  const cfg = rt.config.webhooksOut;

  const listPage = (
    req: FastifyRequest,
    reply: FastifyReply,
    msg: { error?: string; url?: string } = {},
    status = 200,
  ) => {
    const p = pageCtx(ui, req, reply, 'webhooks');
    const rows = listEndpoints(rt.ctx, p.user.partnerId, { limit: 50 });
    return p.render(
      'Webhook endpoints',
      <>
        {msg.error && <Notice kind="error">{msg.error}</Notice>}
        {rows.length === 0 ? (
          <p>No endpoints yet. Register one to be told when messages are delivered, fail or arrive.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col">URL</th>
                <th scope="col">Events</th>
                <th scope="col">State</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((e) => (
                <tr key={e.id}>
                  <td>
                    <a href={`/ui/webhooks/${e.id}`}>{e.url}</a>
                    {e.description && <div className="muted">{e.description}</div>}
                  </td>
                  <td>{e.events === null ? 'all' : (JSON.parse(e.events) as string[]).join(', ')}</td>
                  <td>
                    <StatusText status={e.status} />
                    {e.failing_since !== null && (
                      <div className="muted">
                        failing since <When ms={e.failing_since} />
                      </div>
                    )}
                  </td>
                  <td>
                    <When ms={e.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <h2>Register an endpoint</h2>
        <form method="post" action="/ui/webhooks">
          <Csrf token={p.csrf} />
          <label htmlFor="w-url">HTTPS URL</label>
          <input
            id="w-url"
            name="url"
            type="url"
            required
            placeholder="https://example.com/msgd-events"
            defaultValue={msg.url}
          />
          <label htmlFor="w-desc">Description (optional)</label>
          <input id="w-desc" name="description" type="text" maxLength={200} />
          <fieldset className="scopes">
            <legend>Events (none ticked: every event)</legend>
            {SUBSCRIBABLE.map((t) => (
              <label key={t}>
                <input type="checkbox" name="events" value={t} /> {t}
              </label>
            ))}
          </fieldset>
          <p>
            <button type="submit">Register</button>
          </p>
        </form>
      </>,
      status,
    );
  };

  const endpointPage = (
    req: FastifyRequest,
    reply: FastifyReply,
    e: EndpointRow,
    msg: FlashNote = {},
    status = 200,
  ) => {
    const p = pageCtx(ui, req, reply, 'webhooks');
    const deliveries = listDeliveries(rt.ctx, { endpointId: e.id, limit: 50 });
    const now = rt.ctx.now();
    return p.render(
      'Webhook endpoint',
      <>
        {msg.error && <Notice kind="error">{msg.error}</Notice>}
        {msg.ok && <Notice kind="ok">{msg.ok}</Notice>}
        {msg.secret && (
          <ShownOnce
            id="new-secret"
            value={msg.secret.value}
            intro={
              <>
                <strong>Signing secret.</strong> Copy it now: it is not shown again. Verify every request’s
                X-Msgd-Signature (HMAC-SHA256 of the raw body) with it.
              </>
            }
          />
        )}
        <dl className="kv">
          <dt>URL</dt>
          <dd>{e.url}</dd>
          <dt>Description</dt>
          <dd>{e.description ?? '—'}</dd>
          <dt>Events</dt>
          <dd>{e.events === null ? 'all' : (JSON.parse(e.events) as string[]).join(', ')}</dd>
          <dt>State</dt>
          <dd>
            <StatusText status={e.status} />
            {e.disabled_reason && ` (${e.disabled_reason})`}
          </dd>
          {e.previous_secret_expires_at !== null && e.previous_secret_expires_at > now && (
            <>
              <dt>Rotation</dt>
              <dd>
                the previous secret also signs until <When ms={e.previous_secret_expires_at} />
              </dd>
            </>
          )}
        </dl>
        <p>
          <form method="post" action={`/ui/webhooks/${e.id}/test`} className="inline">
            <Csrf token={p.csrf} />
            <button type="submit">Send a test event</button>
          </form>{' '}
          <form
            method="post"
            action={`/ui/webhooks/${e.id}/rotate`}
            className="inline"
            data-confirm={`Issue a new secret? The current one keeps signing for ${cfg.rotationGraceHours} h.`}
          >
            <Csrf token={p.csrf} />
            <button type="submit" className="secondary">
              Rotate secret
            </button>
          </form>{' '}
          <form
            method="post"
            action={`/ui/webhooks/${e.id}/delete`}
            className="inline"
            data-confirm={`Delete the endpoint ${e.url}?`}
          >
            <Csrf token={p.csrf} />
            <button type="submit" className="danger">
              Delete
            </button>
          </form>
        </p>
        <h2>Deliveries</h2>
        {deliveries.length === 0 ? (
          <p>No deliveries yet.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col">Created</th>
                <th scope="col">Event</th>
                <th scope="col">State</th>
                <th scope="col" className="num">
                  Attempts
                </th>
                <th scope="col" className="num">
                  Last HTTP status
                </th>
                <th scope="col" className="num">
                  Response time
                </th>
                <th scope="col">Last error</th>
                <th scope="col">
                  <span className="muted">Action</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {deliveries.map((d) => {
                const last = listAttempts(rt.ctx, d.id).at(-1);
                return (
                  <tr key={d.id}>
                    <td>
                      <When ms={d.created_at} />
                    </td>
                    <td>
                      {d.event_type} <span className="muted">{d.event_id}</span>
                    </td>
                    <td>
                      <StatusText status={d.status} />
                    </td>
                    <td className="num">{d.attempts}</td>
                    <td className="num">{d.last_status_code ?? '—'}</td>
                    <td className="num">{last ? `${last.duration_ms} ms` : '—'}</td>
                    <td>{d.last_error ?? '—'}</td>
                    <td>
                      {d.status !== 'pending' && (
                        <form method="post" action={`/ui/webhooks/${e.id}/deliveries/${d.id}/replay`}>
                          <Csrf token={p.csrf} />
                          <button type="submit" className="secondary" aria-label={`Replay ${d.event_id}`}>
                            Replay
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
        <p>
          <a href="/ui/webhooks">All endpoints</a>
        </p>
      </>,
      status,
    );
  };

  app.get('/webhooks', async (req, reply) => listPage(req, reply));

  app.post('/webhooks', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'webhooks');
    const f = form(req);
    const raw = field(f, 'url').trim();
    try {
      const events = fields(f, 'events');
      const bad = events.filter((t) => !(SUBSCRIBABLE as readonly string[]).includes(t));
      if (bad.length) throw new AppError('invalid_request', `unknown event type ${bad.join(', ')}`);
      const url = await checkEndpointUrl(raw, cfg.allowPrivateTargets);
      const description = field(f, 'description').trim().slice(0, 200) || null;
      const { endpoint, secret } = createEndpoint(rt.ctx, p.user.partnerId, {
        url: url.href,
        events: events as EventType[],
        description,
      });
      return redirectWithNote(ui, req, reply, `/ui/webhooks/${endpoint.id}`, {
        ok: 'Endpoint registered.',
        secret: { label: 'signing secret', value: secret },
      });
    } catch (e) {
      if (shown(e)) return listPage(req, reply, { error: e.message, url: raw }, statusFor(e.code));
      throw e;
    }
  });

  const own = (req: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const p = pageCtx(ui, req, reply, 'webhooks');
    return getEndpoint(rt.ctx, p.user.partnerId, req.params.id);
  };

  app.get<{ Params: { id: string } }>('/webhooks/:id', async (req, reply) => {
    const e = own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    const q = query(req);
    const note = takeNote(ui, req, `/ui/webhooks/${e.id}`);
    const ok = EVENT_ID.test(q.sent ?? '')
      ? `Test event ${q.sent} is on its way.`
      : EVENT_ID.test(q.replayed ?? '')
        ? `Event ${q.replayed} is being delivered again.`
        : note.ok;
    return endpointPage(req, reply, e, { ...note, ok });
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/rotate', async (req, reply) => {
    const e = own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    const { secret } = rotateSecret(rt.ctx, e.partner_id, e.id, cfg.rotationGraceHours * 3_600_000);
    return redirectWithNote(ui, req, reply, `/ui/webhooks/${e.id}`, {
      ok: 'A new secret signs from now on.',
      secret: { label: 'signing secret', value: secret },
    });
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/test', async (req, reply) => {
    const e = own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    if (e.status !== 'enabled')
      return endpointPage(
        req,
        reply,
        e,
        { error: 'This endpoint is disabled; the operator can enable it again.' },
        409,
      );
    const { eventId } = sendTestEvent(rt.ctx, rt.queue, e);
    return reply.redirect(`/ui/webhooks/${e.id}?sent=${eventId}`, 303);
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/delete', async (req, reply) => {
    const e = own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    deleteEndpoint(rt.ctx, e.partner_id, e.id);
    return reply.redirect('/ui/webhooks', 303);
  });

  app.post<{ Params: { id: string; dlv: string } }>('/webhooks/:id/deliveries/:dlv/replay', async (req, reply) => {
    const e = own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    const d = getDelivery(rt.ctx, req.params.dlv);
    if (!d || d.endpoint_id !== e.id) return notFoundPage(ui, req, reply);
    try {
      replayEvent(rt.ctx, rt.queue, d.event_id, { endpointId: e.id });
    } catch (err) {
      if (shown(err)) return endpointPage(req, reply, e, { error: err.message }, statusFor(err.code));
      throw err;
    }
    return reply.redirect(`/ui/webhooks/${e.id}?replayed=${d.event_id}`, 303);
  });
};
