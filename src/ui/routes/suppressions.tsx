import { Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { CHANNEL_TYPES, type ChannelType } from '../../core/context.js';
import { getPartner } from '../../core/partners.js';
import {
  SUPPRESSION_REASONS,
  createSuppression,
  getSuppression,
  listSuppressions,
  removeSuppression,
  type SuppressionReason,
  type SuppressionRow,
} from '../../core/suppressions.js';
import { can } from '../../core/users.js';
import { AppError } from '../../lib/errors.js';
import { actorOf, field, form, query, redirectWithNote, takeNote, userFor, type Ui } from '../context.js';
import type { FlashNote } from '../flash.js';
import { Csrf, Notice, When } from '../layout.js';
import { pageCtx } from '../pages.js';
import { notFoundPage } from '../responses.js';
import { csvCell } from './ledger.js';

// The partner's suppression list (docs/suppressions.md): search, add, remove, CSV export.
// Admins and developers manage it; billing members read it.

const PAGE = 50;
const ID = /^sup_[0-9a-z]{26}$/;

const REASON_LABEL: Record<SuppressionReason, string> = {
  opt_out_keyword: 'opted out (keyword)',
  hard_bounce: 'hard bounce',
  spam_report: 'spam report',
  unsubscribe: 'unsubscribed',
  group_unsubscribe: 'unsubscribed from a group',
  manual: 'added by hand',
  provider_refused: 'refused by the provider',
};

interface Filter {
  channel?: ChannelType;
  reason?: SuppressionReason;
  q?: string;
  before?: string;
}

function filterOf(q: Record<string, string | undefined>): { filter: Filter; bad: boolean } {
  const filter: Filter = {};
  let bad = false;
  if (q.channel) {
    if ((CHANNEL_TYPES as readonly string[]).includes(q.channel)) filter.channel = q.channel as ChannelType;
    else bad = true;
  }
  if (q.reason) {
    if ((SUPPRESSION_REASONS as readonly string[]).includes(q.reason)) filter.reason = q.reason as SuppressionReason;
    else bad = true;
  }
  const search = q.q?.trim().toLowerCase();
  if (search) filter.q = search.slice(0, 320);
  if (q.before) {
    if (ID.test(q.before)) filter.before = q.before;
    else bad = true;
  }
  return { filter, bad };
}

function listUrl(f: Filter, before?: string): string {
  const p = new URLSearchParams();
  if (f.channel) p.set('channel', f.channel);
  if (f.reason) p.set('reason', f.reason);
  if (f.q) p.set('q', f.q);
  if (before) p.set('before', before);
  const qs = p.toString();
  return qs ? `/ui/suppressions?${qs}` : '/ui/suppressions';
}

function Select({
  name,
  label,
  value,
  options,
  any = true,
}: {
  name: string;
  label: string;
  value: string | undefined;
  options: readonly (readonly [string, string])[];
  any?: boolean;
}) {
  return (
    <div>
      <label htmlFor={`f-${name}`}>{label}</label>
      <select id={`f-${name}`} name={name} defaultValue={value ?? ''}>
        {any && <option value="">any</option>}
        {options.map(([v, l]) => (
          <option key={v} value={v}>
            {l}
          </option>
        ))}
      </select>
    </div>
  );
}

const channelOptions = CHANNEL_TYPES.map((c) => [c, c] as const);
const reasonOptions = SUPPRESSION_REASONS.map((r) => [r, REASON_LABEL[r]] as const);
const ADDABLE: readonly (readonly [string, string])[] = [
  ['manual', REASON_LABEL.manual],
  ['unsubscribe', 'unsubscribed (told us elsewhere)'],
  ['opt_out_keyword', 'opted out (imported from elsewhere)'],
  ['hard_bounce', REASON_LABEL.hard_bounce],
  ['spam_report', REASON_LABEL.spam_report],
];

export const suppressionRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  const page = async (
    req: FastifyRequest,
    reply: FastifyReply,
    msg: FlashNote = takeNote(ui, req, reply, '/ui/suppressions'),
    status = 200,
  ) => {
    const p = pageCtx(ui, req, reply, 'suppressions');
    const manage = can(p.user.role, 'suppressions-manage');
    const { filter, bad } = filterOf(query(req));
    const rows = await listSuppressions(rt.ctx, p.user.partnerId, {
      channel: filter.channel,
      reason: filter.reason,
      address: filter.q,
      search: true,
      before: filter.before,
      limit: PAGE + 1,
    });
    const shown = rows.slice(0, PAGE);
    const more = rows.length > PAGE;
    return p.render(
      'Suppressions',
      <>
        {bad && <Notice kind="error">That filter or page link is not valid; it was left out.</Notice>}
        {msg.error && <Notice kind="error">{msg.error}</Notice>}
        {msg.ok && <Notice kind="ok">{msg.ok}</Notice>}
        <p>
          Sends to these recipients are refused before any cost (400 <code>recipient_suppressed</code>). msgd adds a
          recipient who replies STOP, an address that bounces or reports spam, and one a provider refuses as opted out.{' '}
          <a href={`/ui/suppressions.csv${listUrl(filter).replace('/ui/suppressions', '')}`}>Download as CSV</a>
        </p>
        <form method="get" action="/ui/suppressions" className="filters">
          <div>
            <label htmlFor="f-q">Address</label>
            <input id="f-q" name="q" type="search" maxLength={320} defaultValue={filter.q ?? ''} />
          </div>
          <Select name="channel" label="Channel" value={filter.channel} options={channelOptions} />
          <Select name="reason" label="Reason" value={filter.reason} options={reasonOptions} />
          <div>
            <button type="submit">Search</button>
          </div>
        </form>
        {manage && (
          <>
            <h2>Add a recipient</h2>
            <form method="post" action="/ui/suppressions" className="filters">
              <Csrf token={p.csrf} />
              <Select name="channel" label="Channel" value="sms" options={channelOptions} any={false} />
              <div>
                <label htmlFor="a-address">Address</label>
                <input
                  id="a-address"
                  name="address"
                  type="text"
                  required
                  maxLength={320}
                  placeholder="+14155550123, ann@example.com, PSID"
                />
              </div>
              <Select name="reason" label="Reason" value="manual" options={ADDABLE} any={false} />
              <div>
                <label htmlFor="a-note">Note</label>
                <input id="a-note" name="note" type="text" maxLength={500} />
              </div>
              <div>
                <button type="submit">Add</button>
              </div>
            </form>
          </>
        )}
        <h2>Suppressed recipients</h2>
        {shown.length === 0 ? (
          <p>No suppressed recipients{filter.channel || filter.reason || filter.q ? ' match' : ' yet'}.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col">Address</th>
                <th scope="col">Channel</th>
                <th scope="col">Reason</th>
                <th scope="col">Sender</th>
                <th scope="col">Since</th>
                <th scope="col">Source</th>
                {manage && (
                  <th scope="col">
                    <span className="muted">Action</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {shown.map((s) => (
                <tr key={s.id}>
                  <td>
                    <code>{s.address}</code>
                  </td>
                  <td>{s.channel}</td>
                  <td>
                    {REASON_LABEL[s.reason]}
                    {s.group_id ? ` ${s.group_id}` : ''}
                    {s.detail && <div className="muted">{s.detail}</div>}
                  </td>
                  <td>{s.scope || 'all senders'}</td>
                  <td>
                    <When ms={s.created_at} />
                  </td>
                  <td>
                    <code>{s.source}</code>
                  </td>
                  {manage && (
                    <td>
                      <RemoveForm s={s} csrf={p.csrf} />
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {more && (
          <p className="pager">
            <a href={listUrl(filter, shown[shown.length - 1].id)}>Older entries →</a>
          </p>
        )}
      </>,
      bad ? 400 : status,
    );
  };

  app.get('/suppressions', async (req, reply) => page(req, reply));

  app.post('/suppressions', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'suppressions-manage');
    const f = form(req);
    const channel = field(f, 'channel');
    const reason = field(f, 'reason') || 'manual';
    try {
      if (!(CHANNEL_TYPES as readonly string[]).includes(channel))
        throw new AppError('invalid_request', 'choose a channel from the list');
      if (!ADDABLE.some(([r]) => r === reason)) throw new AppError('invalid_request', 'choose a reason from the list');
      const { row, created } = await createSuppression(
        rt.ctx,
        p.user.partnerId,
        {
          channel: channel as ChannelType,
          address: field(f, 'address'),
          reason: reason as 'manual',
          detail: field(f, 'note') || null,
        },
        actorOf(p.user),
      );
      return redirectWithNote(ui, req, reply, '/ui/suppressions', {
        ok: created
          ? `${row.address} is suppressed on ${row.channel}: sends to it are refused from now on.`
          : `${row.address} was already suppressed on ${row.channel} (${REASON_LABEL[row.reason]}).`,
      });
    } catch (e) {
      if (e instanceof AppError && e.code === 'invalid_request') {
        const why = e.details[0]?.message;
        return page(req, reply, { error: why ? `${e.message}: ${why}` : e.message }, 400);
      }
      throw e;
    }
  });

  app.post<{ Params: { id: string } }>('/suppressions/:id/remove', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'suppressions-manage');
    const own = ID.test(req.params.id) ? await getSuppression(rt.ctx, p.user.partnerId, req.params.id) : undefined;
    if (!own) return notFoundPage(ui, req, reply);
    try {
      await removeSuppression(rt.ctx, p.user.partnerId, own.id, {
        actor: actorOf(p.user),
        consentConfirmed: field(form(req), 'consent') === 'yes',
      });
    } catch (e) {
      if (e instanceof AppError && e.code === 'consent_required')
        return page(
          req,
          reply,
          {
            error: `${own.address} opted out themselves: tick “the customer opted in again” to remove it, only if you hold their renewed consent.`,
          },
          400,
        );
      throw e;
    }
    return redirectWithNote(ui, req, reply, '/ui/suppressions', {
      ok: `${own.address} is no longer suppressed on ${own.channel}.`,
    });
  });

  app.get('/suppressions.csv', async (req, reply) => {
    const user = userFor(req, 'suppressions');
    const partner = await getPartner(rt.ctx, user.partnerId);
    const { filter } = filterOf(query(req));
    async function* rows() {
      yield (
        ['id', 'channel', 'address', 'reason', 'sender', 'group_id', 'source', 'detail', 'created_at']
          .map(csvCell)
          .join(',') + '\r\n'
      );
      let before: string | undefined;
      for (;;) {
        const page = await listSuppressions(rt.ctx, partner.id, {
          channel: filter.channel,
          reason: filter.reason,
          address: filter.q,
          search: true,
          before,
          limit: 1000,
        });
        if (page.length === 0) return;
        yield page.map(line).join('');
        before = page[page.length - 1].id;
        await new Promise((r) => setImmediate(r));
      }
    }
    const day = new Date(rt.ctx.now()).toISOString().slice(0, 10);
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="suppressions-${partner.slug}-${day}.csv"`)
      .send(Readable.from(rows()));
  });
};

function line(s: SuppressionRow): string {
  return (
    [
      s.id,
      s.channel,
      s.address,
      s.reason,
      s.scope || null,
      s.group_id || null,
      s.source,
      s.detail,
      new Date(s.created_at).toISOString(),
    ]
      .map(csvCell)
      .join(',') + '\r\n'
  );
}

function RemoveForm({ s, csrf }: { s: SuppressionRow; csrf: string }) {
  const keyword = s.reason === 'opt_out_keyword';
  return (
    <form
      method="post"
      action={`/ui/suppressions/${s.id}/remove`}
      data-confirm={`Remove ${s.address} from the ${s.channel} suppression list? Sends to it are accepted again.`}
    >
      <Csrf token={csrf} />
      {keyword && (
        <label>
          <input type="checkbox" name="consent" value="yes" /> the customer opted in again
        </label>
      )}{' '}
      <button type="submit" className="danger" aria-label={`Remove ${s.address}`}>
        Remove
      </button>
    </form>
  );
}
