import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { startSendgridFake, type SendgridFake } from '../fakes/sendgrid.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import {
  asciiJson,
  metaHeaders,
  pageEvent,
  postWebhook,
  sendgridSigner,
  twilioForm,
  twilioHeaders,
  waInbound,
  type TwilioParams,
} from '../fakes/webhook-senders.js';
import { connect, postJson, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

// A provider may relay a NUL character (U+0000) in any text it carries: JSON "\u0000" in a
// WhatsApp or Messenger message, a contact's profile name or a SendGrid bounce reason, %00 in a
// Twilio form's Body. SQLite keeps one, PostgreSQL's text cannot (22021). On both stores the
// webhook is processed, and what the partner sees has each NUL as U+FFFD (docs/webhooks-in.md);
// the stored request keeps the provider's exact bytes. config/vitest.pg.config.ts runs this file
// on PostgreSQL too.

const SECRET = 'meta-app-secret';
const PHONE_ID = '106540352242922';
const PAGE = '682498302938465';
const TW_SID = 'AC00000000000000000000000000000000';
const TW_TOKEN = 'test_auth_token';
const TW_NUMBER = '+15017250604';
const NUL = '\u0000';
const FFFD = '\uFFFD';

let s: TestServer;
let graph: GraphFake;
let twilio: TwilioFake;
let sendgrid: SendgridFake;
let p: Awaited<ReturnType<typeof setupPartner>>;
const signer = sendgridSigner();

beforeAll(async () => {
  graph = await startGraphFake({
    accounts: [
      { id: PHONE_ID, kind: 'whatsapp', token: 'EAA-wa' },
      { id: PAGE, kind: 'page', token: 'PAGE-TOKEN' },
    ],
  });
  twilio = await startTwilioFake({ accounts: { [TW_SID]: TW_TOKEN } });
  sendgrid = await startSendgridFake();
  sendgrid.apiKeys.add('SG.key');
  s = await startTestServer();
  p = await setupPartner(s.ctx, { balance: '10.00', prices: { email: '0.01' } });
  await connect(
    s.ctx,
    p.partnerId,
    {
      kind: 'whatsapp_cloud',
      settings: { base_url: graph.url, phone_number_id: PHONE_ID, customer_service_window: 'off' },
      secrets: { access_token: 'EAA-wa', app_secret: SECRET },
    },
    'whatsapp',
    '+15550783881',
  );
  await connect(
    s.ctx,
    p.partnerId,
    {
      kind: 'meta_messenger',
      settings: { base_url: graph.url, page_id: PAGE, customer_service_window: 'off' },
      secrets: { page_access_token: 'PAGE-TOKEN', app_secret: SECRET },
    },
    'messenger',
  );
  await connect(
    s.ctx,
    p.partnerId,
    { kind: 'twilio', settings: { base_url: twilio.url, account_sid: TW_SID }, secrets: { auth_token: TW_TOKEN } },
    'sms',
    TW_NUMBER,
  );
  await connect(
    s.ctx,
    p.partnerId,
    {
      kind: 'sendgrid',
      settings: { base_url: sendgrid.url },
      secrets: { api_key: 'SG.key', webhook_public_key: signer.publicKey },
    },
    'email',
    'news@acme.example',
  );
}, 60_000);
afterAll(async () => {
  await s?.stop();
  await graph?.close();
  await twilio?.close();
  await sendgrid?.close();
});

async function apiGet(path: string): Promise<any> {
  const res = await fetch(`${s.url}${path}`, { headers: { authorization: `Bearer ${p.token}` } });
  expect(res.status).toBe(200);
  return res.json();
}

/** The webhook as the log keeps it, once processing has settled it. */
async function settled(id: string) {
  return waitFor(
    async () => {
      const r = await s.ctx.store.get<{ processing: string; error: string | null; body: Uint8Array | null }>(
        sql`SELECT processing, error, body FROM provider_webhooks WHERE id = ${id}`,
      );
      return r && r.processing !== 'pending' ? r : undefined;
    },
    `webhook ${id} processed`,
    15_000,
  );
}

/** Post the exact bytes, expect a 200, and check the log: processed, the body stored as sent. */
async function deliver(url: string, raw: string, headers: Record<string, string>) {
  const res = await postWebhook(url, raw, headers);
  expect(res.status).toBe(200);
  const row = await settled(res.headers.get('x-msgd-webhook-id')!);
  expect({ processing: row.processing, error: row.error }).toEqual({ processing: 'processed', error: null });
  expect(Buffer.from(row.body!).equals(Buffer.from(raw))).toBe(true);
}

/** The partner's inbound message with this provider id, as GET /v1/messages lists it. */
async function inbound(providerId: string): Promise<any> {
  const list = await apiGet('/v1/messages?limit=100');
  const m = list.data.find((x: any) => x.provider_message_id === providerId);
  expect(m).toBeDefined();
  return m;
}

async function contactOf(m: any): Promise<any> {
  return apiGet(`/v1/contacts/${m.contact_id}`);
}

async function noneDead() {
  const dead = await s.ctx.store.all<{ kind: string; last_error: string | null }>(
    sql`SELECT kind, last_error FROM jobs WHERE state = 'dead'`,
  );
  expect(dead).toEqual([]);
}

describe('a NUL character in a provider webhook', () => {
  it('WhatsApp: the text and profile name arrive with U+FFFD in its place', async () => {
    const raw = asciiJson(
      waInbound(
        PHONE_ID,
        { from: '16505551234', id: 'wamid.NUL1', type: 'text', text: { body: `Hi${NUL}there${NUL}` } },
        { name: `Ann${NUL}Lee` },
      ),
    );
    expect(raw).toContain('\\u0000');
    await deliver(`${s.url}/api/webhook.php`, raw, metaHeaders(SECRET, raw));
    const m = await inbound('wamid.NUL1');
    expect(m).toMatchObject({ direction: 'inbound', channel: 'whatsapp', from: '+16505551234' });
    expect(m.content).toMatchObject({ kind: 'text', text: `Hi${FFFD}there${FFFD}` });
    expect((await contactOf(m)).name).toBe(`Ann${FFFD}Lee`);
    await noneDead();
  });

  it('Messenger: the text arrives with U+FFFD in its place', async () => {
    const raw = asciiJson(
      pageEvent(PAGE, [
        {
          sender: { id: '24795143926770153' },
          recipient: { id: PAGE },
          timestamp: Date.now(),
          message: { mid: 'm_NUL2', text: `${NUL}hello${NUL}` },
        },
      ]),
    );
    await deliver(`${s.url}/api/webhook-messenger.php`, raw, metaHeaders(SECRET, raw));
    const m = await inbound('m_NUL2');
    expect(m).toMatchObject({ direction: 'inbound', channel: 'messenger' });
    expect(m.content).toMatchObject({ kind: 'text', text: `${FFFD}hello${FFFD}` });
    await noneDead();
  });

  it('Twilio: an inbound SMS whose Body and ProfileName hold %00 arrives with U+FFFD', async () => {
    const url = `${s.url}/api/webhook.php`;
    const sid = 'SM22222222222222222222222222222222';
    const params: TwilioParams = {
      AccountSid: TW_SID,
      ApiVersion: '2010-04-01',
      Body: `a${NUL}b`,
      From: '+14155550199',
      MessageSid: sid,
      NumMedia: '0',
      NumSegments: '1',
      ProfileName: `Bo${NUL}b`,
      SmsMessageSid: sid,
      SmsSid: sid,
      SmsStatus: 'received',
      To: TW_NUMBER,
    };
    const raw = twilioForm(params);
    expect(raw).toContain('Body=a%00b');
    await deliver(url, raw, twilioHeaders(TW_TOKEN, url, params));
    const m = await inbound(sid);
    expect(m).toMatchObject({ direction: 'inbound', channel: 'sms', from: '+14155550199' });
    expect(m.content).toMatchObject({ kind: 'text', text: `a${FFFD}b` });
    expect((await contactOf(m)).name).toBe(`Bo${FFFD}b`);
    await noneDead();
  });

  it('SendGrid: a bounce whose reason holds a NUL bounces the email with U+FFFD in its error', async () => {
    const sent = await postJson(
      `${s.url}/api/send-email.php`,
      { to: 'ann@example.com', subject: 'Hi', html: '<p>Hello</p>' },
      p.token,
    );
    expect(sent.status).toBe(200);
    const id = sent.body.id as string;
    const xid = await waitFor(
      async () => {
        const m = await apiGet(`/v1/messages/${id}`);
        return m.status === 'sent' ? (m.provider_message_id as string) : undefined;
      },
      'the email sent',
      10_000,
    );
    const raw = `${JSON.stringify([
      {
        email: 'ann@example.com',
        timestamp: Math.floor(Date.now() / 1000),
        event: 'bounce',
        type: 'bounce',
        reason: `550 5.1.1 no${NUL}such user`,
        status: '5.1.1',
        sg_event_id: `Ym91bmNl${NUL}`,
        sg_message_id: `${xid}.filter0001.1.2.0`,
        msgd_message_id: id,
      },
    ])}\r\n`;
    expect(raw).toContain('\\u0000');
    await deliver(`${s.url}/api/webhook.php`, raw, signer.headers(raw));
    const m = await apiGet(`/v1/messages/${id}`);
    expect(m).toMatchObject({ status: 'bounced', error: { message: `550 5.1.1 no${FFFD}such user` } });
    await noneDead();
  });
});
