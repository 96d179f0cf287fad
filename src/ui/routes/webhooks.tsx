import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  rotateSecret,
  updateEndpoint,
  type EndpointRow,
} from '../../core/endpoints.js';
import { EVENT_TYPES, type EventType } from '../../core/events.js';
import { statusFor } from '../../web/errors.js';
import { AppError } from '../../lib/errors.js';
import { replayEvent, sendTestEvent } from '../../webhooks-out/replay.js';
import { checkEndpointUrl } from '../../webhooks-out/ssrf.js';
import { BASE_HEADERS } from '../../webhooks-out/client.js';
import { shownSignatureHeaders } from '../../webhooks-out/signing.js';
import {
  DELIVERY_OUTCOMES,
  deliveryEvent,
  getDelivery,
  lastAttempts,
  listAttempts,
  listEndpointDeliveries,
  type DeliveryOutcome,
} from '../../webhooks-out/store.js';
import { field, fields, form, query, redirectWithNote, takeNote, type Ui } from '../context.js';
import { idTime } from '../../lib/id-time.js';
import type { FlashNote } from '../flash.js';
import { Csrf, Notice, ShownOnce, When } from '../layout.js';
import { StatusText, pageCtx } from '../pages.js';
import { notFoundPage } from '../responses.js';

// Webhook endpoints: register (HTTPS only, the same URL guard as /v1), the signing secret shown
// once, edit (URL, events, description; the secret stays), rotate, send a test event, the
// deliveries with status codes and times (filtered by outcome, paged), one delivery's request
// and the receiver's answers, replay one.

const EVENT_ID = /^evt_[0-9a-z]{26}$/;
const ENDPOINT_ID = /^whe_[0-9a-z]{26}$/;
const DELIVERY_ID = /^dlv_[0-9a-z]{26}$/;
const PAGE = 50;

const OUTCOME_LABEL: Record<DeliveryOutcome, string> = {
  succeeded: 'succeeded',
  retrying: 'failing, still retried',
  failed: 'given up (failed or dead)',
  pending: 'pending',
  cancelled: 'cancelled',
};

/** The URL, events and description a register or edit form posted, checked as /v1 checks them. */
async function endpointInput(f: ReturnType<typeof form>, allowPrivate: boolean) {
  const events = fields(f, 'events');
  const bad = events.filter((t) => !(SUBSCRIBABLE as readonly string[]).includes(t));
  if (bad.length) throw new AppError('invalid_request', `unknown event type ${bad.join(', ')}`);
  const url = await checkEndpointUrl(field(f, 'url').trim(), allowPrivate);
  const description = field(f, 'description').trim().slice(0, 200) || null;
  return { url: url.href, events: events as EventType[], description };
}

/** The register and edit forms' fields. */
function EndpointFields({ e, url }: { e?: EndpointRow; url?: string }) {
  const chosen = e?.events ? (JSON.parse(e.events) as string[]) : [];
  const prefix = e ? 'e' : 'w';
  return (
    <>
      <label htmlFor={`${prefix}-url`}>HTTPS URL</label>
      <input
        id={`${prefix}-url`}
        name="url"
        type="url"
        required
        placeholder="https://example.com/msgd-events"
        defaultValue={url ?? e?.url}
      />
      <label htmlFor={`${prefix}-desc`}>Description (optional)</label>
      <input
        id={`${prefix}-desc`}
        name="description"
        type="text"
        maxLength={200}
        defaultValue={e?.description ?? undefined}
      />
      <fieldset className="scopes">
        <legend>Events (none ticked: every event)</legend>
        {SUBSCRIBABLE.map((t) => (
          <label key={t}>
            <input type="checkbox" name="events" value={t} defaultChecked={chosen.includes(t)} /> {t}
          </label>
        ))}
      </fieldset>
    </>
  );
}
const SUBSCRIBABLE = EVENT_TYPES.filter((t) => t !== 'webhook.test');

/** A refusal the partner can act on (bad URL, conflict): shown on the page, not as an error page. */
const shown = (e: unknown): e is AppError => e instanceof AppError && statusFor(e.code) < 500;

export const webhookRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;
  const cfg = rt.config.webhooksOut;

  const listPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    msg: { error?: string; ok?: string; url?: string } = {},
    status = 200,
  ) => {
    const p = pageCtx(ui, req, reply, 'webhooks');
    const q = query(req);
    const before = q.before && ENDPOINT_ID.test(q.before) ? q.before : null;
    const page = await listEndpoints(rt.ctx, p.user.partnerId, { limit: PAGE + 1, before });
    const rows = page.slice(0, PAGE);
    const more = page.length > PAGE;
    return p.render(
      'Webhook endpoints',
      <>
        {msg.error && <Notice kind="error">{msg.error}</Notice>}
        {msg.ok && <Notice kind="ok">{msg.ok}</Notice>}
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
        {(more || before) && (
          <p className="pager">
            {before && <a href="/ui/webhooks">« First page</a>}{' '}
            {more && <a href={`/ui/webhooks?before=${rows[rows.length - 1].id}`}>Next page →</a>}
          </p>
        )}
        <h2>Register an endpoint</h2>
        <form method="post" action="/ui/webhooks">
          <Csrf token={p.csrf} />
          <EndpointFields url={msg.url} />
          <p>
            <button type="submit">Register</button>
          </p>
        </form>
      </>,
      status,
    );
  };

  const endpointPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    e: EndpointRow,
    msg: FlashNote = {},
    status = 200,
  ) => {
    const p = pageCtx(ui, req, reply, 'webhooks');
    const q = query(req);
    const outcome = (DELIVERY_OUTCOMES as readonly string[]).includes(q.outcome ?? '')
      ? (q.outcome as DeliveryOutcome)
      : undefined;
    const before = q.before && DELIVERY_ID.test(q.before) ? q.before : null;
    const page = await listEndpointDeliveries(rt.ctx, e.id, { outcome, before, limit: PAGE });
    const deliveries = page.rows;
    const lastAttempt = await lastAttempts(
      rt.ctx,
      deliveries.map((d) => d.id),
    );
    const listHref = (b: string | null) => {
      const u = new URLSearchParams();
      if (outcome) u.set('outcome', outcome);
      if (b) u.set('before', b);
      const qs = u.toString();
      return `/ui/webhooks/${e.id}${qs ? `?${qs}` : ''}#deliveries`;
    };
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
        <details className="edit">
          <summary>Edit the URL, events or description</summary>
          <form method="post" action={`/ui/webhooks/${e.id}/edit`}>
            <Csrf token={p.csrf} />
            <EndpointFields e={e} />
            <p>
              <button type="submit">Save</button> <span className="muted">The signing secret stays the same.</span>
            </p>
          </form>
        </details>
        <details className="verify">
          <summary>How to verify the signature</summary>
          <VerifyHelp />
        </details>
        <h2 id="deliveries">Deliveries</h2>
        <form method="get" action={`/ui/webhooks/${e.id}`} className="filters" role="search">
          <div>
            <label htmlFor="d-outcome">Outcome</label>
            <select id="d-outcome" name="outcome" defaultValue={outcome ?? ''}>
              <option value="">any</option>
              {DELIVERY_OUTCOMES.map((o) => (
                <option key={o} value={o}>
                  {OUTCOME_LABEL[o]}
                </option>
              ))}
            </select>
          </div>
          <div>
            <button type="submit">Filter</button>
          </div>
        </form>
        {page.bounded && page.next && (
          <p className="muted">
            Searched deliveries back to <When ms={idTime(page.next)} />
            {deliveries.length === 0 ? '; nothing matches yet' : `; ${deliveries.length} match so far`}.{' '}
            <a href={listHref(page.next)}>Look further back →</a>
          </p>
        )}
        {deliveries.length === 0 ? (
          page.bounded ? null : (
            <p>{outcome ? 'No deliveries match.' : 'No deliveries yet.'}</p>
          )
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
                const last = lastAttempt.get(d.id);
                return (
                  <tr key={d.id}>
                    <td>
                      <When ms={d.created_at} />
                    </td>
                    <td>
                      <a href={`/ui/webhooks/${e.id}/deliveries/${d.id}`}>{d.event_type ?? 'event'}</a>{' '}
                      <span className="muted">{d.event_id}</span>
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
        {(before || page.next) && (
          <p className="pager">
            {before && <a href={listHref(null)}>« Newest deliveries</a>}{' '}
            {page.next && <a href={listHref(page.next)}>Older deliveries →</a>}
          </p>
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
    try {
      const input = await endpointInput(f, cfg.allowPrivateTargets);
      const { endpoint, secret } = await createEndpoint(rt.ctx, p.user.partnerId, input);
      return redirectWithNote(ui, req, reply, `/ui/webhooks/${endpoint.id}`, {
        ok: 'Endpoint registered.',
        secret: { label: 'signing secret', value: secret },
      });
    } catch (e) {
      if (shown(e)) return listPage(req, reply, { error: e.message, url: field(f, 'url').trim() }, statusFor(e.code));
      throw e;
    }
  });

  const own = (req: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const p = pageCtx(ui, req, reply, 'webhooks');
    return getEndpoint(rt.ctx, p.user.partnerId, req.params.id);
  };

  app.get<{ Params: { id: string } }>('/webhooks/:id', async (req, reply) => {
    const e = await own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    const q = query(req);
    const note = takeNote(ui, req, reply, `/ui/webhooks/${e.id}`);
    const ok = EVENT_ID.test(q.sent ?? '')
      ? `Test event ${q.sent} is on its way.`
      : EVENT_ID.test(q.replayed ?? '')
        ? `Event ${q.replayed} is being delivered again.`
        : note.ok;
    return endpointPage(req, reply, e, { ...note, ok });
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/edit', async (req, reply) => {
    const e = await own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    try {
      const input = await endpointInput(form(req), cfg.allowPrivateTargets);
      await updateEndpoint(rt.ctx, e.partner_id, e.id, input);
    } catch (err) {
      if (shown(err)) return endpointPage(req, reply, e, { error: err.message }, statusFor(err.code));
      throw err;
    }
    return redirectWithNote(ui, req, reply, `/ui/webhooks/${e.id}`, {
      ok: 'Endpoint saved; its signing secret is unchanged.',
    });
  });

  app.get<{ Params: { id: string; dlv: string } }>('/webhooks/:id/deliveries/:dlv', async (req, reply) => {
    const e = await own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    const d = await getDelivery(rt.ctx, req.params.dlv);
    if (!d || d.endpoint_id !== e.id) return notFoundPage(ui, req, reply);
    const p = pageCtx(ui, req, reply, 'webhooks');
    const attempts = await listAttempts(rt.ctx, d.id);
    const event = await deliveryEvent(rt.ctx, d.event_id);
    const last = attempts.at(-1);
    // The last attempt's request as sent: its time is when the attempt started.
    const sentAt = last ? last.created_at - last.duration_ms : d.created_at;
    const rotating = e.previous_secret_expires_at !== null && e.previous_secret_expires_at > sentAt;
    const headers = {
      ...BASE_HEADERS,
      ...shownSignatureHeaders(d.event_id, Math.floor(sentAt / 1000), rotating),
    };
    return p.render(
      'Webhook delivery',
      <>
        <dl className="kv">
          <dt>Event</dt>
          <dd>
            {event?.type ?? '—'} <span className="muted">{d.event_id}</span>
          </dd>
          <dt>Endpoint</dt>
          <dd>
            <a href={`/ui/webhooks/${e.id}`}>{e.url}</a>
          </dd>
          <dt>State</dt>
          <dd>
            <StatusText status={d.status} />
            {d.next_attempt_at !== null && (
              <>
                {' '}
                (next attempt <When ms={d.next_attempt_at} />)
              </>
            )}
          </dd>
          <dt>Attempts</dt>
          <dd>{d.attempts}</dd>
          <dt>Created</dt>
          <dd>
            <When ms={d.created_at} />
          </dd>
        </dl>
        <h2>Request{last ? ` (attempt ${last.attempt_no})` : ''}</h2>
        <p className="muted">
          Signatures are not shown: they change with each attempt and are derived from your secret.
        </p>
        <pre className="body" id="request">
          {`POST ${e.url}\n${Object.entries(headers)
            .map(([k, v]) => `${k}: ${v}`)
            .join('\n')}\n\n${event?.payload ?? '(the event is no longer kept)'}`}
        </pre>
        <h2>Responses</h2>
        {attempts.length === 0 ? (
          <p>No attempt yet.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col" className="num">
                  Attempt
                </th>
                <th scope="col">When</th>
                <th scope="col" className="num">
                  HTTP status
                </th>
                <th scope="col" className="num">
                  Time
                </th>
                <th scope="col">Error</th>
                <th scope="col">Response body (first 1 KB)</th>
              </tr>
            </thead>
            <tbody>
              {attempts.map((a) => (
                <tr key={a.id}>
                  <td className="num">{a.attempt_no}</td>
                  <td>
                    <When ms={a.created_at} />
                  </td>
                  <td className="num">{a.status_code ?? '—'}</td>
                  <td className="num">{a.duration_ms} ms</td>
                  <td>{a.error ?? '—'}</td>
                  <td>{a.response_snippet ? <pre className="snippet">{a.response_snippet}</pre> : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {d.status !== 'pending' && (
          <form method="post" action={`/ui/webhooks/${e.id}/deliveries/${d.id}/replay`}>
            <Csrf token={p.csrf} />
            <button type="submit" className="secondary">
              Replay this event
            </button>
          </form>
        )}
        <p>
          <a href={`/ui/webhooks/${e.id}#deliveries`}>All deliveries of this endpoint</a>
        </p>
      </>,
    );
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/rotate', async (req, reply) => {
    const e = await own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    const { secret } = await rotateSecret(rt.ctx, e.partner_id, e.id, cfg.rotationGraceHours * 3_600_000);
    return redirectWithNote(ui, req, reply, `/ui/webhooks/${e.id}`, {
      ok: 'A new secret signs from now on.',
      secret: { label: 'signing secret', value: secret },
    });
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/test', async (req, reply) => {
    const e = await own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    if (e.status !== 'enabled')
      return endpointPage(
        req,
        reply,
        e,
        { error: 'This endpoint is disabled; the operator can enable it again.' },
        409,
      );
    const { eventId } = await sendTestEvent(rt.ctx, rt.queue, e);
    return reply.redirect(`/ui/webhooks/${e.id}?sent=${eventId}`, 303);
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/delete', async (req, reply) => {
    const e = await own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    await deleteEndpoint(rt.ctx, e.partner_id, e.id);
    return reply.redirect('/ui/webhooks', 303);
  });

  app.post<{ Params: { id: string; dlv: string } }>('/webhooks/:id/deliveries/:dlv/replay', async (req, reply) => {
    const e = await own(req, reply);
    if (!e) return notFoundPage(ui, req, reply);
    const d = await getDelivery(rt.ctx, req.params.dlv);
    if (!d || d.endpoint_id !== e.id) return notFoundPage(ui, req, reply);
    try {
      await replayEvent(rt.ctx, rt.queue, d.event_id, { endpointId: e.id });
    } catch (err) {
      if (shown(err)) return endpointPage(req, reply, e, { error: err.message }, statusFor(err.code));
      throw err;
    }
    return reply.redirect(`/ui/webhooks/${e.id}?replayed=${d.event_id}`, 303);
  });
};

/** Verifying a delivery: the two schemes msgd signs with (docs/webhooks-out.md has more). */
function VerifyHelp() {
  return (
    <>
      <p>
        Every request carries two signatures over the same raw body; checking either is enough. Verify before you parse,
        over the raw bytes, in constant time, and answer 2xx quickly.
      </p>
      <p>
        <strong>Standard Webhooks</strong> (<code>webhook-id</code>, <code>webhook-timestamp</code>,{' '}
        <code>webhook-signature</code>), with the <code>standardwebhooks</code> package:
      </p>
      <pre className="body">{`import { Webhook } from 'standardwebhooks';

const wh = new Webhook(process.env.MSGD_WEBHOOK_SECRET); // "whsec_…"
// rawBody: the request body as received (a string), headers: the request's headers
const event = wh.verify(rawBody, headers); // throws when it does not match or is over 5 minutes old`}</pre>
      <p>
        <strong>
          <code>X-Msgd-Signature</code>
        </strong>{' '}
        (<code>sha256=</code> and the hex HMAC-SHA256 of the raw body, keyed with the whole secret string):
      </p>
      <pre className="body">{`import { createHmac, timingSafeEqual } from 'node:crypto';

function valid(raw /* Buffer */, header /* X-Msgd-Signature */) {
  if (!header?.startsWith('sha256=')) return false;
  const want = createHmac('sha256', process.env.MSGD_WEBHOOK_SECRET).update(raw).digest();
  const got = Buffer.from(header.slice(7), 'hex');
  return got.length === want.length && timingSafeEqual(got, want);
}`}</pre>
      <p className="muted">
        While a rotated secret is in its grace period, <code>webhook-signature</code> carries both signatures and{' '}
        <code>X-Msgd-Signature-Previous</code> the old secret&apos;s. The same event may arrive more than once:
        deduplicate on <code>webhook-id</code>.
      </p>
    </>
  );
}
