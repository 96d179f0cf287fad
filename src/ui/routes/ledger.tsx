import { Readable } from 'node:stream';
import type { FastifyPluginAsync } from 'fastify';
import { listLedger, type LedgerEntry } from '../../core/ledger.js';
import { getPartner } from '../../core/partners.js';
import { can } from '../../core/users.js';
import { formatMoney } from '../../lib/money.js';
import { query, userFor, type Ui } from '../context.js';
import { Notice, When } from '../layout.js';
import { money, pageCtx } from '../pages.js';

// The ledger: every money move with the balance after it (the running balance), newest first,
// paged by entry id; and the whole ledger as CSV.

const PAGE = 50;

/**
 * A CSV cell, always quoted. A spreadsheet may split the file on `,`, `;` or tab (European
 * Excel reads `;`), and a broken-up quoted cell then starts wherever a separator or line break
 * was: so a formula start (= + - @ tab CR) at the start of the text, or after any separator or
 * line break in it (past any quote marks), gets a `'` before it.
 */
export function csvCell(v: string | number | null): string {
  if (v === null) return '""';
  let s = String(v);
  if (typeof v === 'string') s = defuse(s);
  return `"${s.replace(/"/g, '""')}"`;
}

const SEPARATOR = new Set([',', ';', '\t', '\r', '\n']);
const FORMULA_START = new Set(['=', '+', '-', '@', '\t', '\r']);

function defuse(s: string): string {
  let out = '';
  let start = true; // at the text's start, or just after a separator or line break (and any quote marks)
  for (const ch of s) {
    if (start && FORMULA_START.has(ch)) out += "'";
    out += ch;
    if (SEPARATOR.has(ch)) start = true;
    else if (ch !== '"') start = false;
  }
  return out;
}

export const ledgerRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  app.get('/ledger', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'ledger');
    const q = query(req);
    const before = q.before && /^\d{1,15}$/.test(q.before) ? Number(q.before) : undefined;
    const bad = q.before !== undefined && before === undefined;
    const { partner, entries } = await listLedger(rt.ctx, p.user.partnerId, { limit: PAGE + 1, before });
    const shown = entries.slice(0, PAGE);
    // A billing user may not open messages: the id shows as text, not as a link to a 403.
    const opensMessages = can(p.user.role, 'messages');
    const more = entries.length > PAGE;
    return p.render(
      'Ledger',
      <>
        {bad && <Notice kind="error">That page link is not valid; showing the newest entries.</Notice>}
        <p>
          Balance <strong>{money(partner.balance, partner.currency)}</strong>, credit limit{' '}
          {money(partner.credit_limit, partner.currency)}. <a href="/ui/ledger.csv">Download the ledger as CSV</a>
        </p>
        {shown.length === 0 ? (
          <p>No entries yet.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Kind</th>
                <th scope="col" className="num">
                  Amount
                </th>
                <th scope="col" className="num">
                  Balance after
                </th>
                <th scope="col">Message</th>
                <th scope="col">Note</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((e) => (
                <tr key={e.id}>
                  <td>
                    <When ms={e.created_at} />
                  </td>
                  <td>{e.kind}</td>
                  <td className="num">{formatMoney(e.amount)}</td>
                  <td className="num">{formatMoney(e.balance_after)}</td>
                  <td>
                    {e.message_id === null ? (
                      '—'
                    ) : opensMessages ? (
                      <a href={`/ui/messages/${e.message_id}`}>{e.message_id}</a>
                    ) : (
                      <code>{e.message_id}</code>
                    )}
                  </td>
                  <td>{e.note ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {more && (
          <p className="pager">
            <a href={`/ui/ledger?before=${shown[shown.length - 1].id}`}>Older entries →</a>
          </p>
        )}
      </>,
      bad ? 400 : 200,
    );
  });

  app.get('/ledger.csv', async (req, reply) => {
    const user = userFor(req, 'ledger');
    const partner = await getPartner(rt.ctx, user.partnerId);
    // Read in pages between which other requests run: a long ledger never holds the process.
    async function* rows() {
      yield (
        ['id', 'created_at', 'kind', 'amount', 'balance_after', 'currency', 'message_id', 'note']
          .map(csvCell)
          .join(',') + '\r\n'
      );
      let before: number | undefined;
      for (;;) {
        const { entries } = await listLedger(rt.ctx, partner.id, { limit: 1000, before });
        if (entries.length === 0) return;
        yield entries.map((e) => line(e, partner.currency)).join('');
        before = entries[entries.length - 1].id;
        await new Promise((r) => setImmediate(r));
      }
    }
    const day = new Date(rt.ctx.now()).toISOString().slice(0, 10);
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="ledger-${partner.slug}-${day}.csv"`)
      .send(Readable.from(rows()));
  });
};

function line(e: LedgerEntry, currency: string): string {
  return (
    [
      e.id,
      new Date(e.created_at).toISOString(),
      e.kind,
      formatMoney(e.amount),
      formatMoney(e.balance_after),
      currency,
      e.message_id,
      e.note,
    ]
      .map((v, i) => (i === 3 || i === 4 ? `"${v}"` : csvCell(v as string | number | null)))
      .join(',') + '\r\n'
  );
}
