import type { FastifyPluginAsync } from 'fastify';
import { listAllEndpoints } from '../../core/endpoints.js';
import { statusCounts } from '../../core/message-stats.js';
import { getPartner } from '../../core/partners.js';
import { rollUpSpend, spendSeries, type SpendDay } from '../../core/spend.js';
import { can } from '../../core/users.js';
import { formatMoney } from '../../lib/money.js';
import type { Ui } from '../context.js';
import { utc } from '../layout.js';
import { StatusText, money, pageCtx } from '../pages.js';

// Overview: balance and credit, spend per day over 30 days (a server-drawn SVG), outbound
// messages by status over the last day, and the endpoints that are failing.

export const overviewRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  app.get('/overview', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'overview');
    const partner = getPartner(rt.ctx, p.user.partnerId);
    const seesMoney = can(p.user.role, 'ledger');
    const seesTraffic = can(p.user.role, 'messages');
    let series: SpendDay[] = [];
    if (seesMoney) {
      // Catch up with the ledger first, so the chart includes the last minute's spend.
      rollUpSpend(rt.ctx);
      series = spendSeries(rt.ctx, partner.id, 30);
    }
    const counts = seesTraffic ? statusCounts(rt.ctx, partner.id, 24) : [];
    const failing = seesTraffic
      ? listAllEndpoints(rt.ctx, partner.id).filter((e) => e.status === 'disabled' || e.failing_since !== null)
      : [];
    const total = series.reduce((s, d) => s + d.spend, 0);
    return p.render(
      'Overview',
      <>
        {seesMoney && (
          <>
            <div className="cards">
              <div className="card">
                <div className="muted">Balance</div>
                <div className="big">{money(partner.balance, partner.currency)}</div>
              </div>
              <div className="card">
                <div className="muted">Credit limit</div>
                <div className="big">{money(partner.credit_limit, partner.currency)}</div>
              </div>
              <div className="card">
                <div className="muted">Available to spend</div>
                <div className="big">{money(partner.balance + partner.credit_limit, partner.currency)}</div>
              </div>
            </div>
            <h2>Spend per day, last 30 days (UTC)</h2>
            <SpendChart series={series} currency={partner.currency} />
            <p className="muted">
              {money(total, partner.currency)} in 30 days. <a href="/ui/ledger">Ledger</a>
            </p>
          </>
        )}
        {seesTraffic && (
          <>
            <h2>Outbound messages in the last 24 hours</h2>
            {counts.length === 0 ? (
              <p>None.</p>
            ) : (
              <table>
                <thead>
                  <tr>
                    <th scope="col">Status</th>
                    <th scope="col" className="num">
                      Messages
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {counts.map((c) => (
                    <tr key={c.status}>
                      <td>
                        <a href={`/ui/messages?status=${encodeURIComponent(c.status)}`}>
                          <StatusText status={c.status} />
                        </a>
                      </td>
                      <td className="num">{c.n}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            <h2>Failing webhook endpoints</h2>
            {failing.length === 0 ? (
              <p>None: every endpoint is answering.</p>
            ) : (
              <ul>
                {failing.map((e) => (
                  <li key={e.id}>
                    <a href={`/ui/webhooks/${e.id}`}>{e.url}</a>:{' '}
                    {e.status === 'disabled'
                      ? `disabled (${e.disabled_reason ?? 'no reason recorded'})`
                      : `failing since ${utc(e.failing_since)}`}
                  </li>
                ))}
              </ul>
            )}
          </>
        )}
      </>,
    );
  });
};

/** Bars drawn on the server: no script, and a table beside it for screen readers. */
function SpendChart({ series, currency }: { series: SpendDay[]; currency: string }) {
  const W = 720;
  const H = 180;
  const pad = 24;
  const max = Math.max(1, ...series.map((d) => d.spend));
  const bw = (W - pad * 2) / series.length;
  return (
    <figure>
      <svg
        className="chart"
        viewBox={`0 0 ${W} ${H + 20}`}
        width={W}
        height={H + 20}
        role="img"
        aria-labelledby="spend-title"
      >
        <title id="spend-title">{`Spend per day over the last ${series.length} days; the highest day is ${formatMoney(max)} ${currency}`}</title>
        <line x1={pad} y1={H} x2={W - pad} y2={H} stroke="#d0d7de" />
        {series.map((d, i) => {
          const h = d.spend > 0 ? Math.max(1, Math.round((d.spend / max) * (H - 20))) : 0;
          return (
            <g key={d.day}>
              <rect className="bar" x={pad + i * bw + 1} y={H - h} width={Math.max(1, bw - 2)} height={h}>
                <title>{`${d.day}: ${formatMoney(d.spend)} ${currency}, ${d.messages} messages`}</title>
              </rect>
              {i % 5 === 0 && (
                <text x={pad + i * bw} y={H + 14}>
                  {d.day.slice(5)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <figcaption className="muted">
        Highest day: {money(max === 1 && series.every((d) => d.spend === 0) ? 0 : max, currency)}
      </figcaption>
    </figure>
  );
}
