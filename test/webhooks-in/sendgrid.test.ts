import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonText } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import { addGateway } from '../../src/core/gateways.js';
import { getMessageRowIn, messageHistoryIn } from '../../src/core/messages.js';
import { startSendgridFake, type SendgridFake } from '../fakes/sendgrid.js';
import { postWebhook, sendgridSigner } from '../fakes/webhook-senders.js';
import { connect, postJson, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { lastRow, processed } from '../helpers/webhook-log.js';
import { SENDGRID_VECTOR } from '../helpers/vectors.js';
import { waitFor } from '../helpers/wait.js';

// SendGrid Event Webhook batches: ECDSA over timestamp + raw body, correlation by the
// X-Message-Id prefix + recipient or by msgd's custom arg, sg_event_id dedupe.

let fake: SendgridFake;
let s: TestServer;
let p: Awaited<ReturnType<typeof setupPartner>>;
const signer = sendgridSigner();
const other = sendgridSigner();

beforeAll(async () => {
  fake = await startSendgridFake({ apiKeys: ['SG.key'] });
  s = await startTestServer();
  p = await setupPartner(s.ctx, { balance: '10.00', prices: { email: '0.002' } });
  // A second account first: the batch must still verify, against the right key.
  await addGateway(
    s.ctx,
    { kind: 'sendgrid', name: 'sg-other', secrets: { api_key: 'SG.other', webhook_public_key: other.publicKey } },
    'test',
  );
  await connect(
    s.ctx,
    p.partnerId,
    {
      kind: 'sendgrid',
      name: 'sg-main',
      settings: { base_url: fake.url },
      secrets: { api_key: 'SG.key', webhook_public_key: signer.publicKey },
    },
    'email',
    'news@acme.example',
  );
});
afterAll(async () => {
  await s.stop();
  await fake.close();
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

const post = (body: string, headers = signer.headers(body)) => postWebhook(`${s.url}/api/webhook.php`, body, headers);

describe('SendGrid event batches', () => {
  it('maps a batch onto its messages: processed (history only), delivered, click, late open, async bounce by custom arg', async () => {
    const good = await sentEmail('to@example.com');
    const bad = await sentEmail('bad@example.com');
    const xid = good.provider_message_id!;
    expect(fake.sent.map((x) => x.messageId)).toContain(xid);
    const t = Math.floor(Date.now() / 1000);
    const events = [
      {
        email: 'to@example.com',
        timestamp: t,
        'smtp-id': `<${xid}@ismtpd-1>`,
        event: 'processed',
        category: ['otp'],
        sg_event_id: 'cHJvY2Vzc2VkLTE',
        sg_message_id: `${xid}.filter0001.1.2.0`,
      },
      {
        email: 'to@example.com',
        timestamp: t + 5,
        event: 'delivered',
        response: '250 OK',
        sg_event_id: 'ZGVsaXZlcmVkLTE',
        sg_message_id: `${xid}.filter0001.1.2.0`,
      },
      {
        email: 'to@example.com',
        timestamp: t + 100,
        event: 'click',
        url: 'https://example.com/x',
        sg_event_id: 'Y2xpY2stMQ',
        sg_message_id: `${xid}.filter0001.1.2.0`,
        msgd_message_id: good.id,
      },
      {
        email: 'to@example.com',
        timestamp: t + 50,
        event: 'open',
        sg_event_id: 'b3Blbi0x',
        sg_message_id: `${xid}.filter0001.1.2.0`,
      },
      {
        email: 'bad@example.com',
        timestamp: t + 6,
        event: 'bounce',
        type: 'blocked',
        reason: '550 5.7.1 blocked',
        status: '5.7.1',
        sg_event_id: 'Ym91bmNlLTE',
        msgd_message_id: bad.id,
      },
      {
        email: 'to@example.com',
        timestamp: t + 200,
        event: 'group_unsubscribe',
        asm_group_id: 1,
        sg_event_id: 'Z3JvdXAtMQ',
        sg_message_id: `${xid}.x`,
      },
    ];
    // SendGrid's docs warn not to strip the trailing CRLF: it is part of what was signed.
    const body = `${JSON.stringify(events)}\r\n`;
    const res = await post(body);
    expect(res.status).toBe(200);
    const r = await processed(s.ctx, res.json.id);
    expect(r).toMatchObject({ provider: 'sendgrid', processing: 'processed', error: null });

    expect((await getMessageRowIn(s.ctx.store, good.id))!.status).toBe('clicked');
    expect((await messageHistoryIn(s.ctx.store, good.id)).map((h) => [h.status, h.provider_status, h.ignored])).toEqual(
      [
        ['queued', null, 0],
        ['sent', null, 0],
        ['processed', 'processed', 1],
        ['delivered', 'delivered', 0],
        ['clicked', 'click', 0],
        ['opened', 'open', 1],
        ['group_unsubscribe', 'group_unsubscribe', 1],
      ],
    );
    // A delivered event's SMTP response ("250 OK") is no error.
    expect((await messageHistoryIn(s.ctx.store, good.id)).find((h) => h.status === 'delivered')).toMatchObject({
      error_code: null,
      error_message: null,
    });
    expect(await getMessageRowIn(s.ctx.store, bad.id)).toMatchObject({
      status: 'bounced',
      error_code: '5.7.1',
      error_message: '550 5.7.1 blocked',
      refunded: 1,
    });

    const again = await post(body);
    expect((await processed(s.ctx, again.json.id)).processing).toBe('duplicate');
    expect(await messageHistoryIn(s.ctx.store, good.id)).toHaveLength(7);
  });

  it('tells the partner of spam reports, unsubscribes and resubscribes (message.complained / unsubscribed / resubscribed), once', async () => {
    const m = await sentEmail('grumpy@example.com');
    const sg = `${m.provider_message_id}.filter0001.3.1.0`;
    const t = Math.floor(Date.now() / 1000);
    const body = `${JSON.stringify([
      { email: 'grumpy@example.com', timestamp: t, event: 'spamreport', sg_event_id: 'c3BhbS0x', sg_message_id: sg },
      {
        email: 'grumpy@example.com',
        timestamp: t + 1,
        event: 'unsubscribe',
        sg_event_id: 'dW5zdWItMQ',
        sg_message_id: sg,
      },
      {
        email: 'grumpy@example.com',
        timestamp: t + 2,
        event: 'group_unsubscribe',
        asm_group_id: 42,
        sg_event_id: 'Z3Vuc3ViLTE',
        msgd_message_id: m.id,
      },
      {
        email: 'grumpy@example.com',
        timestamp: t + 3,
        event: 'group_resubscribe',
        asm_group_id: 42,
        sg_event_id: 'Z3Jlc3ViLTE',
        msgd_message_id: m.id,
      },
    ])}\r\n`;
    const eventsOf = async () =>
      (
        (await s.ctx.store.all(
          sql`SELECT type, payload FROM events WHERE partner_id = ${p.partnerId} AND payload LIKE ${`%${m.id}%`} ORDER BY id`,
        )) as { type: string; payload: string }[]
      ).filter((e) => e.type !== 'message.sent');
    const res = await post(body);
    expect((await processed(s.ctx, res.json.id)).processing).toBe('processed');
    // The recipient's suppressions come and go with them (docs/suppressions.md).
    expect(
      (await eventsOf())
        .filter((e) => e.type.startsWith('suppression.'))
        .map((e) => [e.type, JSON.parse(e.payload).suppression.reason]),
    ).toEqual([
      ['suppression.created', 'spam_report'],
      ['suppression.created', 'unsubscribe'],
      ['suppression.created', 'group_unsubscribe'],
      ['suppression.deleted', 'group_unsubscribe'],
    ]);
    const got = (await eventsOf()).filter((e) => e.type.startsWith('message.'));
    expect(got.map((e) => e.type)).toEqual([
      'message.complained',
      'message.unsubscribed',
      'message.unsubscribed',
      'message.resubscribed',
    ]);
    expect(JSON.parse(got[0].payload)).toMatchObject({
      event: 'message.complained',
      message_id: m.id,
      channel: 'email',
      to: 'grumpy@example.com',
      status: 'sent',
      provider_status: 'spamreport',
      email: 'grumpy@example.com',
      occurred_at: new Date(t * 1000).toISOString(),
    });
    expect(JSON.parse(got[2].payload)).toMatchObject({ provider_status: 'group_unsubscribe', asm_group_id: 42 });
    // The status is not moved by any of them, and a redelivery tells nobody twice.
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('sent');
    expect((await processed(s.ctx, (await post(body)).json.id)).processing).toBe('duplicate');
    expect(await eventsOf()).toHaveLength(8);
  });

  it('deferred, then delivered, then an asynchronous bounce (no sg_message_id): the email ends bounced and refunded', async () => {
    const m = await sentEmail('later-bounce@example.com');
    const xid = m.provider_message_id!;
    const sg = `${xid}.filter0001.7.1.0`;
    const t = Math.floor(Date.now() / 1000);
    const step = async (events: unknown[]) => {
      const res = await post(`${JSON.stringify(events)}\r\n`);
      expect(res.status).toBe(200);
      return processed(s.ctx, res.json.id);
    };
    await step([
      {
        email: 'later-bounce@example.com',
        timestamp: t,
        event: 'deferred',
        response: '451 4.7.1 try later',
        attempt: '1',
        sg_event_id: 'ZGVmZXJyZWQtOTk',
        sg_message_id: sg,
      },
    ]);
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('deferred');
    await step([
      {
        email: 'later-bounce@example.com',
        timestamp: t + 60,
        event: 'delivered',
        response: '250 OK',
        sg_event_id: 'ZGVsaXZlcmVkLTk5',
        sg_message_id: sg,
      },
    ]);
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('delivered');
    const bounce = {
      email: 'later-bounce@example.com',
      timestamp: t + 600,
      event: 'bounce',
      type: 'bounce',
      reason: '550 5.1.1 mailbox unknown',
      status: '5.1.1',
      sg_event_id: 'Ym91bmNlLTk5',
      msgd_message_id: m.id,
    };
    expect((await step([bounce])).processing).toBe('processed');
    expect(await getMessageRowIn(s.ctx.store, m.id)).toMatchObject({
      status: 'bounced',
      error_code: '5.1.1',
      error_message: '550 5.1.1 mailbox unknown',
      refunded: 1,
    });
    // The delivered event again, late and under a new event id: the bounce stands.
    await step([
      {
        email: 'later-bounce@example.com',
        timestamp: t + 60,
        event: 'delivered',
        response: '250 OK',
        sg_event_id: 'ZGVsaXZlcmVkLTk5Yg',
        sg_message_id: sg,
      },
    ]);
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('bounced');
    const types = (
      (await s.ctx.store.all(
        sql`SELECT type FROM events WHERE ${jsonText(s.ctx.store.dialect, 'payload', 'message_id')} = ${m.id} ORDER BY id`,
      )) as { type: string }[]
    ).map((e) => e.type);
    expect(types).toEqual(['message.sent', 'message.deferred', 'message.delivered', 'message.bounced']);
  });

  it('an event whose prefix matches but whose recipient does not is not applied to that message', async () => {
    const m = await sentEmail('solo@example.com');
    const body = JSON.stringify([
      {
        email: 'someone@else.example',
        timestamp: 1,
        event: 'delivered',
        sg_event_id: 'eC0x',
        sg_message_id: `${m.provider_message_id}.f`,
      },
    ]);
    const r = await processed(s.ctx, (await post(body)).json.id);
    expect(r.processing).toBe('unroutable');
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('sent');
  });

  it('refuses a stale timestamp, a missing header, another account’s key, a modified body', async () => {
    const body = JSON.stringify([{ email: 'a@b.example', timestamp: 1, event: 'delivered', sg_event_id: 'c3RhbGU' }]);
    const stale = await post(body, signer.headers(body, String(Math.floor(Date.now() / 1000) - 3600)));
    expect(stale.status).toBe(401);
    expect((await lastRow(s.ctx)).verification_reason).toMatch(
      /timestamp \d+ is 360\d s away from now; the tolerance is 600 s/,
    );

    const h = signer.headers(body);
    const { ['x-twilio-email-event-webhook-timestamp']: _ts, ...noTs } = h;
    expect((await post(body, noTs)).status).toBe(401);
    expect((await lastRow(s.ctx)).verification_reason).toBe('missing X-Twilio-Email-Event-Webhook-Timestamp header');
    const { ['x-twilio-email-event-webhook-signature']: _sig, ...noSig } = h;
    expect((await post(body, noSig)).status).toBe(401);
    expect(await lastRow(s.ctx)).toMatchObject({
      provider: 'sendgrid',
      verification_reason: 'missing X-Twilio-Email-Event-Webhook-Signature header',
    });

    const foreign = sendgridSigner();
    expect((await post(body, foreign.headers(body))).status).toBe(401);
    expect((await lastRow(s.ctx)).verification_reason).toContain(
      'signature does not match the webhook_public_key of gateway',
    );
    expect((await post(body.replace('delivered', 'open'), h)).status).toBe(401);
  });
});

describe('the official SendGrid vector, end to end', () => {
  it('verifies over the wire (with a tolerance wide enough for its 2020 timestamp)', async () => {
    const t = await startTestServer({ 'webhooksIn.sendgridToleranceSeconds': 400_000_000 });
    try {
      await addGateway(
        t.ctx,
        { kind: 'sendgrid', name: 'sg', secrets: { api_key: 'k', webhook_public_key: SENDGRID_VECTOR.publicKey } },
        'test',
      );
      const headers = {
        'content-type': 'application/json',
        'x-twilio-email-event-webhook-signature': SENDGRID_VECTOR.signature,
        'x-twilio-email-event-webhook-timestamp': SENDGRID_VECTOR.timestamp,
      };
      const res = await postWebhook(`${t.url}/api/webhook.php`, SENDGRID_VECTOR.payload, headers);
      expect(res.status).toBe(200);
      const r = await processed(t.ctx, res.json.id);
      expect(r).toMatchObject({
        provider: 'sendgrid',
        verification: 'ok',
        processing: 'ignored',
        error: 'SendGrid event "test_event" is not handled',
      });
      const spaced = await postWebhook(`${t.url}/api/webhook.php`, SENDGRID_VECTOR.payload.replace(',', ', '), headers);
      expect(spaced.status).toBe(401);
    } finally {
      await t.stop();
    }
  });
});
