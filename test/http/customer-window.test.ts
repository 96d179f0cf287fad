import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { unassignChannel } from '../../src/core/channels.js';
import { updateGateway } from '../../src/core/gateways.js';
import { createSuppression } from '../../src/core/suppressions.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { asciiJson, metaHeaders, pageEvent, postWebhook, waInbound } from '../fakes/webhook-senders.js';
import { connect, postJson, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { processed } from '../helpers/webhook-log.js';
import { balanceOf } from '../helpers/rows.js';
import { sql } from '../../src/db/sql.js';

// Meta's 24-hour customer-service window, enforced by msgd before any cost: a free-form
// WhatsApp, Messenger or Instagram message to a customer who has not written to that number
// or page in 24 hours is a 400 outside_customer_service_window on both send APIs, with no
// debit and no provider call. Templates and tagged Messenger/Instagram messages pass; an
// inbound message, taken through the real signed webhook path, opens the window.

const PHONE_ID = '106540352242922';
const PHONE_ID_2 = '106540352242999';
const PAGE = '682498302938465';
const SECRET = 'app-secret';
const SENDER = '+15550783881';
const HOUR = 3_600_000;

let graph: GraphFake;
let s: TestServer;
let p: Awaited<ReturnType<typeof setupPartner>>;
let waGateway: string;
let fbGateway: string;

const balance = () => balanceOf(s.ctx, p.partnerId);
const messageCount = async () =>
  (await s.ctx.store.get<{ n: number }>(sql`SELECT COUNT(*) AS n FROM messages WHERE partner_id = ${p.partnerId}`))!.n;

beforeAll(async () => {
  graph = await startGraphFake({
    accounts: [
      { id: PHONE_ID, kind: 'whatsapp', token: 'EAA-wa' },
      { id: PHONE_ID_2, kind: 'whatsapp', token: 'EAA-wa2' },
      { id: PAGE, kind: 'page', token: 'EAA-page' },
    ],
  });
  s = await startTestServer({ 'log.level': 'warn' });
  p = await setupPartner(s.ctx, { balance: '10.00', prices: { whatsapp: '0.05', messenger: '0.01' } });
  waGateway = (
    await connect(
      s.ctx,
      p.partnerId,
      {
        kind: 'whatsapp_cloud',
        settings: { base_url: graph.url, phone_number_id: PHONE_ID },
        secrets: { access_token: 'EAA-wa', app_secret: SECRET },
      },
      'whatsapp',
      SENDER,
    )
  ).gateway.id;
  fbGateway = (
    await connect(
      s.ctx,
      p.partnerId,
      {
        kind: 'meta_messenger',
        settings: { base_url: graph.url, page_id: PAGE },
        secrets: { page_access_token: 'EAA-page', app_secret: SECRET },
      },
      'messenger',
    )
  ).gateway.id;
});
afterAll(async () => {
  await s.stop();
  await graph.close();
});
beforeEach(() => graph.reset());

const sendWa = (body: Record<string, unknown>, token = p.token) =>
  postJson(`${s.url}/api/send-whatsapp.php`, body, token);
const sendV1 = (body: Record<string, unknown>) => postJson(`${s.url}/v1/messages`, body, p.token);

/** A customer's WhatsApp message, signed and posted as Meta does, processed. */
async function customerWrites(from: string, sentAt = Date.now(), phoneId = PHONE_ID) {
  const body = asciiJson(
    waInbound(phoneId, {
      from: from.slice(1),
      id: `wamid.${Math.random().toString(36).slice(2)}`,
      timestamp: String(Math.floor(sentAt / 1000)),
      text: { body: 'hi' },
    }),
  );
  const res = await postWebhook(`${s.url}/api/webhook.php`, body, metaHeaders(SECRET, body));
  expect(res.status).toBe(200);
  expect((await processed(s.ctx, res.json.id)).processing).toBe('processed');
}

function expectOutside(r: { status: number; body: any }, hint: RegExp) {
  expect(r.status).toBe(400);
  expect(r.body.error.code).toBe('outside_customer_service_window');
  expect(r.body.error.message).toMatch(hint);
  expect(r.body.error.details).toEqual([{ field: 'to', message: 'outside the 24-hour customer-service window' }]);
}

describe('WhatsApp', () => {
  it('refuses a free-form message to a customer who never wrote, on both APIs, before any cost', async () => {
    const before = [await balance(), await messageCount()];
    expectOutside(await sendWa({ to: '+16505550001', text: 'hello' }), /template/);
    expectOutside(await sendV1({ channel: 'whatsapp', to: '+16505550001', body: 'hello' }), /template/);
    expect([await balance(), await messageCount()]).toEqual(before);
    expect(graph.requests).toHaveLength(0);
  });

  it('answers a suppressed recipient outside the window with recipient_suppressed, the earlier rule', async () => {
    const who = '+16505550011';
    await createSuppression(
      s.ctx,
      p.partnerId,
      { channel: 'whatsapp', address: who, reason: 'unsubscribe' },
      'operator:test',
    );
    const before = [await balance(), await messageCount()];
    for (const r of [
      await sendWa({ to: who, text: 'hello' }),
      await sendV1({ channel: 'whatsapp', to: who, body: 'hello' }),
    ]) {
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('recipient_suppressed');
      expect(r.body.error.details).toMatchObject([{ field: 'to', code: 'unsubscribe' }]);
    }
    expect([await balance(), await messageCount()]).toEqual(before);
    expect(graph.requests).toHaveLength(0);
  });

  it('lets a template through outside the window', async () => {
    const before = await balance();
    const r = await sendWa({ to: '+16505550002', type: 'template', template: 'order_shipped', language: 'en_US' });
    expect(r.status, r.text).toBe(200);
    expect(before - (await balance())).toBe(50_000);
    await waitFor(() => graph.requests.length === 1, 'the template to reach Graph', 5000);
  });

  it('opens when the customer writes, for 24 hours from their message, and shows on the conversation', async () => {
    const who = '+16505550003';
    const wrote = Date.now() - 2 * HOUR;
    await customerWrites(who, wrote);
    const r = await sendV1({ channel: 'whatsapp', to: who, body: 'thanks for writing' });
    expect(r.status, r.text).toBe(200);
    expect((await sendWa({ to: who, text: 'and again' })).status).toBe(200);
    await waitFor(() => graph.requests.length === 2, 'both messages to reach Graph', 5000);

    const conv = (await postJsonGet(`/v1/messages/${r.body.id}`).then((m) =>
      postJsonGet(`/v1/conversations/${m.conversation_id}`),
    )) as any;
    expect(conv.window_expires_at).toBe(new Date(Math.floor(wrote / 1000) * 1000 + 24 * HOUR).toISOString());
    // Another customer's conversation says nothing of this one's window.
    expect(conv.contact.phone).toBe(who);
  });

  it('is closed when the customer last wrote more than 24 hours ago; the conversation says when it closed', async () => {
    const who = '+16505550004';
    const wrote = Date.now() - 25 * HOUR;
    await customerWrites(who, wrote);
    const before = await balance();
    expectOutside(await sendWa({ to: who, text: 'too late' }), /template/);
    expect(await balance()).toBe(before);
    const list = await postJsonGet(`/v1/conversations?contact=${await contactId(who)}`);
    expect(Date.parse(list.data[0].window_expires_at)).toBeLessThan(Date.now());
    // A message they send now opens it again.
    await customerWrites(who);
    expect((await sendWa({ to: who, text: 'welcome back' })).status).toBe(200);
  });

  it('a retry with the same Idempotency-Key gets its first answer after the window closed', async () => {
    const who = '+16505550009';
    await customerWrites(who);
    const body = { to: who, text: 'sent in time' };
    const first = await postJson(`${s.url}/api/send-whatsapp.php`, body, p.token, { 'idempotency-key': 'cw-1' });
    expect(first.status).toBe(200);
    // The customer's last message is now 25 hours old.
    await s.ctx.store.run(
      sql`UPDATE messages SET sent_at = sent_at - ${25 * HOUR} WHERE partner_id = ${p.partnerId} AND "from" = ${who}`,
    );
    await s.ctx.store.run(
      sql`UPDATE conversations SET last_inbound_at = last_inbound_at - ${25 * HOUR} WHERE contact_id = ${await contactId(who)}`,
    );
    const before = await balance();
    const again = await postJson(`${s.url}/api/send-whatsapp.php`, body, p.token, { 'idempotency-key': 'cw-1' });
    expect([again.status, again.body, again.headers.get('idempotent-replayed')]).toEqual([200, first.body, 'true']);
    expect(await balance()).toBe(before);
    expectOutside(await sendWa({ to: who, text: 'a new one' }), /template/);
    // Sent once, before the next test looks at what reached Graph.
    await waitFor(() => graph.requests.some((r) => r.body.to === '16505550009'), 'the message to reach Graph', 5000);
    expect(graph.requests.filter((r) => r.body.to === '16505550009')).toHaveLength(1);
  });

  it('keeps the order of checks: 402 for exhausted funds and 400 for a bad payload come first', async () => {
    const poor = await setupPartner(s.ctx, { balance: '0', prices: { whatsapp: '0.05' } });
    await connect(
      s.ctx,
      poor.partnerId,
      {
        kind: 'whatsapp_cloud',
        settings: { base_url: graph.url, phone_number_id: '106540352240001' },
        secrets: { access_token: 'x' },
      },
      'whatsapp',
      '+15550783899',
    );
    const r = await sendWa({ to: '+16505550005', text: 'x' }, poor.token);
    expect([r.status, r.body.error.code]).toEqual([402, 'insufficient_balance']);
    const bad = await sendWa({ to: 'not a number', text: 'x' });
    expect([bad.status, bad.body.error.code]).toEqual([400, 'invalid_request']);
  });

  it('customer_service_window=off on the gateway sends anyway (the provider decides)', async () => {
    await updateGateway(s.ctx, waGateway, { settings: { customer_service_window: 'off' } }, 'test');
    try {
      expect((await sendWa({ to: '+16505550007', text: 'not enforced' })).status).toBe(200);
      await waitFor(() => graph.requests.length === 1, 'the message to reach Graph', 5000);
    } finally {
      await updateGateway(s.ctx, waGateway, { unsetSettings: ['customer_service_window'] }, 'test');
    }
    expectOutside(await sendWa({ to: '+16505550008', text: 'enforced again' }), /template/);
  });
  // Last: it moves the partner's WhatsApp channel to another number.
  it('belongs to the business number: a message to the number used before does not open it for a new one', async () => {
    const who = '+16505550006';
    await customerWrites(who);
    await unassignChannel(s.ctx, { partner: p.partnerId, type: 'whatsapp' }, 'test');
    await connect(
      s.ctx,
      p.partnerId,
      {
        kind: 'whatsapp_cloud',
        settings: { base_url: graph.url, phone_number_id: PHONE_ID_2 },
        secrets: { access_token: 'EAA-wa2', app_secret: SECRET },
      },
      'whatsapp',
      '+15550783882',
    );
    expectOutside(await sendWa({ to: who, text: 'from the new number' }), /\+15550783882/);
    await customerWrites(who, Date.now(), PHONE_ID_2);
    expect((await sendWa({ to: who, text: 'now' })).status).toBe(200);
    await waitFor(() => graph.requests.find((r) => r.path.includes(PHONE_ID_2)), 'the send from the new number', 5000);
  });
});

describe('Messenger', () => {
  const PSID = '6543210987654321';

  it('refuses outside the window and says a message tag would pass', async () => {
    const before = await balance();
    expectOutside(await sendWa({ channel: 'messenger', to: PSID, text: 'hello' }), /message tag/);
    expectOutside(await sendV1({ channel: 'messenger', to: PSID, body: 'hello' }), /MESSAGE_TAG/);
    expect(await balance()).toBe(before);
    expect(graph.requests.filter((r) => r.path.includes(PAGE))).toHaveLength(0);
  });

  it('a tag configured on the gateway lets the message through, with the tag', async () => {
    await updateGateway(s.ctx, fbGateway, { settings: { messaging_type: 'MESSAGE_TAG', tag: 'HUMAN_AGENT' } }, 'test');
    try {
      expect((await sendV1({ channel: 'messenger', to: PSID, body: 'an agent replies' })).status).toBe(200);
      const sent = await waitFor(() => graph.requests.find((r) => r.path.includes(PAGE)), 'the tagged message', 5000);
      expect(sent.body).toMatchObject({ messaging_type: 'MESSAGE_TAG', tag: 'HUMAN_AGENT' });
    } finally {
      await updateGateway(
        s.ctx,
        fbGateway,
        { settings: { messaging_type: 'RESPONSE' }, unsetSettings: ['tag'] },
        'test',
      );
    }
  });

  it('opens when the customer writes to the page', async () => {
    const body = asciiJson(
      pageEvent(PAGE, [
        { sender: { id: PSID }, recipient: { id: PAGE }, timestamp: Date.now(), message: { mid: 'm_1', text: 'hi' } },
      ]),
    );
    const res = await postWebhook(`${s.url}/api/webhook-messenger.php`, body, metaHeaders(SECRET, body));
    expect(res.status).toBe(200);
    await processed(s.ctx, res.json.id);
    expect((await sendV1({ channel: 'messenger', to: PSID, body: 'hello back' })).status).toBe(200);
  });
});

async function contactId(phone: string): Promise<string> {
  return (await s.ctx.store.get<{ id: string }>(
    sql`SELECT id FROM contacts WHERE partner_id = ${p.partnerId} AND phone = ${phone}`,
  ))!.id;
}

async function postJsonGet(path: string): Promise<any> {
  const r = await fetch(s.url + path, { headers: { authorization: `Bearer ${p.token}` } });
  expect(r.status).toBe(200);
  return r.json();
}
