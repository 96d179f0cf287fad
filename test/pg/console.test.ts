import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint } from '../../src/core/endpoints.js';
import { sql } from '../../src/db/sql.js';
import { connect, setupPartner, startTestServer, type PartnerSetup, type TestServer } from '../helpers/server.js';
import { type Client, loggedIn } from '../ui/helpers.js';
import { migratedDatabase } from './helpers.js';

// The partner console and /v1's message reads with msgd on PostgreSQL: a logged-in admin opens
// every page of the console (each answers 200 with its heading), a message's page and its
// cancel, and a partner reads a message with its history through /v1.

const KEY = randomBytes(32).toString('hex');
const db = migratedDatabase();
let s: TestServer;
let acme: PartnerSetup;
let admin: Client;
let endpointId: string;
let deliveryId: string;
let conversationId: string;

async function seedMessages(partnerId: string, channelId: string) {
  const now = Date.now();
  const contact = 'con_pgconsole';
  conversationId = 'cnv_pgconsole';
  await s.ctx.store.run(
    sql`INSERT INTO contacts (id, partner_id, name, phone, created_at, updated_at)
        VALUES (${contact}, ${partnerId}, 'Carla', '+15550002222', ${now}, ${now})`,
  );
  await s.ctx.store.run(
    sql`INSERT INTO conversations (id, partner_id, contact_id, channel_type, status, last_message_at, last_inbound_at, created_at, updated_at)
        VALUES (${conversationId}, ${partnerId}, ${contact}, 'sms', 'open', ${now}, ${now}, ${now}, ${now})`,
  );
  const rows: [string, string, string, number | null][] = [
    ['msg_pgc_out', 'outbound', 'delivered', null],
    ['msg_pgc_in', 'inbound', 'received', null],
    ['msg_pgc_later', 'outbound', 'scheduled', now + 3_600_000],
  ];
  for (const [i, [id, direction, status, sendAt]] of rows.entries()) {
    await s.ctx.store.run(
      sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, conversation_id, contact_id, "to", "from",
            content, status, price, segments, send_at, created_at, updated_at)
          VALUES (${id}, ${partnerId}, ${direction}, 'sms', ${channelId}, ${conversationId}, ${contact},
            ${direction === 'outbound' ? '+15550002222' : '+15550000001'}, ${direction === 'outbound' ? '+15550000001' : '+15550002222'},
            '{"kind":"text","text":"hi"}', ${status}, ${direction === 'outbound' ? 7500 : 0}, 1, ${sendAt}, ${now + i}, ${now + i})`,
    );
  }
  await s.ctx.store.run(
    sql`INSERT INTO message_status_history (message_id, status, occurred_at, created_at)
        VALUES ('msg_pgc_out', 'delivered', ${now + 5}, ${now + 5})`,
  );
  // The scheduled message's price, debited as its acceptance would: its cancel refunds it.
  await s.ctx.store.run(sql`UPDATE partners SET balance = balance - 7500 WHERE id = ${partnerId}`);
  await s.ctx.store.run(
    sql`INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, actor, created_at)
        SELECT id, 'debit', -7500, balance, 'msg_pgc_later', 'test', ${now} FROM partners WHERE id = ${partnerId}`,
  );
  endpointId = (await createEndpoint(s.ctx, partnerId, { url: 'https://hooks.acme.example/msgd' })).endpoint.id;
  deliveryId = 'dlv_pgconsole';
  await s.ctx.store.run(
    sql`INSERT INTO events (id, partner_id, type, payload, fanned_out, created_at)
        VALUES ('evt_pgconsole', ${partnerId}, 'message.delivered', '{"message_id":"msg_pgc_out"}', 1, ${now})`,
  );
  await s.ctx.store.run(
    sql`INSERT INTO webhook_deliveries (id, event_id, endpoint_id, partner_id, status, attempts, last_status_code, created_at, updated_at)
        VALUES (${deliveryId}, 'evt_pgconsole', ${endpointId}, ${partnerId}, 'delivered', 1, 200, ${now}, ${now})`,
  );
}

beforeAll(async () => {
  s = await startTestServer({}, { env: { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY } });
  acme = await setupPartner(s.ctx, { slug: 'acme', balance: '10.00', prices: { sms: '0.0075' } });
  const { channel } = await connect(s.ctx, acme.partnerId, { kind: 'sandbox', name: 'sbx' }, 'sms', '+15550000001');
  await seedMessages(acme.partnerId, channel.id);
  admin = (await loggedIn(s.ctx, s.url, acme.partnerId)).client;
}, 30_000);

afterAll(async () => {
  await s?.stop();
});

const heading = (html: string) =>
  /<h1[^>]*>([\s\S]*?)<\/h1>/
    .exec(html)?.[1]
    .replace(/<[^>]+>/g, '')
    .trim();

describe('the console on PostgreSQL', () => {
  it('every page answers 200 with its heading', async () => {
    const pages: [string, RegExp][] = [
      ['/ui/overview', /overview|acme/i],
      ['/ui/messages', /messages/i],
      ['/ui/messages?status=failed', /messages/i],
      ['/ui/messages/msg_pgc_out', /msg_pgc_out|message/i],
      ['/ui/messages/msg_pgc_in', /msg_pgc_in|message/i],
      [`/ui/conversations`, /conversations/i],
      [`/ui/conversations/${conversationId}`, /carla|conversation/i],
      ['/ui/channels', /channels/i],
      ['/ui/templates', /templates/i],
      ['/ui/ledger', /ledger/i],
      ['/ui/tokens', /tokens/i],
      ['/ui/webhooks', /webhook endpoints/i],
      [`/ui/webhooks/${endpointId}`, /hooks\.acme\.example|endpoint/i],
      [`/ui/webhooks/${endpointId}/deliveries/${deliveryId}`, /deliver/i],
      ['/ui/suppressions', /suppressions/i],
      ['/ui/users', /users/i],
      ['/ui/partners', /partners/i],
      ['/ui/account', /account/i],
      ['/ui/account/2fa', /two-factor/i],
    ];
    const failed: string[] = [];
    for (const [path, h] of pages) {
      const r = await admin.get(path);
      const title = heading(r.text);
      if (r.status !== 200 || !title || !h.test(title)) failed.push(`${path}: ${r.status} <h1>${title}</h1>`);
    }
    expect(failed).toEqual([]);
    for (const csv of ['/ui/ledger.csv', '/ui/suppressions.csv']) {
      const r = await admin.get(csv);
      expect(r.status, csv).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/text\/csv/);
    }
  });

  it("a message's page shows its history; its cancel refunds the scheduled one", async () => {
    const page = await admin.get('/ui/messages/msg_pgc_out');
    expect(page.text).toMatch(/queued/);
    expect(page.text).toMatch(/delivered/);
    await admin.get('/ui/messages/msg_pgc_later');
    const r = await admin.post('/ui/messages/msg_pgc_later/cancel', {});
    expect(r.status).toBe(303);
    const after = await admin.get(r.headers.get('location')!);
    expect(after.text.match(/Cancel[^<]*/g)).toEqual(['Canceled; 0.0075 USD refunded.']);
    const m = await s.ctx.store.get<{ status: string }>(sql`SELECT status FROM messages WHERE id = 'msg_pgc_later'`);
    expect(m?.status).toBe('canceled');
  });

  it('/v1 gives a message with its history', async () => {
    const r = await fetch(`${s.url}/v1/messages/msg_pgc_out`, { headers: { authorization: `Bearer ${acme.token}` } });
    expect(r.status).toBe(200);
    const body = (await r.json()) as { id: string; status: string; history: { status: string }[] };
    expect(body).toMatchObject({ id: 'msg_pgc_out', status: 'delivered' });
    expect(body.history.map((h) => h.status)).toEqual(['queued', 'delivered']);
  });
});
