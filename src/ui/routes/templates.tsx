import type { FastifyPluginAsync } from 'fastify';
import {
  partnerTemplates,
  TEMPLATE_CATEGORIES,
  templateJson,
  type TemplateFilter,
} from '../../core/whatsapp-templates.js';
import { decodeCursor, encodeCursor } from '../../web/pagination.js';
import { AppError } from '../../lib/errors.js';
import { query, type Ui } from '../context.js';
import { Notice, Pager, When } from '../layout.js';
import { AnyOf, pageCtx } from '../pages.js';

// Templates: the WhatsApp templates this partner may send, read by the same query as
// GET /v1/templates (the same filters and cursors), with the parameters a send must give.

const PAGE = 50;
const STATUSES = ['APPROVED', 'PENDING', 'PAUSED', 'DISABLED', 'REJECTED'] as const;

type Json = ReturnType<typeof templateJson>;

/** What a send gives, in words: "header: image; body: {{1}}, {{2}}; button 0: 1 parameter". */
function Needs({ t }: { t: Json }) {
  const p = t.parameters;
  const parts: string[] = [];
  if (p.header)
    parts.push(
      p.header.kind === 'media'
        ? `header: one ${p.header.type}`
        : `header: ${p.header.params.map((n) => `{{${n}}}`).join(', ')}`,
    );
  if (p.body.length) parts.push(`body: ${p.body.map((n) => `{{${n}}}`).join(', ')}`);
  for (const b of p.buttons)
    parts.push(`${b.type} button ${b.index}: ${b.params} parameter${b.params === 1 ? '' : 's'}`);
  if (!p.checked) parts.push('checked by Meta');
  return <>{parts.length ? parts.join('; ') : 'no parameters'}</>;
}

export const templateRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  app.get('/templates', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'templates');
    const q = query(req);
    const filter: TemplateFilter = {
      name: q.name?.trim() || undefined,
      language: q.language?.trim() || undefined,
      status: (STATUSES as readonly string[]).includes(q.status ?? '') ? q.status : undefined,
      category: (TEMPLATE_CATEGORIES as readonly string[]).includes(q.category ?? '') ? q.category : undefined,
    };
    let error: string | null = null;
    let rows: Json[] = [];
    let next: string | null = null;
    try {
      const after = decodeCursor(q.cursor, 'tpl');
      const found = await partnerTemplates(ui.rt.ctx, p.user.partnerId, filter, { after: after?.id, limit: PAGE + 1 });
      rows = found.slice(0, PAGE).map(templateJson);
      next = found.length > PAGE ? encodeCursor({ o: 'tpl', id: found[PAGE - 1].id }) : null;
    } catch (e) {
      if (!(e instanceof AppError)) throw e;
      error = e.message;
    }
    return p.render(
      'Templates',
      <>
        <p className="muted">
          The WhatsApp templates you may send, as Meta last reported them. Only APPROVED templates can be sent; a
          template send that does not give the parameters listed here is refused before any cost.
        </p>
        <form method="get" action="/ui/templates" className="filters" role="search">
          <div>
            <label htmlFor="f-name">Name</label>
            <input id="f-name" name="name" type="text" defaultValue={filter.name ?? ''} maxLength={512} />
          </div>
          <div>
            <label htmlFor="f-language">Language</label>
            <input
              id="f-language"
              name="language"
              type="text"
              defaultValue={filter.language ?? ''}
              placeholder="en_US"
              maxLength={16}
            />
          </div>
          <AnyOf name="status" label="Status" value={filter.status} options={STATUSES} />
          <AnyOf name="category" label="Category" value={filter.category} options={TEMPLATE_CATEGORIES} />
          <div>
            <button type="submit">Filter</button>
          </div>
        </form>
        {error && <Notice kind="error">{error}</Notice>}
        {!error && rows.length === 0 ? (
          <p>No templates match. Templates appear here once your operator's WhatsApp sender has read them from Meta.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Language</th>
                <th scope="col">Status</th>
                <th scope="col">Category</th>
                <th scope="col">A send gives</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((t) => (
                <tr key={t.id}>
                  <td>{t.name}</td>
                  <td>{t.language}</td>
                  <td>{t.status}</td>
                  <td>{t.category}</td>
                  <td>
                    <Needs t={t} />
                  </td>
                  <td>
                    <When ms={Date.parse(t.updated_at)} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <Pager base="/ui/templates" query={{ ...filter }} next={next} />
      </>,
    );
  });
};
