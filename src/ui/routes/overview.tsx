import type { FastifyPluginAsync } from 'fastify';
import { partnerChannels } from '../../core/channel-health.js';
import type { ChannelType } from '../../core/context.js';
import { listAllEndpoints } from '../../core/endpoints.js';
import { statusCounts } from '../../core/message-stats.js';
import { getPartner } from '../../core/partners.js';
import { rollUpSpend, spendSeries, type SpendDay } from '../../core/spend.js';
import { can } from '../../core/users.js';
import { formatMoney } from '../../lib/money.js';
import type { Ui } from '../context.js';
import { When } from '../layout.js';
import { StatusText, money, pageCtx, publicBase } from '../pages.js';

// Overview: balance and credit, spend per day over 30 days (a server-drawn SVG), outbound
// messages by status over the last day, the endpoints that are failing, and a ready request
// for a first message on the partner's first channel.

/** A first message on each channel: the send API path and a body that channel takes. */
const FIRST_MESSAGE: Record<ChannelType, { path: string; body: Record<string, unknown>; note: string }> = {
  sms: {
    path: '/api/send-sms.php',
    body: { to: '+14155550123', text: 'Hello from msgd' },
    note: 'Put your own phone number (E.164, with +) in "to".',
  },
  email: {
    path: '/api/send-email.php',
    body: { to: 'you@example.com', subject: 'Hello from msgd', html: '<p>Hello from msgd</p>' },
    note: 'Put your own address in "to"; the sender is the channel\'s from-address.',
  },
  whatsapp: {
    path: '/api/send-whatsapp.php',
    body: { to: '+14155550123', type: 'template', template: { name: 'hello_world', language: 'en_US' } },
    note: 'A first WhatsApp message to someone must be an approved template: put yours in "template".',
  },
  messenger: {
    path: '/api/send-whatsapp.php',
    body: { channel: 'messenger', to: '<PSID>', text: 'Hello from msgd' },
    note: 'Messenger needs the page-scoped id of someone who wrote to your page in the last 24 hours.',
  },
  instagram: {
    path: '/api/send-whatsapp.php',
    body: { channel: 'instagram', to: '<IGSID>', text: 'Hello from msgd' },
    note: 'Instagram needs the Instagram-scoped id of someone who wrote to you in the last 24 hours.',
  },
};

export const overviewRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  const { rt } = ui;

  app.get('/overview', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'overview');
    const partner = await getPartner(rt.ctx, p.user.partnerId);
    const seesMoney = can(p.user.role, 'ledger');
    const seesTraffic = can(p.user.role, 'messages');
    let series: SpendDay[] = [];
    if (seesMoney) {
      // Catch up with the ledger first, so the chart includes the last minute's spend.
      await rollUpSpend(rt.ctx);
      series = await spendSeries(rt.ctx, partner.id, 30);
    }
    const counts = seesTraffic ? await statusCounts(rt.ctx, partner.id, 24) : [];
    const failing = seesTraffic
      ? (await listAllEndpoints(rt.ctx, partner.id)).filter((e) => e.status === 'disabled' || e.failing_since !== null)
      : [];
    const total = series.reduce((s, d) => s + d.spend, 0);
    // The channel assigned first: the one a new partner most likely means to try.
    const first = seesTraffic
      ? ((await partnerChannels(rt.ctx, partner.id)).sort((a, b) => (a.created_at < b.created_at ? -1 : 1))[0] ?? null)
      : null;
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
            <h2>Send your first message</h2>
            {first === null ? (
              <p>No channel is assigned yet: your operator assigns them, then a ready request shows here.</p>
            ) : (
              <FirstMessage type={first.type} base={publicBase(ui, req)} />
            )}
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
                    {e.status === 'disabled' ? (
                      `disabled (${e.disabled_reason ?? 'no reason recorded'})`
                    ) : (
                      <>
                        failing since <When ms={e.failing_since} />
                      </>
                    )}
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

function FirstMessage({ type, base }: { type: ChannelType; base: string }) {
  const m = FIRST_MESSAGE[type];
  // The body goes inside single quotes: a ' in it would end them.
  const body = JSON.stringify(m.body).replace(/'/g, "'\\''");
  return (
    <>
      <p>
        On your {type} channel, with a token that has the <code>messages:send</code> scope (
        <a href="/ui/tokens">API tokens</a>) in place of <code>$MSGD_TOKEN</code>:
      </p>
      <pre className="body" id="first-message">
        {`curl -s ${base}${m.path} \\\n  -H "Authorization: Bearer $MSGD_TOKEN" \\\n  -H "Content-Type: application/json" \\\n  -d '${body}'`}
      </pre>
      <p>
        <button type="button" className="secondary" data-copy="first-message" hidden>
          Copy
        </button>
      </p>
      <p className="muted">
        {m.note} The answer carries the message's id; it then shows under <a href="/ui/messages">Messages</a>. Every
        route is in the <a href="/v1/docs">API reference</a>.
      </p>
    </>
  );
}

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
        <line x1={pad} y1={H} x2={W - pad} y2={H} />
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
