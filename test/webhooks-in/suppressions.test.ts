import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { getMessageRowIn } from '../../src/core/messages.js';
import { setOptOutScope } from '../../src/core/suppressions.js';
import { startSendgridFake, type SendgridFake } from '../fakes/sendgrid.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { postWebhook, sendgridSigner, twilioForm, twilioHeaders, type TwilioParams } from '../fakes/webhook-senders.js';
import { connect, postJson, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { processed } from '../helpers/webhook-log.js';
import { waitFor } from '../helpers/wait.js';

// The suppression list filled from real signed provider webhooks and provider refusals: a
// Twilio STOP and START, SendGrid bounce, spamreport, dropped and group events, Twilio 21610;
// and the next send refused before cost.

const SID = 'AC00000000000000000000000000000000';
const TOKEN = 'test_auth_token';
const SMS_FROM = '+15017250604';
const SMS_OTHER = '+15017250605';
let twilio: TwilioFake;
let sendgrid: SendgridFake;
let s: TestServer;
let p: Awaited<ReturnType<typeof setupPartner>>;
let twilioGw: string;
let twilioGw2: string;
const signer = sendgridSigner();

beforeAll(async () => {
  twilio = await startTwilioFake({ accounts: { [SID]: TOKEN } });
  sendgrid = await startSendgridFake({ apiKeys: ['SG.key'] });
  s = await startTestServer({ 'suppressions.optOutKeywords': ['STOP', 'ARRET'] });
  p = await setupPartner(s.ctx, { balance: '10.00', prices: { sms: '0.01', email: '0.002' } });
  const twilioGateway = {
    kind: 'twilio',
    settings: { base_url: twilio.url, account_sid: SID },
    secrets: { auth_token: TOKEN },
  };
  twilioGw = (await connect(s.ctx, p.partnerId, twilioGateway, 'sms', SMS_FROM)).gateway.id;
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
  // A second partner on another Twilio number of the same account.
  const q = await setupPartner(s.ctx, { balance: '1.00', prices: { sms: '0.01' } });
  twilioGw2 = (await connect(s.ctx, q.partnerId, twilioGateway, 'sms', SMS_OTHER)).gateway.id;
});
afterAll(async () => {
  await s.stop();
  await twilio.close();
  await sendgrid.close();
});

const balance = async () =>
  ((await s.ctx.store.get(sql`SELECT balance FROM partners WHERE id = ${p.partnerId}`)) as { balance: number }).balance;
const entries = async (address: string) =>
  (await s.ctx.store.all(
    sql`SELECT reason, scope, group_id, source, detail FROM suppressions WHERE address = ${address} ORDER BY id`,
  )) as { reason: string; scope: string; group_id: string; source: string; detail: string | null }[];

let sidN = 0;
async function inboundSms(from: string, body: string, gatewayId = twilioGw, to = SMS_FROM) {
  const sid = `SM${String(++sidN).padStart(32, '0')}`;
  const params: TwilioParams = {
    ToCountry: 'US',
    SmsMessageSid: sid,
    NumMedia: '0',
    Body: body,
    From: from,
    To: to,
    MessageSid: sid,
    SmsSid: sid,
    SmsStatus: 'received',
    AccountSid: SID,
    NumSegments: '1',
    ApiVersion: '2010-04-01',
  };
  const url = `${s.url}/api/webhook.php?gateway=${gatewayId}`;
  const res = await postWebhook(url, twilioForm(params), twilioHeaders(TOKEN, url, params));
  expect(res.status).toBe(200);
  expect((await processed(s.ctx, res.headers.get('x-msgd-webhook-id')!)).processing).toBe('processed');
}

const sendSms = (to: string, text = 'hello') => postJson(`${s.url}/api/send-sms.php`, { to, text }, p.token);

describe('SMS opt-out keywords (signed Twilio inbound)', () => {
  it('STOP suppresses the sender for the number replied to; the next send is refused before cost; START lifts it', async () => {
    const customer = '+14155551001';
    await inboundSms(customer, '  stop ');
    expect(await entries(customer)).toEqual([
      expect.objectContaining({ reason: 'opt_out_keyword', scope: SMS_FROM, source: expect.stringMatching(/^msg_/) }),
    ]);
    // The STOP itself is an inbound message the partner sees.
    const received = (await s.ctx.store.get(
      sql`SELECT count(*) AS n FROM events WHERE partner_id = ${p.partnerId} AND type = 'message.received'`,
    )) as { n: number };
    expect(received.n).toBeGreaterThan(0);
    const before = await balance();
    const refused = await sendSms(customer);
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('recipient_suppressed');
    expect(refused.body.error.details[0]).toMatchObject({ field: 'to', code: 'opt_out_keyword' });
    expect(await balance()).toBe(before);

    await inboundSms(customer, 'HELP');
    expect(await entries(customer)).toHaveLength(1);
    await inboundSms(customer, 'Stop sending me this');
    expect(await entries(customer)).toHaveLength(1);

    await inboundSms(customer, 'Start');
    expect(await entries(customer)).toEqual([]);
    expect((await sendSms(customer)).status).toBe(200);
    const deleted = (await s.ctx.store.all(
      sql`SELECT payload FROM events WHERE partner_id = ${p.partnerId} AND type = 'suppression.deleted'`,
    )) as { payload: string }[];
    expect(deleted.map((d) => JSON.parse(d.payload).deleted_by)).toContainEqual(expect.stringMatching(/^msg_/));
  });

  it('takes the operator’s keywords (ARRET); a STOP to another partner’s number is that partner’s', async () => {
    const customer = '+14155551002';
    await inboundSms(customer, 'arret');
    expect(await entries(customer)).toHaveLength(1);
    const other = '+14155551003';
    await inboundSms(other, 'STOP', twilioGw2, SMS_OTHER);
    expect(await entries(other)).toEqual([expect.objectContaining({ scope: SMS_OTHER })]);
    expect((await sendSms(other)).status).toBe(200);
  });

  it('applies partner-wide when the partner chose so', async () => {
    await setOptOutScope(s.ctx, p.partnerId, 'partner', 'test');
    try {
      const customer = '+14155551004';
      await inboundSms(customer, 'STOP');
      expect(await entries(customer)).toEqual([expect.objectContaining({ scope: '' })]);
    } finally {
      await setOptOutScope(s.ctx, p.partnerId, 'sender', 'test');
    }
  });
});

describe('a provider refusing a send because the recipient opted out', () => {
  it('Twilio 21610: the message fails and is refunded, the recipient is suppressed, the next send refused before cost', async () => {
    const customer = '+14155551005';
    twilio.failFor(customer, { kind: 'error', code: 21610 });
    const before = await balance();
    const res = await sendSms(customer, 'will be refused');
    expect(res.status).toBe(200);
    const m = await waitFor(
      async () => {
        const m = await getMessageRowIn(s.ctx.store, res.body.id);
        return m?.status === 'failed' ? m : undefined;
      },
      'the send to fail',
      10_000,
    );
    expect(m).toMatchObject({ error_code: '21610', refunded: 1 });
    expect(await entries(customer)).toEqual([
      expect.objectContaining({ reason: 'provider_refused', scope: SMS_FROM, source: m.id }),
    ]);
    expect(await balance()).toBe(before);
    const requests = twilio.requests.length;
    const again = await sendSms(customer);
    expect(again.status).toBe(400);
    expect(again.body.error.details[0].code).toBe('provider_refused');
    expect(await balance()).toBe(before);
    expect(twilio.requests.length).toBe(requests);
    // START lifts the carrier's block too.
    twilio.clearFaults();
    await inboundSms(customer, 'UNSTOP');
    expect(await entries(customer)).toEqual([]);
  });
});

async function sentEmail(to: string) {
  const res = await postJson(`${s.url}/api/send-email.php`, { to, subject: 'Hi', html: '<p>Hello</p>' }, p.token);
  expect(res.status).toBe(200);
  return waitFor(
    async () => {
      const m = await getMessageRowIn(s.ctx.store, res.body.id);
      return m?.status === 'sent' ? m : undefined;
    },
    'the email to be sent',
    10_000,
  );
}

async function sendgridBatch(events: Record<string, unknown>[]) {
  const body = `${JSON.stringify(events)}\r\n`;
  const res = await postWebhook(`${s.url}/api/webhook.php`, body, signer.headers(body));
  expect(res.status).toBe(200);
  expect((await processed(s.ctx, res.json.id)).processing).toBe('processed');
}

describe('SendGrid events (signed batches)', () => {
  it('bounce and spamreport suppress; a blocked bounce does not; the next send is refused before cost', async () => {
    const addrs = ['hard@example.com', 'blocked@example.com', 'spam@example.com'];
    const [hard, blocked, spam] = await Promise.all(addrs.map(sentEmail));
    const t = Math.floor(Date.now() / 1000);
    const ev = (m: { id: string; provider_message_id: string | null }, email: string, extra: object, n: string) => ({
      email,
      timestamp: t,
      sg_event_id: `ev-${n}`,
      sg_message_id: `${m.provider_message_id}.filter0001.1.1.0`,
      msgd_message_id: m.id,
      ...extra,
    });
    await sendgridBatch([
      ev(
        hard,
        'hard@example.com',
        { event: 'bounce', type: 'bounce', status: '5.1.1', reason: '550 5.1.1 no such user' },
        '1',
      ),
      ev(
        blocked,
        'blocked@example.com',
        { event: 'bounce', type: 'blocked', status: '5.7.1', reason: '550 5.7.1 blocked' },
        '2',
      ),
      ev(spam, 'spam@example.com', { event: 'spamreport' }, '3'),
    ]);
    expect(await entries('hard@example.com')).toEqual([
      expect.objectContaining({ reason: 'hard_bounce', scope: '', source: hard.id, detail: '550 5.1.1 no such user' }),
    ]);
    expect(await entries('blocked@example.com')).toEqual([]);
    expect(await entries('spam@example.com')).toEqual([
      expect.objectContaining({ reason: 'spam_report', source: spam.id }),
    ]);

    const before = await balance();
    for (const [to, code] of [
      ['HARD@example.com', 'hard_bounce'],
      ['spam@example.com', 'spam_report'],
    ]) {
      const r = await postJson(`${s.url}/api/send-email.php`, { to, subject: 'Again', html: '<p>x</p>' }, p.token);
      expect(r.status).toBe(400);
      expect(r.body.error.details[0].code).toBe(code);
    }
    expect(await balance()).toBe(before);
    expect(
      (
        await postJson(
          `${s.url}/api/send-email.php`,
          { to: 'blocked@example.com', subject: 'A', html: '<p>x</p>' },
          p.token,
        )
      ).status,
    ).toBe(200);
  });

  it('dropped for a bounced or invalid address suppresses, other drops do not; group unsubscribe and resubscribe', async () => {
    const [d1, d2, d3, g] = await Promise.all(
      ['drop1@example.com', 'drop2@example.com', 'drop3@example.com', 'group@example.com'].map(sentEmail),
    );
    const t = Math.floor(Date.now() / 1000);
    const ev = (m: { id: string }, email: string, extra: object, n: string) => ({
      email,
      timestamp: t,
      sg_event_id: `dr-${n}`,
      msgd_message_id: m.id,
      ...extra,
    });
    await sendgridBatch([
      ev(d1, 'drop1@example.com', { event: 'dropped', reason: 'Bounced Address', status: '5.0.0' }, '1'),
      ev(d2, 'drop2@example.com', { event: 'dropped', reason: 'Invalid', status: '5.0.0' }, '2'),
      ev(d3, 'drop3@example.com', { event: 'dropped', reason: 'Invalid SMTPAPI header', status: '5.0.0' }, '3'),
      ev(g, 'group@example.com', { event: 'group_unsubscribe', asm_group_id: 42 }, '4'),
    ]);
    expect((await entries('drop1@example.com')).map((e) => e.reason)).toEqual(['hard_bounce']);
    expect((await entries('drop2@example.com')).map((e) => e.reason)).toEqual(['hard_bounce']);
    expect(await entries('drop3@example.com')).toEqual([]);
    expect(await entries('group@example.com')).toEqual([
      expect.objectContaining({ reason: 'group_unsubscribe', group_id: '42' }),
    ]);
    // A group unsubscribe stops that group's mail at SendGrid; msgd's send names no group.
    expect(
      (
        await postJson(
          `${s.url}/api/send-email.php`,
          { to: 'group@example.com', subject: 'A', html: '<p>x</p>' },
          p.token,
        )
      ).status,
    ).toBe(200);
    await sendgridBatch([ev(g, 'group@example.com', { event: 'group_resubscribe', asm_group_id: 42 }, '5')]);
    expect(await entries('group@example.com')).toEqual([]);
  });
});
