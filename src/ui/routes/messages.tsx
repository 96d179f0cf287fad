import type { FastifyPluginAsync } from 'fastify';
import { CHANNEL_TYPES, type ChannelType } from '../../core/context.js';
import { contentText, type MessageContent } from '../../core/message-content.js';
import { getMessageRowIn, messageHistoryIn, type MessageRow } from '../../core/messages.js';
import { findMessages, listMessages, type MessageFilter } from '../../core/message-list.js';
import { MESSAGE_STATUSES, type MessageStatus } from '../../core/statuses.js';
import { decodeCursor, encodeCursor } from '../../web/pagination.js';
import { invalid } from '../../lib/errors.js';
import { idTime } from '../../lib/id-time.js';
import { cancelScheduled } from '../../core/scheduled.js';
import { AppError } from '../../lib/errors.js';
import { query, redirectWithNote, takeNote, userFor, type Ui } from '../context.js';
import { Csrf, Notice, When } from '../layout.js';
import { AnyOf, StatusText, money, pageCtx } from '../pages.js';
import { notFoundPage } from '../responses.js';

// Messages: a filtered, cursor-paged list read by the same query as GET /v1/messages (the same
// filters, bounds and cursors), and one message with its status timeline.

const PAGE = 50;
/** Statuses a message normally leaves soon; its page refreshes itself every REFRESH_MS while in one. */
const IN_FLIGHT = new Set<string>(['queued', 'sending', 'sent', 'deferred']);
const REFRESH_MS = 5_000;

// The date inputs are whole UTC days: "from" is /v1's created_since at that day's start, "to"
// is created_before at the start of the next day, so the "to" day is included.
function parseDay(value: string | undefined, field: string, endOfDay: boolean): number | undefined {
  if (!value) return undefined;
  const m = /^\d{4}-\d{2}-\d{2}$/.exec(value);
  const t = m ? Date.parse(`${value}T00:00:00.000Z`) : NaN;
  if (Number.isNaN(t)) throw invalid(`${field} must be a date like 2026-11-22`, [{ field, message: 'YYYY-MM-DD' }]);
  return endOfDay ? t + 86_400_000 : t;
}

const DIRECTIONS = ['outbound', 'inbound'] as const;
const MESSAGE_ID = /^msg_[0-9a-z]{26}$/;
/** Earlier pages remembered for "Previous"; past this many, "First page" still goes back. */
const TRAIL_MAX = 30;

/** `back`: the ids each earlier page started after, oldest first, '-' for the first page. */
function parseTrail(raw: string | undefined): string[] {
  if (!raw) return [];
  const parts = raw.split('.');
  if (parts.some((id) => id !== '-' && !MESSAGE_ID.test(id)))
    throw invalid('the page link is not valid; start again from the first page');
  return parts.slice(-TRAIL_MAX).map((id) => (id === '-' ? '' : id));
}

/** A page of the list: the filters, the page's cursor (null: the first) and the earlier pages' starts. */
function pageHref(filters: Record<string, string | undefined>, after: string | null, trail: string[]): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
  if (after) q.set('cursor', encodeCursor({ o: 'm', id: after }));
  const back = trail.slice(-TRAIL_MAX);
  if (after && back.length) q.set('back', back.map((id) => id || '-').join('.'));
  const qs = q.toString();
  return qs ? `/ui/messages?${qs}` : '/ui/messages';
}

export function messagePreview(m: Pick<MessageRow, 'content' | 'deleted_at'>): string {
  if (m.deleted_at !== null) return '(unsent by the customer)';
  const c = JSON.parse(m.content) as MessageContent;
  if (c.kind === 'email') return c.subject;
  if (c.kind === 'template') return `template ${c.template.name} (${c.template.language})`;
  if ((c as { kind: string }).kind === 'redacted') return '(content removed by the retention policy)';
  const text = contentText(c);
  return text || `(${c.kind})`;
}

export const messageRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  app.get('/messages', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'messages');
    const q = query(req);
    const filter: MessageFilter = {};
    let error: string | null = null;
    let status = 200;
    let rows: MessageRow[] = [];
    let next: string | null = null;
    let after: string | null = null;
    // The start of each earlier page, oldest first ('' for the first page): "Previous" pops one.
    let trail: string[] = [];
    const ref = q.id?.trim() ?? '';
    let found = false;
    try {
      if (q.channel) {
        if (!(CHANNEL_TYPES as readonly string[]).includes(q.channel)) throw invalid('unknown channel');
        filter.channel = q.channel as ChannelType;
      }
      if (q.status) {
        if (!(MESSAGE_STATUSES as readonly string[]).includes(q.status)) throw invalid('unknown status');
        filter.status = q.status as MessageStatus;
      }
      if (q.direction) {
        if (q.direction !== 'outbound' && q.direction !== 'inbound') throw invalid('unknown direction');
        filter.direction = q.direction;
      }
      const recipient = q.recipient?.trim();
      if (recipient) filter.recipient = recipient.slice(0, 320);
      filter.createdSince = parseDay(q.from, 'from', false);
      filter.createdBefore = parseDay(q.to, 'to', true);
      after = decodeCursor(q.cursor, 'm')?.id ?? null;
      trail = parseTrail(q.back);
      if (ref.length > 200) throw invalid('an id is at most 200 characters');
      // An id: msgd's own, or a provider's that reports are matched by, is found at once;
      // any other provider id is searched for row by row, like the other checked filters.
      const hits = ref && !after ? await findMessages(rt.ctx, p.user.partnerId, ref) : [];
      if (hits.length > 0 || MESSAGE_ID.test(ref)) {
        rows = hits;
        found = true;
      } else {
        if (ref) filter.providerMessageId = ref;
        const page = await listMessages(rt.ctx, p.user.partnerId, filter, PAGE, after);
        rows = page.rows;
        next = page.next;
      }
    } catch (e) {
      error = (e as Error).message;
      status = 400;
    }
    const filters = {
      id: ref || undefined,
      channel: q.channel,
      status: q.status,
      direction: q.direction,
      recipient: q.recipient,
      from: q.from,
      to: q.to,
    };
    // Row-checked filters may end a page early; its cursor then says how far back it looked.
    const searchedTo = next && rows.length < PAGE ? idTime(next) : null;
    return p.render(
      'Messages',
      <>
        <form method="get" action="/ui/messages" className="filters" role="search">
          <div>
            <label htmlFor="f-id">Message or provider id</label>
            <input id="f-id" name="id" type="text" defaultValue={ref} placeholder="msg_… or SM…" maxLength={200} />
          </div>
          <AnyOf name="channel" label="Channel" value={q.channel} options={CHANNEL_TYPES} />
          <AnyOf name="status" label="Status" value={q.status} options={MESSAGE_STATUSES} />
          <AnyOf name="direction" label="Direction" value={q.direction} options={DIRECTIONS} />
          <div>
            <label htmlFor="f-recipient">Recipient or sender</label>
            <input
              id="f-recipient"
              name="recipient"
              type="text"
              defaultValue={q.recipient ?? ''}
              placeholder="+14155550123"
            />
          </div>
          <div>
            <label htmlFor="f-from">From (UTC)</label>
            <input id="f-from" name="from" type="date" defaultValue={q.from ?? ''} />
          </div>
          <div>
            <label htmlFor="f-to">To (UTC)</label>
            <input id="f-to" name="to" type="date" defaultValue={q.to ?? ''} />
          </div>
          <div>
            <button type="submit">Filter</button>
          </div>
        </form>
        {error && <Notice kind="error">{error}</Notice>}
        {found && ref && rows.length === 0 && <p>No message of yours has the id {ref}.</p>}
        {!found && rows.length === 0 && !error && !next && <p>No messages match.</p>}
        {searchedTo !== null && (
          <p className="muted" id="searched">
            Searched messages back to <When ms={searchedTo} />
            {rows.length === 0 ? '; nothing matches yet' : `; ${rows.length} match so far`}.{' '}
            <a href={pageHref(filters, next!, [...trail, after ?? ''])}>Look further back →</a>
          </p>
        )}
        {rows.length > 0 && (
          <table>
            <thead>
              <tr>
                <th scope="col">Created</th>
                <th scope="col">Direction</th>
                <th scope="col">Channel</th>
                <th scope="col">To / from</th>
                <th scope="col">Text</th>
                <th scope="col">Status</th>
                <th scope="col" className="num">
                  Price
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((m) => (
                <tr key={m.id}>
                  <td>
                    <a href={`/ui/messages/${m.id}`}>
                      <When ms={m.created_at} />
                    </a>
                  </td>
                  <td>{m.direction}</td>
                  <td>{m.channel_type}</td>
                  <td>{m.direction === 'outbound' ? m.to : m.from}</td>
                  <td>{truncate(messagePreview(m), 80)}</td>
                  <td>
                    <StatusText status={m.status} />
                  </td>
                  <td className="num">{money(m.price, p.user.currency)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {(after !== null || next !== null) && (
          <nav className="pager" aria-label="Pages">
            {after !== null && (
              <>
                <a href={pageHref(filters, null, [])}>« First page</a>{' '}
                {trail.length > 0 && (
                  <a href={pageHref(filters, trail[trail.length - 1] || null, trail.slice(0, -1))} rel="prev">
                    ‹ Previous page
                  </a>
                )}{' '}
              </>
            )}
            {next !== null && (
              <a href={pageHref(filters, next, [...trail, after ?? ''])} rel="next">
                Next page →
              </a>
            )}
          </nav>
        )}
      </>,
      status,
    );
  });

  app.post<{ Params: { id: string } }>('/messages/:id/cancel', async (req, reply) => {
    const user = userFor(req, 'messages');
    const path = `/ui/messages/${req.params.id}`;
    const m = await getMessageRowIn(rt.ctx.store, req.params.id);
    if (!m || m.partner_id !== user.partnerId) return notFoundPage(ui, req, reply);
    try {
      await cancelScheduled(rt.ctx, user.partnerId, m.id, `user:${user.userId}`);
    } catch (e) {
      if (e instanceof AppError && e.code === 'message_not_cancelable')
        return redirectWithNote(ui, req, reply, path, { error: `Not canceled: ${e.message}.` });
      throw e;
    }
    return redirectWithNote(ui, req, reply, path, {
      ok: m.price > 0 ? `Canceled; ${money(m.price, user.currency)} refunded.` : 'Canceled.',
    });
  });

  app.get<{ Params: { id: string } }>('/messages/:id', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'messages');
    const m = await getMessageRowIn(rt.ctx.store, req.params.id);
    if (!m || m.partner_id !== p.user.partnerId) return notFoundPage(ui, req, reply);
    const history = await messageHistoryIn(rt.ctx.store, m.id, m);
    const content = JSON.parse(m.content) as MessageContent;
    // Still on its way: the page's script fetches it again until the status is final.
    const live = IN_FLIGHT.has(m.status);
    const note = takeNote(ui, req, reply, `/ui/messages/${m.id}`);
    return p.render(
      `Message ${m.id}`,
      <div id="message-live" data-refresh={live ? String(REFRESH_MS) : undefined}>
        {note.ok && <Notice kind="ok">{note.ok}</Notice>}
        {note.error && <Notice kind="error">{note.error}</Notice>}
        {m.status === 'scheduled' && m.send_at !== null && (
          <form method="post" action={`/ui/messages/${m.id}/cancel`} className="inline">
            <Csrf token={p.csrf} />
            <p>
              Scheduled for <When ms={m.send_at} />. Its price is debited; canceling refunds it.{' '}
              <button type="submit">Cancel this message</button>
            </p>
          </form>
        )}
        {live && (
          <p className="muted">
            This message is still on its way; its status here updates by itself (or reload the page).
          </p>
        )}
        <dl className="kv">
          <dt>Status</dt>
          <dd aria-live="polite">
            <StatusText status={m.status} />
          </dd>
          <dt>Direction</dt>
          <dd>{m.direction}</dd>
          <dt>Channel</dt>
          <dd>{m.channel_type}</dd>
          <dt>To</dt>
          <dd>{m.to}</dd>
          <dt>From</dt>
          <dd>{m.from}</dd>
          <dt>Price</dt>
          <dd>
            {money(m.price, p.user.currency)}
            {m.refunded ? ' (refunded)' : ''}
          </dd>
          <dt>Segments</dt>
          <dd>{m.segments}</dd>
          <dt>Created</dt>
          <dd>
            <When ms={m.created_at} />
          </dd>
          {m.provider_message_id && (
            <>
              <dt>Provider id</dt>
              <dd>{m.provider_message_id}</dd>
            </>
          )}
          {m.conversation_id && (
            <>
              <dt>Conversation</dt>
              <dd>
                <a href={`/ui/conversations/${m.conversation_id}`}>{m.conversation_id}</a>
              </dd>
            </>
          )}
          {m.dispatch_uncertain ? (
            <>
              <dt>Note</dt>
              <dd>Possibly sent twice: the provider call may have been in flight during an interruption.</dd>
            </>
          ) : null}
        </dl>
        {(m.error_code || m.error_message) && (
          <Notice kind="error">
            Provider error{m.error_code ? ` ${m.error_code}` : ''}: {m.error_message ?? 'no message given'}
          </Notice>
        )}
        <h2>Content</h2>
        {content.kind === 'email' ? (
          <>
            <p>
              <strong>Subject:</strong> {content.subject}
            </p>
            <pre className="body">{content.text ?? content.html ?? ''}</pre>
          </>
        ) : (
          <pre className="body">{messagePreview(m)}</pre>
        )}
        <h2>Status timeline</h2>
        <table>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Status</th>
              <th scope="col">Provider said</th>
              <th scope="col">Error</th>
              <th scope="col">Applied</th>
            </tr>
          </thead>
          <tbody>
            {history.map((h, i) => (
              <tr key={i}>
                <td>
                  <When ms={h.occurred_at} />
                </td>
                <td>
                  <StatusText status={h.status} />
                </td>
                <td>{h.provider_status ?? '—'}</td>
                <td>
                  {h.error_code || h.error_message ? `${h.error_code ?? ''} ${h.error_message ?? ''}`.trim() : '—'}
                </td>
                <td>{h.ignored ? 'no (arrived late)' : 'yes'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>,
    );
  });
};

export function truncate(s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}
