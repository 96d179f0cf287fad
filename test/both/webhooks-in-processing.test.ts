import pino from 'pino';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyProviderEventsIn, type ProviderEvent } from '../../src/core/inbound.js';
import { sql } from '../../src/db/sql.js';
import { GatewayBook } from '../../src/jobs/gateway-book.js';
import { sandboxBody, signSandbox } from '../../src/providers/sandbox/webhook.js';
import { JobQueue } from '../../src/queue/queue.js';
import { Worker } from '../../src/queue/worker.js';
import { type IntakeAnswer, WebhookIntake } from '../../src/webhooks-in/intake.js';
import { registerWebhooksIn } from '../../src/webhooks-in/process.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import {
  metaHeaders,
  pageEvent,
  twilioForm,
  twilioHeaders,
  type TwilioParams,
  waInbound,
} from '../fakes/webhook-senders.js';
import { connect } from '../helpers/server.js';
import { PAGE_ID, TWILIO_SID, TWILIO_TOKEN, twilioGateway, WA_PHONE_ID } from '../helpers/gateways.js';
import { waitFor } from '../helpers/wait.js';
import { openStoreCtx, type StoreCtx, testStore } from './helpers.js';
import { raceOnRow } from './race.js';
import { partner } from './read-fixtures.js';

// Processing provider webhooks on either store, as msgd runs it: a signed webhook goes through
// the intake (verified, stored, its processing job queued) and a worker running webhook.process
// applies it. What the partner and the operator see: the message's status and its event, the
// inbound message with its contact and conversation, the webhook log's outcome. On SQLite the
// worker's batch runs the synchronous core on the connection; on PostgreSQL the async core
// through the batch's transaction.

const PARTNER = 'prt_w';
const TO = '+14155552671';
const SANDBOX_SECRET = 'sandbox-signing-secret';
const APP_SECRET = 'meta-app-secret';
const PSID = '24688835567101';

let twilio: TwilioFake;
beforeAll(async () => {
  twilio = await startTwilioFake();
});
afterAll(async () => {
  await twilio.close();
});

describe(`webhook processing on ${testStore}`, () => {
  let t: StoreCtx;
  let worker: Worker;
  let intake: WebhookIntake;
  let dispatcher: Agent;
  let gatewayId: string;
  let channelId: string;
  let from: string;
  let sandboxId: string;

  beforeEach(async () => {
    twilio.reset();
    t = await openStoreCtx();
    await partner(t, PARTNER);
    const gw = await twilioGateway(t.ctx, PARTNER, twilio);
    gatewayId = gw.gateway.id;
    channelId = gw.channel.id;
    from = gw.from;
    sandboxId = (
      await connect(
        t.ctx,
        PARTNER,
        { kind: 'sandbox', settings: {}, secrets: { signing_secret: SANDBOX_SECRET } },
        'instagram',
        '17841400000000099',
      )
    ).gateway.id;
    const queue = new JobQueue(t.dialect === 'sqlite' ? t.ctx.db : t.ctx.store, { maxAttempts: 3 });
    // A short dispatch timeout: a status that beats its message waits 200 ms, then 400 ms, ...
    const config = { ...t.ctx.config, dispatch: { ...t.ctx.config.dispatch, timeoutMs: 300 } };
    const book = new GatewayBook(t.ctx);
    worker = new Worker({ queue, concurrency: 4, leaseMs: 30_000, maxSleepMs: 50 });
    dispatcher = new Agent({ connections: 2 });
    registerWebhooksIn(worker, {
      ctx: t.ctx,
      config,
      queue,
      gateways: book,
      dispatcher,
      callbackBase: () => null,
      selfUrl: () => null,
      logger: pino({ level: 'silent' }),
    });
    intake = new WebhookIntake({ ctx: t.ctx, config, queue, book });
    // The gateways read once (through the store on PostgreSQL), as a running msgd has them.
    await book.load();
    worker.start();
  });
  afterEach(async () => {
    await worker.stop({ timeoutMs: 2_000 });
    await dispatcher.destroy();
    await t.close();
  });

  let seq = 0;
  /** An outbound SMS on the Twilio gateway, as dispatch leaves it once Twilio took it. */
  async function sentMessage(opts: { sid?: string | null; status?: string; price?: number; gateway?: string } = {}) {
    const id = `msg_w${++seq}`;
    const now = Date.now();
    const sid = opts.sid === undefined ? `SM${String(seq).padStart(32, '0')}` : opts.sid;
    await t.ctx.store.run(
      sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content, status,
            provider_message_id, price, segments, sent_at, created_at, updated_at)
          VALUES (${id}, ${PARTNER}, 'outbound', 'sms', ${channelId}, ${opts.gateway ?? gatewayId}, ${TO}, ${from},
            '{"kind":"text","text":"hi"}', ${opts.status ?? 'sent'}, ${sid}, ${opts.price ?? 7500}, 1, ${now}, ${now}, ${now})`,
    );
    return { id, sid };
  }

  /** A Twilio webhook to msgd's URL for the gateway (and the message, as its StatusCallback names it). */
  function twilioWebhook(params: TwilioParams, messageId?: string): Promise<IntakeAnswer> {
    const path = `/api/webhook.php?gateway=${gatewayId}${messageId ? `&message=${messageId}` : ''}`;
    const url = `https://msgd.example.com${path}`;
    return intake.receive({
      method: 'POST',
      path,
      url,
      headers: twilioHeaders(TWILIO_TOKEN, url, params),
      raw: Buffer.from(twilioForm(params)),
      gatewayId,
    });
  }

  /** A Twilio status callback (shared/providers/FACTS.md D2). */
  function statusCallback(sid: string, status: string): TwilioParams {
    return {
      AccountSid: TWILIO_SID,
      ApiVersion: '2010-04-01',
      From: from,
      MessageSid: sid,
      MessageStatus: status,
      SmsSid: sid,
      SmsStatus: status,
      To: TO,
    };
  }

  /** An inbound SMS as Twilio posts it (FACTS D3). */
  function inboundSms(sid: string, sender: string, to: string, body: string): TwilioParams {
    return {
      ToCountry: 'US',
      SmsMessageSid: sid,
      NumMedia: '0',
      Body: body,
      From: sender,
      To: to,
      MessageSid: sid,
      SmsSid: sid,
      SmsStatus: 'received',
      AccountSid: TWILIO_SID,
      NumSegments: '1',
      ApiVersion: '2010-04-01',
    };
  }

  function sandboxWebhook(events: { id: string; message_id: string; status: string }[]): Promise<IntakeAnswer> {
    const body = sandboxBody(events.map((e) => ({ ...e, timestamp: Date.now() / 1000 })));
    return intake.receive({
      method: 'POST',
      path: `/webhooks/sandbox?gateway=${sandboxId}`,
      url: `https://msgd.example.com/webhooks/sandbox?gateway=${sandboxId}`,
      headers: { 'content-type': 'application/json', 'x-msgd-sandbox-signature': signSandbox(SANDBOX_SECRET, body) },
      raw: Buffer.from(body),
      gatewayId: sandboxId,
    });
  }

  /** A Meta webhook signed with the app secret (FACTS: X-Hub-Signature-256). */
  function metaWebhook(body: unknown, path: string): Promise<IntakeAnswer> {
    const raw = Buffer.from(JSON.stringify(body));
    return intake.receive({
      method: 'POST',
      path,
      url: `https://msgd.example.com${path}`,
      headers: metaHeaders(APP_SECRET, raw),
      raw,
    });
  }

  type LogRow = { processing: string; error: string | null };
  const logRow = async (id: string) =>
    (await t.ctx.store.get<LogRow>(sql`SELECT processing, error FROM provider_webhooks WHERE id = ${id}`))!;
  /** The webhook's outcome, once processing has settled it. */
  const settled = (a: IntakeAnswer) => {
    expect(a.status).toBe(200);
    return waitFor(
      async () => {
        const r = await logRow(a.id);
        return r.processing !== 'pending' ? r : undefined;
      },
      `webhook ${a.id} processed`,
      10_000,
    );
  };
  const statusOf = async (id: string) =>
    (await t.ctx.store.get<{ status: string }>(sql`SELECT status FROM messages WHERE id = ${id}`))!.status;
  const eventsOf = async (type: string) =>
    (await t.ctx.store.all<{ payload: string }>(sql`SELECT payload FROM events WHERE type = ${type} ORDER BY id`)).map(
      (e) => JSON.parse(e.payload),
    );

  it('a status callback moves the message sent → delivered and emits message.delivered; a repeat is a duplicate', async () => {
    const m = await sentMessage();
    const first = await twilioWebhook(statusCallback(m.sid!, 'delivered'), m.id);
    expect(await settled(first)).toEqual({ processing: 'processed', error: null });
    expect(await statusOf(m.id)).toBe('delivered');
    expect(await eventsOf('message.delivered')).toEqual([
      expect.objectContaining({ message_id: m.id, status: 'delivered', previous_status: 'sent', to: TO }),
    ]);
    const history = await t.ctx.store.all<{ status: string }>(
      sql`SELECT status FROM message_status_history WHERE message_id = ${m.id} ORDER BY id`,
    );
    expect(history.map((h) => h.status)).toEqual(['delivered']);

    // Twilio calls again with the same report: flagged, nothing applied twice.
    const again = await twilioWebhook(statusCallback(m.sid!, 'delivered'), m.id);
    expect((await settled(again)).processing).toBe('duplicate');
    expect(await eventsOf('message.delivered')).toHaveLength(1);
  });

  it('an inbound SMS creates its contact, conversation and inbound message, and emits message.received', async () => {
    const sid = 'SM'.padEnd(34, 'a');
    const a = await twilioWebhook(inboundSms(sid, '+14155550199', from, 'hello there'));
    expect(await settled(a)).toEqual({ processing: 'processed', error: null });
    const m = await t.ctx.store.get<{
      id: string;
      direction: string;
      status: string;
      from: string;
      to: string;
      contact_id: string;
      conversation_id: string;
      content: string;
    }>(sql`SELECT * FROM messages WHERE provider_message_id = ${sid}`);
    expect(m).toMatchObject({ direction: 'inbound', status: 'received', from: '+14155550199', to: from });
    expect(JSON.parse(m!.content)).toEqual({ kind: 'text', text: 'hello there' });
    const contact = await t.ctx.store.get<{ phone: string; partner_id: string; last_inbound_at: number | null }>(
      sql`SELECT phone, partner_id, last_inbound_at FROM contacts WHERE id = ${m!.contact_id}`,
    );
    expect(contact).toMatchObject({ phone: '+14155550199', partner_id: PARTNER });
    expect(contact!.last_inbound_at).not.toBeNull();
    const conv = await t.ctx.store.get<{ contact_id: string; channel_id: string; status: string }>(
      sql`SELECT contact_id, channel_id, status FROM conversations WHERE id = ${m!.conversation_id}`,
    );
    expect(conv).toEqual({ contact_id: m!.contact_id, channel_id: channelId, status: 'open' });
    expect(await eventsOf('message.received')).toEqual([
      expect.objectContaining({
        message_id: m!.id,
        from: '+14155550199',
        to: from,
        body: 'hello there',
        conversation_id: m!.conversation_id,
        contact: expect.objectContaining({ id: m!.contact_id, phone: '+14155550199' }),
      }),
    ]);

    // A second message from the customer joins the same contact and conversation.
    const b = await twilioWebhook(inboundSms('SM'.padEnd(34, 'b'), '+14155550199', from, 'and again'));
    expect((await settled(b)).processing).toBe('processed');
    const both = await t.ctx.store.all<{ contact_id: string; conversation_id: string }>(
      sql`SELECT contact_id, conversation_id FROM messages WHERE direction = 'inbound' ORDER BY id`,
    );
    expect(both).toHaveLength(2);
    expect(new Set(both.map((r) => `${r.contact_id}/${r.conversation_id}`)).size).toBe(1);
  });

  it('an inbound SMS to a number no channel has is unroutable, and says why', async () => {
    const a = await twilioWebhook(inboundSms('SM'.padEnd(34, 'c'), '+14155550199', '+15005550000', 'anyone?'));
    const r = await settled(a);
    expect(r.processing).toBe('unroutable');
    expect(r.error).toContain('no active sms channel for +15005550000');
    expect(await t.ctx.store.all(sql`SELECT id FROM messages WHERE direction = 'inbound'`)).toEqual([]);
  });

  it('a status that beats its message’s provider id waits, and is applied once dispatch records the id', async () => {
    // Claimed and called, the provider's answer not yet committed: no provider id.
    const m = await sentMessage({ sid: null, status: 'sending' });
    const sid = 'SM'.padEnd(34, 'd');
    const a = await twilioWebhook(statusCallback(sid, 'delivered'), m.id);
    const waiting = await waitFor(
      async () => {
        const r = await logRow(a.id);
        return r.processing === 'pending' && r.error?.startsWith('waiting for') ? r : undefined;
      },
      'the webhook to wait for its message',
      10_000,
    );
    expect(waiting.error).toContain(`message ${m.id} has no provider id yet`);
    expect(await statusOf(m.id)).toBe('sending');
    // Dispatch records Twilio's answer.
    await t.ctx.store.run(
      sql`UPDATE messages SET provider_message_id = ${sid}, status = 'sent', sent_at = ${Date.now()} WHERE id = ${m.id}`,
    );
    expect(await settled(a)).toEqual({ processing: 'processed', error: null });
    expect(await statusOf(m.id)).toBe('delivered');
    expect(await eventsOf('message.delivered')).toEqual([expect.objectContaining({ message_id: m.id })]);
  });

  it('a webhook that fails midway rolls back its own events only; the others of its batch stand', async () => {
    const a = await sentMessage({ sid: 'sbx_a', gateway: sandboxId });
    // A stored price no amount in msgd can be (past 2^53): its refund cannot be worked out.
    const bad = await sentMessage({ sid: 'sbx_bad', gateway: sandboxId, price: 2 ** 60 });
    const c = await sentMessage({ sid: 'sbx_c', gateway: sandboxId });
    // One intake batch (one turn), so one processing job and one settling transaction.
    const [failing, fine] = await Promise.all([
      sandboxWebhook([
        { id: 'ev_a', message_id: 'sbx_a', status: 'delivered' },
        { id: 'ev_bad', message_id: 'sbx_bad', status: 'failed' },
      ]),
      sandboxWebhook([{ id: 'ev_c', message_id: 'sbx_c', status: 'delivered' }]),
    ]);
    expect(intake.stats.batches).toBe(1);
    const r = await settled(failing);
    expect(r.processing).toBe('error');
    expect(r.error).toBeTruthy();
    expect(await settled(fine)).toEqual({ processing: 'processed', error: null });
    // The failing webhook's first event was applied before the failure, and rolled back with it.
    expect(await statusOf(a.id)).toBe('sent');
    expect(await statusOf(bad.id)).toBe('sent');
    expect(await statusOf(c.id)).toBe('delivered');
    const history = await t.ctx.store.all<{ message_id: string }>(
      sql`SELECT message_id FROM message_status_history ORDER BY id`,
    );
    expect(history.map((h) => h.message_id)).toEqual([c.id]);
    expect((await eventsOf('message.delivered')).map((e) => e.message_id)).toEqual([c.id]);
    const keys = await t.ctx.store.all<{ key: string }>(sql`SELECT key FROM provider_event_keys ORDER BY key`);
    expect(keys.map((k) => k.key)).toEqual(['sandbox:ev_c']);
  });

  it('Messenger: an inbound message, a delivery watermark over the conversation, and the customer’s unsend', async () => {
    const gw = await connect(
      t.ctx,
      PARTNER,
      {
        kind: 'meta_messenger',
        settings: { page_id: PAGE_ID, customer_service_window: 'off' },
        secrets: { page_access_token: 'page-token', app_secret: APP_SECRET },
      },
      'messenger',
    );
    const at = Date.now() - 10_000;
    const inbound = await metaWebhook(
      pageEvent(PAGE_ID, [
        { sender: { id: PSID }, recipient: { id: PAGE_ID }, timestamp: at, message: { mid: 'm_in1', text: 'hi' } },
      ]),
      '/api/webhook-messenger.php',
    );
    expect(await settled(inbound)).toEqual({ processing: 'processed', error: null });
    const got = (await t.ctx.store.get<{ id: string; contact_id: string; conversation_id: string }>(
      sql`SELECT id, contact_id, conversation_id FROM messages WHERE provider_message_id = 'm_in1'`,
    ))!;
    expect(got.conversation_id).toBeTruthy();

    // A reply the partner sent in that conversation, then Meta's delivery watermark covering it.
    const sentAt = Date.now() - 5_000;
    await t.ctx.store.run(
      sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id, contact_id,
            "to", "from", content, status, provider_message_id, price, segments, sent_at, created_at, updated_at)
          VALUES ('msg_reply', ${PARTNER}, 'outbound', 'messenger', ${gw.channel.id}, ${gw.gateway.id}, ${got.conversation_id},
            ${got.contact_id}, ${PSID}, ${PAGE_ID}, '{"kind":"text","text":"hello"}', 'sent', 'm_out1', 0, 1, ${sentAt},
            ${sentAt}, ${sentAt})`,
    );
    const delivery = await metaWebhook(
      pageEvent(PAGE_ID, [
        { sender: { id: PSID }, recipient: { id: PAGE_ID }, timestamp: Date.now(), delivery: { watermark: sentAt } },
      ]),
      '/api/webhook-messenger.php',
    );
    expect(await settled(delivery)).toEqual({ processing: 'processed', error: null });
    expect(await statusOf('msg_reply')).toBe('delivered');

    // The customer takes their message back: stored redacted, and the partner told.
    const unsend = await metaWebhook(
      pageEvent(PAGE_ID, [
        {
          sender: { id: PSID },
          recipient: { id: PAGE_ID },
          timestamp: Date.now(),
          message: { mid: 'm_in1', is_deleted: true },
        },
      ]),
      '/api/webhook-messenger.php',
    );
    expect(await settled(unsend)).toEqual({ processing: 'processed', error: null });
    const gone = await t.ctx.store.get<{ deleted_at: number | null; content: string }>(
      sql`SELECT deleted_at, content FROM messages WHERE id = ${got.id}`,
    );
    expect(gone!.deleted_at).not.toBeNull();
    expect(JSON.parse(gone!.content)).toMatchObject({ kind: 'redacted' });
    expect(await eventsOf('message.deleted')).toEqual([expect.objectContaining({ message_id: got.id })]);
  });

  it('WhatsApp: an inbound message is routed by the phone number id; an SMS STOP opts its sender out', async () => {
    await connect(
      t.ctx,
      PARTNER,
      {
        kind: 'whatsapp_cloud',
        settings: { phone_number_id: WA_PHONE_ID, api_version: 'v21.0', customer_service_window: 'off' },
        secrets: { access_token: 'wa-token', app_secret: APP_SECRET },
      },
      'whatsapp',
      '+15550783881',
    );
    const wa = await metaWebhook(
      waInbound(WA_PHONE_ID, { from: '16505551234', id: 'wamid.in1', text: { body: 'hola' } }),
      '/api/webhook-whatsapp.php',
    );
    expect(await settled(wa)).toEqual({ processing: 'processed', error: null });
    const m = await t.ctx.store.get<{ channel_type: string; to: string; content: string }>(
      sql`SELECT channel_type, "to", content FROM messages WHERE provider_message_id = 'wamid.in1'`,
    );
    expect(m).toMatchObject({ channel_type: 'whatsapp', to: '+15550783881' });
    expect(JSON.parse(m!.content)).toMatchObject({ kind: 'text', text: 'hola' });

    const stop = await twilioWebhook(inboundSms('SM'.padEnd(34, 'f'), '+14155550188', from, 'STOP'));
    expect(await settled(stop)).toEqual({ processing: 'processed', error: null });
    const sup = await t.ctx.store.all<{ address: string; reason: string }>(
      sql`SELECT address, reason FROM suppressions WHERE partner_id = ${PARTNER}`,
    );
    expect(sup).toEqual([{ address: '+14155550188', reason: 'opt_out_keyword' }]);
    expect(await eventsOf('suppression.created')).toHaveLength(1);
  });

  it('the same event applied by two transactions at once is applied once, the other a duplicate', async () => {
    const m = await sentMessage();
    const ev: ProviderEvent = {
      type: 'status',
      key: `twilio:${m.sid}:delivered`,
      ref: { providerMessageId: m.sid! },
      status: 'delivered',
      providerStatus: 'delivered',
      occurredAt: Date.now(),
    };
    const opts = { trusted: () => true, refundOnFailure: true, final: true };
    const apply = () => t.ctx.store.transaction((tx) => applyProviderEventsIn(tx, t.ctx, [ev], opts));
    // Two msgd on one PostgreSQL, each given a copy of the webhook: both run until the message's row.
    const settled = await raceOnRow(t, sql`SELECT id FROM messages WHERE id = ${m.id} FOR UPDATE`, [apply, apply]);
    const outs = settled.map((r) => {
      if (r.status === 'rejected') throw r.reason;
      return r.value as Awaited<ReturnType<typeof applyProviderEventsIn>>;
    });
    expect(outs.map((o) => [o.processed, o.duplicates]).sort()).toEqual([
      [0, 1],
      [1, 0],
    ]);
    expect(await statusOf(m.id)).toBe('delivered');
    expect(await eventsOf('message.delivered')).toHaveLength(1);
  });
});
