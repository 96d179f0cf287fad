import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexedBy } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import { getMessageRowIn, messageHistoryIn } from '../../src/core/messages.js';
import { listWebhookLog, reopenWebhookLogIn } from '../../src/core/webhook-log.js';
import { EMPTY_TWIML } from '../../src/http/routes/webhooks-in.js';
import { processingJob } from '../../src/webhooks-in/intake.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { postWebhook, twilioForm, twilioHeaders, twilioSign, type TwilioParams } from '../fakes/webhook-senders.js';
import { connect, postJson, serverStore, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { lastRow, processed, row } from '../helpers/webhook-log.js';
import { waitFor } from '../helpers/wait.js';

// Twilio status callbacks and inbound SMS, signed over the URL Twilio was given: rebuilt
// from the request, or server.publicUrl behind a proxy, or X-Forwarded-* when trusted.

const SID = 'AC00000000000000000000000000000000';
const TOKEN = 'test_auth_token';
const FROM = '+15017250604';
let fake: TwilioFake;
let s: TestServer;
let p: Awaited<ReturnType<typeof setupPartner>>;
let gatewayId: string;

beforeAll(async () => {
  fake = await startTwilioFake({ accounts: { [SID]: TOKEN } });
  s = await startTestServer({ 'billing.refundOnProviderFailure': 'never' });
  p = await setupPartner(s.ctx, { balance: '10.00', prices: { sms: '0.01' } });
  gatewayId = (
    await connect(
      s.ctx,
      p.partnerId,
      { kind: 'twilio', settings: { base_url: fake.url, account_sid: SID }, secrets: { auth_token: TOKEN } },
      'sms',
      FROM,
    )
  ).gateway.id;
});
afterAll(async () => {
  await s.stop();
  await fake.close();
});

const hookUrl = () => `${s.url}/api/webhook.php?gateway=${gatewayId}`;

async function twilioPost(
  params: TwilioParams,
  opts: { url?: string; signUrl?: string; token?: string; headers?: Record<string, string> } = {},
) {
  const url = opts.url ?? hookUrl();
  return postWebhook(url, twilioForm(params), {
    ...twilioHeaders(opts.token ?? TOKEN, opts.signUrl ?? url, params),
    ...opts.headers,
  });
}

function status(sid: string, st: string, extra: TwilioParams = {}): TwilioParams {
  // FACTS D2 fixture, with an unknown extra param that must be signed over like any other.
  return {
    AccountSid: SID,
    ApiVersion: '2010-04-01',
    From: FROM,
    MessageSid: sid,
    MessageStatus: st,
    SmsSid: sid,
    SmsStatus: st,
    To: '+14155552671',
    RawDlrDoneDate: '2508171206',
    ...extra,
  };
}

/** An inbound SMS as Twilio posts it (FACTS D3). */
function inboundSms(sid: string, from: string, body: string, extra: TwilioParams = {}): TwilioParams {
  return {
    ToCountry: 'US',
    SmsMessageSid: sid,
    NumMedia: '0',
    Body: body,
    From: from,
    To: FROM,
    MessageSid: sid,
    SmsSid: sid,
    SmsStatus: 'received',
    AccountSid: SID,
    NumSegments: '1',
    ApiVersion: '2010-04-01',
    ...extra,
  };
}

/** A sent SMS, with the StatusCallback msgd gave Twilio for it: where its status callbacks go. */
async function sentSms(text: string) {
  const res = await postJson(`${s.url}/api/send-sms.php`, { to: '+14155552671', text }, p.token);
  expect(res.status).toBe(200);
  const m = await waitFor(
    async () => {
      const m = await getMessageRowIn(s.ctx.store, res.body.id);
      return m?.status === 'sent' ? m : undefined;
    },
    'the SMS to be sent',
    10_000,
  );
  const callback = fake.requests.findLast((r) => r.body?.Body === text)?.body?.StatusCallback;
  expect(callback).toBe(`${hookUrl()}&message=${m.id}`);
  return { ...m, callback: callback as string };
}

describe('Twilio status callbacks', () => {
  it('answers empty TwiML, and moves the message forward only', async () => {
    const m = await sentSms('hello');
    const sid = m.provider_message_id!;
    expect(sid).toMatch(/^SM[0-9a-f]{32}$/);
    const res = await twilioPost(status(sid, 'delivered'), { url: m.callback });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/xml/);
    expect(res.text).toBe(EMPTY_TWIML);
    const id = res.headers.get('x-msgd-webhook-id')!;
    expect((await processed(s.ctx, id)).processing).toBe('processed');
    for (const late of ['sent', 'undelivered']) {
      await processed(
        s.ctx,
        (await twilioPost(status(sid, late, { ErrorCode: '30003' }), { url: m.callback })).headers.get(
          'x-msgd-webhook-id',
        )!,
      );
    }
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('delivered');
    expect((await messageHistoryIn(s.ctx.store, m.id)).map((h) => [h.status, h.ignored])).toEqual([
      ['queued', 0],
      ['sent', 0],
      ['delivered', 0],
      ['sent', 1],
      ['undelivered', 1],
    ]);
    // MessageSid + MessageStatus is the identity: the same callback twice is a duplicate.
    const dup = await twilioPost(status(sid, 'delivered'), { url: m.callback });
    expect((await processed(s.ctx, dup.headers.get('x-msgd-webhook-id')!)).processing).toBe('duplicate');
  });

  it("a delivered/undelivered status happened at the carrier's RawDlrDoneDate (YYMMDDhhmm, UTC), else on arrival", async () => {
    const m = await sentSms('dlr date');
    const sid = m.provider_message_id!;
    // The FACTS D2 fixture: 2508171206 is 2025-08-17 12:06 UTC.
    await processed(
      s.ctx,
      (await twilioPost(status(sid, 'delivered'), { url: m.callback })).headers.get('x-msgd-webhook-id')!,
    );
    const delivered = (await messageHistoryIn(s.ctx.store, m.id)).find((h) => h.status === 'delivered')!;
    expect(new Date(delivered.occurred_at).toISOString()).toBe('2025-08-17T12:06:00.000Z');
    const ev = (await s.ctx.store.get(
      sql`SELECT payload FROM events WHERE type = 'message.delivered' AND payload LIKE ${`%${m.id}%`}`,
    )) as any;
    expect(JSON.parse(ev.payload).occurred_at).toBe('2025-08-17T12:06:00.000Z');

    // Not a date (month 13, 30 February, too short), or one far in the future: arrival time.
    for (const [i, bad] of ['2513171206', '2502301206', '25081712', '9912312359'].entries()) {
      const other = await sentSms(`bad dlr ${i}`);
      const before = Date.now();
      await processed(
        s.ctx,
        (
          await twilioPost(
            status(other.provider_message_id!, 'undelivered', { RawDlrDoneDate: bad, ErrorCode: '30003' }),
            { url: other.callback },
          )
        ).headers.get('x-msgd-webhook-id')!,
      );
      const h = (await messageHistoryIn(s.ctx.store, other.id)).find((x) => x.status === 'undelivered')!;
      expect(h.occurred_at, bad).toBeGreaterThanOrEqual(before);
      expect(h.occurred_at, bad).toBeLessThanOrEqual(Date.now());
    }
  });

  it('finds a message by the id its StatusCallback names; by SID alone only one sent before callbacks named it', async () => {
    const named = await sentSms('named in its callback');
    // Its reports name it, so its SID has no entry in the provider-id index.
    expect(named.provider_id_indexed).toBe(0);
    // The index holds only the rows with provider_id_indexed = 1.
    if (serverStore === 'sqlite') {
      const plan = (await s.ctx.store.all(
        sql`EXPLAIN QUERY PLAN SELECT * FROM messages WHERE provider_message_id = ${'x'} AND provider_id_indexed = 1`,
      )) as any[];
      expect(plan.map((r) => r.detail).join()).toContain('messages_provider');
    } else {
      const index = await s.ctx.store.get<{ indexdef: string }>(
        sql`SELECT indexdef FROM pg_indexes WHERE indexname = 'messages_provider'`,
      );
      expect(index?.indexdef).toMatch(/WHERE .*provider_id_indexed = 1/);
    }
    const inIndex = async (sid: string) =>
      (await s.ctx.store.get(
        sql`SELECT count(*) AS n FROM messages ${indexedBy(s.ctx.store.dialect, 'messages_provider')}
            WHERE provider_message_id = ${sid} AND provider_id_indexed = 1`,
      )) as any;
    expect((await inIndex(named.provider_message_id!)).n).toBe(0);

    // A message an older msgd sent: its StatusCallback had no ?message=, and its SID is indexed.
    const legacy = await sentSms('sent before the upgrade');
    await s.ctx.store.run(sql`UPDATE messages SET provider_id_indexed = 1 WHERE id = ${legacy.id}`);
    expect((await inIndex(legacy.provider_message_id!)).n).toBe(1);
    const res = await twilioPost(status(legacy.provider_message_id!, 'delivered'));
    expect((await processed(s.ctx, res.headers.get('x-msgd-webhook-id')!)).processing).toBe('processed');
    expect((await getMessageRowIn(s.ctx.store, legacy.id))!.status).toBe('delivered');

    // A callback for the named message to a URL that does not name it finds nothing by the SID:
    // Twilio only ever calls the URL msgd gave, so this is some other sender's report.
    const stray = await twilioPost(status(named.provider_message_id!, 'delivered'));
    expect(stray.status).toBe(200);
    const id = stray.headers.get('x-msgd-webhook-id')!;
    await waitFor(
      async () =>
        (await lastRow(s.ctx)).id === id &&
        /waiting for no message with provider id SM/.test((await lastRow(s.ctx)).error ?? ''),
      'the stray callback to wait',
      10_000,
    );
    expect((await getMessageRowIn(s.ctx.store, named.id))!.status).toBe('sent');
    // The same report at the URL msgd gave applies.
    const ok = await twilioPost(status(named.provider_message_id!, 'delivered'), { url: named.callback });
    expect((await processed(s.ctx, ok.headers.get('x-msgd-webhook-id')!)).processing).toBe('processed');
    expect((await getMessageRowIn(s.ctx.store, named.id))!.status).toBe('delivered');
  });

  it("a callback naming a message msgd does not have says so by msgd's id", async () => {
    const url = `${hookUrl()}&message=msg_doesnotexist`;
    const res = await twilioPost(status('SMnone', 'delivered'), { url });
    const id = res.headers.get('x-msgd-webhook-id')!;
    await waitFor(
      async () => /waiting for no message msg_doesnotexist \(/.test((await row(s.ctx, id)).error ?? ''),
      'the callback to wait',
      10_000,
    );
  });

  it("a report for another SID at the URL naming the message (a retried send's first copy) does not move it", async () => {
    const m = await sentSms('sent twice');
    // The first attempt timed out at msgd but Twilio had created it, with the same StatusCallback.
    const firstCopy = `SM${'f'.repeat(32)}`;
    const stale = await twilioPost(status(firstCopy, 'undelivered', { ErrorCode: '30003' }), { url: m.callback });
    const log = await processed(s.ctx, stale.headers.get('x-msgd-webhook-id')!);
    expect([log.processing, log.error]).toEqual([
      'unroutable',
      `undelivered for provider id ${firstCopy}, another attempt's copy: message ${m.id} was sent as ${m.provider_message_id}`,
    ]);
    expect(await getMessageRowIn(s.ctx.store, m.id)).toMatchObject({ status: 'sent', error_code: null });
    const ok = await twilioPost(status(m.provider_message_id!, 'delivered'), { url: m.callback });
    expect((await processed(s.ctx, ok.headers.get('x-msgd-webhook-id')!)).processing).toBe('processed');
    expect((await messageHistoryIn(s.ctx.store, m.id)).map((h) => [h.status, h.ignored])).toEqual([
      ['queued', 0],
      ['sent', 0],
      ['delivered', 0],
    ]);
  });

  it('a report that beats the commit of its SID waits for it, then lands', async () => {
    const m = await sentSms('early report');
    const sid = m.provider_message_id!;
    // As if Twilio called back before msgd had committed its answer to the send.
    await s.ctx.store.run(
      sql`UPDATE messages SET status = 'sending', provider_message_id = NULL, sent_at = NULL WHERE id = ${m.id}`,
    );
    const res = await twilioPost(status(sid, 'delivered'), { url: m.callback });
    const id = res.headers.get('x-msgd-webhook-id')!;
    await waitFor(
      async () =>
        /waiting for message .* has no provider id yet \(reported as SM/.test((await row(s.ctx, id)).error ?? ''),
      'the report to wait',
      10_000,
    );
    expect((await row(s.ctx, id)).processing).toBe('pending');
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('sending');
    // What the dispatch commit does: the message is sent, under that SID.
    await s.ctx.store.run(
      sql`UPDATE messages SET status = 'sent', provider_message_id = ${sid}, sent_at = ${m.sent_at} WHERE id = ${m.id}`,
    );
    expect((await processed(s.ctx, id)).processing).toBe('processed');
    expect(await getMessageRowIn(s.ctx.store, m.id)).toMatchObject({ status: 'delivered', provider_message_id: sid });
  });

  it('undelivered records the carrier error and, with refundOnProviderFailure=never, keeps the charge', async () => {
    const m = await sentSms('to a landline');
    const bal = async () =>
      ((await s.ctx.store.get(sql`SELECT balance FROM partners WHERE id = ${p.partnerId}`)) as any).balance;
    const before = await bal();
    const res = await twilioPost(status(m.provider_message_id!, 'undelivered', { ErrorCode: '30006' }), {
      url: m.callback,
    });
    await processed(s.ctx, res.headers.get('x-msgd-webhook-id')!);
    expect(await getMessageRowIn(s.ctx.store, m.id)).toMatchObject({
      status: 'undelivered',
      error_code: '30006',
      error_message: 'Twilio error 30006',
      refunded: 0,
    });
    expect(await bal()).toBe(before);
  });

  it('takes a JSON body signed through bodySHA256, and refuses it tampered', async () => {
    const m = await sentSms('json');
    const body = JSON.stringify({ AccountSid: SID, MessageSid: m.provider_message_id, MessageStatus: 'delivered' });
    const jsonUrl = `${m.callback}&bodySHA256=${createHash('sha256').update(body).digest('hex')}`;
    const ok = await postWebhook(jsonUrl, body, {
      'content-type': 'application/json',
      'x-twilio-signature': twilioSign(TOKEN, jsonUrl, {}),
    });
    expect(ok.status).toBe(200);
    expect((await processed(s.ctx, ok.headers.get('x-msgd-webhook-id')!)).processing).toBe('processed');
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('delivered');
    const tampered = await postWebhook(jsonUrl, body.replace('delivered', 'read'), {
      'content-type': 'application/json',
      'x-twilio-signature': twilioSign(TOKEN, jsonUrl, {}),
    });
    expect(tampered.status).toBe(401);
  });

  it('refuses a missing or wrong signature, and params changed after signing', async () => {
    const params = status('SM1', 'sent');
    const missing = await postWebhook(hookUrl(), twilioForm(params), {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(missing.status).toBe(401);
    expect((await lastRow(s.ctx)).verification_reason).toBe('missing X-Twilio-Signature header');
    expect((await twilioPost(params, { token: 'other' })).status).toBe(401);
    const headers = twilioHeaders(TOKEN, hookUrl(), params);
    const changed = await postWebhook(hookUrl(), twilioForm({ ...params, MessageStatus: 'delivered' }), headers);
    expect(changed.status).toBe(401);
    expect((await lastRow(s.ctx)).verification_reason).toContain('signature does not match the auth_token');
  });

  it('an unsigned form of one key repeated 250,000 times is refused promptly', { timeout: 20_000 }, async () => {
    // Parsed before the signature is checked: copying per repeat once took a minute and more,
    // with the event loop (every other request) held the whole time.
    const body = `AccountSid=${SID}${'&a=1'.repeat(250_000)}`;
    const big = await postWebhook(hookUrl(), body, {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': 'bm90IGEgc2lnbmF0dXJl',
    });
    expect(big.status).toBe(401);
    expect((await lastRow(s.ctx)).verification_reason).toContain('signature does not match the auth_token');
  });
});

describe('Twilio inbound SMS', () => {
  it('stores text and MediaUrlN as media references and answers empty TwiML', async () => {
    const params = inboundSms('MM90c6fc909d8504d45ecdb3a3d5b3556e', '+14155551234', 'look at this', {
      NumMedia: '1',
      MediaContentType0: 'image/jpeg',
      MediaUrl0: 'https://api.twilio.com/2010-04-01/Accounts/AC/Messages/MM/Media/ME1',
    });
    // Twilio calls the number's webhook URL, which carries no gateway hint.
    const res = await twilioPost(params, { url: `${s.url}/api/webhook.php` });
    expect(res.status).toBe(200);
    expect(res.text).toBe(EMPTY_TWIML);
    expect((await processed(s.ctx, res.headers.get('x-msgd-webhook-id')!)).processing).toBe('processed');
    const msg = (await s.ctx.store.get(
      sql`SELECT * FROM messages WHERE provider_message_id = ${params.MessageSid}`,
    )) as any;
    expect(msg).toMatchObject({
      partner_id: p.partnerId,
      channel_type: 'sms',
      direction: 'inbound',
      from: '+14155551234',
      to: FROM,
    });
    expect(JSON.parse(msg.content)).toEqual({
      kind: 'media',
      caption: 'look at this',
      media: [{ type: 'image', url: params.MediaUrl0, mime_type: 'image/jpeg' }],
    });
    const ev = (await s.ctx.store.get(
      sql`SELECT payload FROM events WHERE type = 'message.received' AND partner_id = ${p.partnerId}`,
    )) as any;
    expect(JSON.parse(ev.payload)).toMatchObject({ channel: 'sms', from: '+14155551234', body: 'look at this' });
  });

  it('names MMS media types as WhatsApp does: image, audio, video, document (a PDF, a vCard, no type at all)', async () => {
    const params = inboundSms('MMa1b2c3d4e5f60718293a4b5c6d7e8f90', '+14155551234', '', {
      NumMedia: '5',
      MediaContentType0: 'application/pdf',
      MediaUrl0: 'https://api.twilio.com/2010-04-01/Accounts/AC/Messages/MM/Media/ME0',
      MediaContentType1: 'audio/ogg',
      MediaUrl1: 'https://api.twilio.com/2010-04-01/Accounts/AC/Messages/MM/Media/ME1',
      MediaContentType2: 'video/mp4',
      MediaUrl2: 'https://api.twilio.com/2010-04-01/Accounts/AC/Messages/MM/Media/ME2',
      MediaContentType3: 'text/vcard',
      MediaUrl3: 'https://api.twilio.com/2010-04-01/Accounts/AC/Messages/MM/Media/ME3',
      MediaUrl4: 'https://api.twilio.com/2010-04-01/Accounts/AC/Messages/MM/Media/ME4',
    });
    const res = await twilioPost(params, { url: `${s.url}/api/webhook.php` });
    expect((await processed(s.ctx, res.headers.get('x-msgd-webhook-id')!)).processing).toBe('processed');
    const msg = (await s.ctx.store.get(
      sql`SELECT content FROM messages WHERE provider_message_id = ${params.MessageSid}`,
    )) as any;
    const media = JSON.parse(msg.content).media.map((m: any) => [m.type, m.mime_type]);
    expect(media).toEqual([
      ['document', 'application/pdf'],
      ['audio', 'audio/ogg'],
      ['video', 'video/mp4'],
      ['document', 'text/vcard'],
      ['document', null],
    ]);
  });

  it('takes an inbound SMS webhook set to HTTP GET: params in the query, signed over the URL alone', async () => {
    const params = inboundSms('SM1f0e8ae6ade43cb3c0ce4525424e404f', '+14155557777', "it's me & you");
    const url = `${s.url}/api/webhook.php?${new URLSearchParams(params as Record<string, string>)}`;
    const get = (signature: string) => fetch(url, { headers: { 'x-twilio-signature': signature } });
    const bad = await get(twilioSign(TOKEN, url, params));
    expect(bad.status).toBe(401);
    expect(await lastRow(s.ctx)).toMatchObject({ method: 'GET', provider: 'twilio', verification: 'failed' });

    const res = await get(twilioSign(TOKEN, url, {}));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/xml/);
    expect(await res.text()).toBe(EMPTY_TWIML);
    expect((await processed(s.ctx, res.headers.get('x-msgd-webhook-id')!)).processing).toBe('processed');
    const msg = (await s.ctx.store.get(
      sql`SELECT * FROM messages WHERE provider_message_id = ${params.MessageSid}`,
    )) as any;
    expect(msg).toMatchObject({
      partner_id: p.partnerId,
      channel_type: 'sms',
      direction: 'inbound',
      from: '+14155557777',
      to: FROM,
    });
    expect(JSON.parse(msg.content)).toEqual({ kind: 'text', text: "it's me & you" });
  });

  it('an MMS posted as receiving, then received, is one inbound message; a bare inbound callback is ignored', async () => {
    const sid = 'MM5e1d3c4b2a19087f6e5d4c3b2a190870';
    const mms = (state: string) =>
      inboundSms(sid, '+14155552222', 'three pictures', {
        SmsStatus: state,
        NumMedia: '3',
        NumSegments: '1',
        MediaContentType0: 'image/jpeg',
        MediaUrl0: `https://api.twilio.com/2010-04-01/Accounts/${SID}/Messages/${sid}/Media/ME0`,
        MediaContentType1: 'image/png',
        MediaUrl1: `https://api.twilio.com/2010-04-01/Accounts/${SID}/Messages/${sid}/Media/ME1`,
        MediaContentType2: 'video/mp4',
        MediaUrl2: `https://api.twilio.com/2010-04-01/Accounts/${SID}/Messages/${sid}/Media/ME2`,
      });
    const first = await twilioPost(mms('receiving'), { url: `${s.url}/api/webhook.php` });
    expect(first.status).toBe(200);
    expect(first.text).toBe(EMPTY_TWIML);
    expect((await processed(s.ctx, first.headers.get('x-msgd-webhook-id')!)).processing).toBe('processed');
    const second = await twilioPost(mms('received'), { url: `${s.url}/api/webhook.php` });
    expect((await processed(s.ctx, second.headers.get('x-msgd-webhook-id')!)).processing).toBe('duplicate');

    const rows = (await s.ctx.store.all(sql`SELECT * FROM messages WHERE provider_message_id = ${sid}`)) as any[];
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ direction: 'inbound', status: 'received', from: '+14155552222', to: FROM });
    expect(JSON.parse(rows[0].content)).toEqual({
      kind: 'media',
      caption: 'three pictures',
      media: [
        { type: 'image', url: mms('x').MediaUrl0, mime_type: 'image/jpeg' },
        { type: 'image', url: mms('x').MediaUrl1, mime_type: 'image/png' },
        { type: 'video', url: mms('x').MediaUrl2, mime_type: 'video/mp4' },
      ],
    });
    const announced = (await s.ctx.store.get(
      sql`SELECT count(*) AS n FROM events WHERE type = 'message.received' AND payload LIKE ${`%${rows[0].id}%`}`,
    )) as any;
    expect(announced.n).toBe(1);

    // A status-callback-shaped post about an inbound SID, with no content: nothing to store,
    // and no outbound message to wait for.
    const logged = [first, second].map((r) => r.headers.get('x-msgd-webhook-id')!);
    for (const state of ['receiving', 'received']) {
      const bare: TwilioParams = {
        AccountSid: SID,
        ApiVersion: '2010-04-01',
        From: '+14155552222',
        To: FROM,
        MessageSid: 'SM0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e',
        SmsSid: 'SM0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e',
        MessageStatus: state,
        SmsStatus: state,
      };
      const res = await twilioPost(bare);
      expect(res.status).toBe(200);
      const r = await processed(s.ctx, res.headers.get('x-msgd-webhook-id')!, 5_000);
      logged.push(r.id);
      expect(r.processing, state).toBe('ignored');
      expect(r.error ?? '', state).not.toContain('no message');
    }
    expect(
      await s.ctx.store.get(
        sql`SELECT count(*) AS n FROM messages WHERE provider_message_id = ${'SM0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e'}`,
      ),
    ).toEqual({ n: 0 });
    // None of them is among what `msgctl webhooks log --failed` lists.
    const failed = (await listWebhookLog(s.ctx, { failed: true, limit: 10_000 })).map((r) => r.id);
    expect(failed.filter((id) => logged.includes(id))).toEqual([]);
  });

  it('an SMS to a number no channel has is unroutable (answered 200 all the same)', async () => {
    const res = await twilioPost({
      AccountSid: SID,
      MessageSid: 'SMx',
      From: '+14155551234',
      To: '+15550009999',
      Body: 'hi',
      SmsStatus: 'received',
    });
    expect(res.status).toBe(200);
    const r = await processed(s.ctx, res.headers.get('x-msgd-webhook-id')!);
    expect(r.processing).toBe('unroutable');
    expect(r.error).toContain('no active sms channel for +15550009999');
  });

  it('processed again later (reprocess), an inbound SMS keeps the time it arrived, which Twilio does not give', async () => {
    const res = await twilioPost({
      AccountSid: SID,
      MessageSid: 'SMlate',
      From: '+14155551234',
      To: '+15550008888',
      Body: 'hi',
      SmsStatus: 'received',
    });
    const id = res.headers.get('x-msgd-webhook-id')!;
    const first = await processed(s.ctx, id);
    expect(first.processing).toBe('unroutable');
    s.clock.advance(60_000);
    const q = await setupPartner(s.ctx);
    await connect(
      s.ctx,
      q.partnerId,
      { kind: 'twilio', name: 'tw-late', settings: { account_sid: SID }, secrets: { auth_token: TOKEN } },
      'sms',
      '+15550008888',
    );
    // Due now by the real clock: on PostgreSQL a job is due on the database's clock, which
    // msgd's moved clock is ahead of.
    await s.ctx.store.transaction(async (tx) => {
      await reopenWebhookLogIn(tx, id);
      await s.rt.queue.enqueue(tx, processingJob([id], { runAt: Date.now() }));
    });
    expect((await processed(s.ctx, id)).processing).toBe('processed');
    const msg = (await s.ctx.store.get(sql`SELECT * FROM messages WHERE provider_message_id = 'SMlate'`)) as any;
    expect(msg.partner_id).toBe(q.partnerId);
    expect(msg.sent_at).toBe(first.received_at);
    expect(msg.created_at).toBeGreaterThanOrEqual(first.received_at + 60_000);
  });
});

describe('the URL Twilio signs, behind a proxy', () => {
  async function withServer(over: Record<string, unknown>, fn: (t: TestServer, gw: string) => Promise<void>) {
    const t = await startTestServer(over);
    try {
      const q = await setupPartner(t.ctx);
      const gw = (
        await connect(
          t.ctx,
          q.partnerId,
          { kind: 'twilio', settings: { account_sid: SID }, secrets: { auth_token: TOKEN } },
          'sms',
          FROM,
        )
      ).gateway.id;
      await fn(t, gw);
    } finally {
      await t.stop();
    }
  }
  const params = status('SMproxy', 'delivered');

  it('uses server.publicUrl + path + query when set', async () => {
    await withServer({ 'server.publicUrl': 'https://msgd.example.com' }, async (t, gw) => {
      const path = `/api/webhook.php?gateway=${gw}`;
      const ok = await twilioPost(params, { url: t.url + path, signUrl: `https://msgd.example.com${path}` });
      expect(ok.status).toBe(200);
      expect((await twilioPost(params, { url: t.url + path, signUrl: t.url + path })).status).toBe(401);
    });
  });

  it('accepts the variants twilio-node accepts: standard port added, query re-encoded', async () => {
    await withServer({ 'server.publicUrl': 'https://msgd.example.com/' }, async (t, gw) => {
      const path = `/api/webhook.php?gateway=${gw}&note=o%27brien`;
      const variants = [`https://msgd.example.com:443${path}`, `https://msgd.example.com${path.replace('%27', "'")}`];
      for (const signUrl of variants)
        expect((await twilioPost(params, { url: t.url + path, signUrl })).status, signUrl).toBe(200);
      expect(
        (await twilioPost(params, { url: t.url + path, signUrl: `https://msgd.example.com:8443${path}` })).status,
      ).toBe(401);
    });
  });

  it('reads X-Forwarded-Proto/Host only when trustProxy is on', async () => {
    const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'hooks.example.org' };
    for (const trust of [true, false]) {
      await withServer({ 'server.trustProxy': trust }, async (t, gw) => {
        const path = `/api/webhook.php?gateway=${gw}`;
        const res = await twilioPost(params, {
          url: t.url + path,
          signUrl: `https://hooks.example.org${path}`,
          headers: forwarded,
        });
        expect(res.status, `trustProxy=${trust}`).toBe(trust ? 200 : 401);
      });
    }
  });
});
