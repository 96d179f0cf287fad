import type { FastifyPluginAsync } from 'fastify';
import {
  conversationJson,
  conversationKey,
  conversationMessages,
  getConversation,
  listConversations,
} from '../../core/conversation-list.js';
import { decodeCursor, encodeCursor } from '../../web/pagination.js';
import { query, type Ui } from '../context.js';
import { Notice, Pager, When } from '../layout.js';
import { StatusText, pageCtx } from '../pages.js';
import { notFoundPage } from '../responses.js';
import { messagePreview } from './messages.js';

// Conversations: the /v1 list query (by last activity), and a thread of the latest messages.

const PAGE = 50;
const THREAD = 100;

export const conversationRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  app.get('/conversations', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'conversations');
    const q = query(req);
    let error: string | null = null;
    let status = 200;
    let rows: Awaited<ReturnType<typeof listConversations>> = [];
    let next: string | null = null;
    try {
      const after = decodeCursor(q.cursor, 'cu', { time: true });
      rows = await listConversations(
        rt.ctx,
        p.user.partnerId,
        {},
        '-updated_at',
        PAGE + 1,
        after ? { id: after.id, updatedAt: after.t } : null,
      );
      if (rows.length > PAGE) {
        rows = rows.slice(0, PAGE);
        const k = conversationKey(rows[rows.length - 1]);
        next = encodeCursor({ o: 'cu', id: k.id, t: k.updatedAt });
      }
    } catch (e) {
      error = (e as Error).message;
      status = 400;
    }
    return p.render(
      'Conversations',
      <>
        {error && <Notice kind="error">{error}</Notice>}
        {rows.length === 0 && !error ? (
          <p>No conversations yet.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col">Contact</th>
                <th scope="col">Channel</th>
                <th scope="col">State</th>
                <th scope="col">Last message</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => {
                const c = conversationJson(r);
                const who =
                  c.contact.name ??
                  c.contact.phone ??
                  c.contact.email ??
                  c.contact.messenger_psid ??
                  c.contact.instagram_igsid ??
                  c.contact.id;
                return (
                  <tr key={c.id}>
                    <td>
                      <a href={`/ui/conversations/${c.id}`}>{who}</a>
                      {c.contact.name && <div className="muted">{c.contact.phone ?? c.contact.email ?? ''}</div>}
                    </td>
                    <td>{c.channel}</td>
                    <td>{c.status}</td>
                    <td>
                      <When ms={c.last_message_at ? Date.parse(c.last_message_at) : null} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
        <Pager base="/ui/conversations" query={{}} next={next} />
      </>,
      status,
    );
  });

  app.get<{ Params: { id: string } }>('/conversations/:id', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'conversations');
    const row = await getConversation(rt.ctx, p.user.partnerId, req.params.id);
    if (!row) return notFoundPage(ui, req, reply);
    const c = conversationJson(row);
    const messages = (await conversationMessages(rt.ctx, c.id, 'desc', THREAD)).reverse();
    const who = c.contact.name ?? c.contact.phone ?? c.contact.email ?? c.contact.id;
    return p.render(
      `Conversation with ${who}`,
      <>
        <p className="muted">
          {c.channel}, {c.status}
          {c.contact.name && c.contact.phone ? `, ${c.contact.phone}` : ''}
          {messages.length === THREAD ? `; the latest ${THREAD} messages` : ''}
        </p>
        <ol className="thread">
          {messages.map((m) => (
            <li key={m.id} className={m.direction}>
              <div>{messagePreview(m)}</div>
              <div className="muted">
                <a href={`/ui/messages/${m.id}`}>
                  <When ms={m.created_at} />
                </a>{' '}
                · {m.direction === 'outbound' ? <StatusText status={m.status} /> : 'received'}
              </div>
            </li>
          ))}
        </ol>
      </>,
    );
  });
};
