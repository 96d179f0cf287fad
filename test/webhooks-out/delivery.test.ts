import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { sql } from '../../src/db/sql.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, startReceiver, type TlsFiles } from '../helpers/webhook-receiver.js';
import { attemptRows, deliveryRows, inbound, world, type World } from './helpers.js';

// The happy path end to end: an event caused in msgd reaches a real HTTPS receiver, signed so
// that both a hand-written HMAC check and the standardwebhooks library accept it.

let tls: TlsFiles;
beforeAll(() => {
  tls = makeCert();
});
afterAll(() => tls.cleanup());

describe('message.received to a subscribed endpoint', () => {
  let w: World;
  let ep: { id: string; secret: string };
  beforeAll(async () => {
    w = await world({}, { tls });
    ep = await w.register();
  });
  afterAll(() => w.close());

  it('arrives once, verified both ways, with the documented payload and headers', async () => {
    const { message, eventId } = await inbound(
      w.server.ctx,
      w.partner.partnerId,
      w.channel,
      '+14155550100',
      'Hello there',
    );
    const r = await waitFor(() => w.receiver.received.find((x) => x.id === eventId), 'the event at the receiver', 5000);
    expect(r.hmacOk).toBe(true);
    expect(r.standardOk).toBe(true);

    // The receiver's own HMAC: hex SHA-256 of the raw bytes keyed with the secret string.
    expect(r.headers['x-msgd-signature']).toBe('sha256=' + createHmac('sha256', ep.secret).update(r.raw).digest('hex'));
    expect(() => new Webhook(ep.secret).verify(r.raw.toString(), r.headers)).not.toThrow();
    expect(() =>
      new Webhook('whsec_' + Buffer.alloc(32, 7).toString('base64')).verify(r.raw.toString(), r.headers),
    ).toThrow();

    expect(r.headers['x-msgd-event-id']).toBe(eventId);
    expect(r.headers['webhook-id']).toBe(eventId);
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    expect(Math.abs(Number(r.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(10);
    expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);

    // The exact bytes stored in the outbox are the bytes sent.
    const stored = (await w.server.ctx.store.get<{ payload: string }>(
      sql`SELECT payload FROM events WHERE id = ${eventId}`,
    ))!;
    expect(r.raw.toString('utf8')).toBe(stored.payload);
    expect(r.body).toMatchObject({
      id: eventId,
      event: 'message.received',
      channel: 'sms',
      from: '+14155550100',
      body: 'Hello there',
      message_id: message.id,
      conversation_id: message.conversation_id,
      contact: { id: message.contact_id, name: 'Alice', phone: '+14155550100' },
    });
    expect(r.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    await waitFor(
      async () => (await deliveryRows(w.server.ctx, ep.id)).find((d) => d.event_id === eventId)?.status === 'succeeded',
      'succeeded',
      3000,
    );
    const d = (await deliveryRows(w.server.ctx, ep.id)).find((x) => x.event_id === eventId);
    expect(d).toMatchObject({ status: 'succeeded', attempts: 1, last_status_code: 200 });
    const attempts = await attemptRows(w.server.ctx, d.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ attempt_no: 1, status_code: 200, response_snippet: 'ok', error: null });
    expect(attempts[0].duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('a message sent through /v1 produces message.sent, and a low balance partner.balance_low', async () => {
    await w.server.ctx.store.run(
      sql`UPDATE partners SET low_balance_threshold = ${99_995_000} WHERE id = ${w.partner.partnerId}`,
    );
    const sent = await w.api('POST', '/v1/messages', { channel: 'sms', to: '+14155550111', body: 'hi' });
    expect(sent.status).toBe(200);
    const byType = (t: string) => w.receiver.received.filter((x) => x.body?.event === t);
    const s = await waitFor(
      () => byType('message.sent').find((x) => x.body.message_id === sent.body.id),
      'message.sent',
      5000,
    );
    expect(s.verified).toBe(true);
    expect(s.body).toMatchObject({ channel: 'sms', to: '+14155550111', status: 'sent', previous_status: 'sending' });
    const low = await waitFor(() => byType('partner.balance_low')[0], 'partner.balance_low', 5000);
    expect(low.body).toMatchObject({ partner_id: w.partner.partnerId, threshold: { micro: 99_995_000 } });
  });
});

describe('subscriptions and test events', () => {
  let w: World;
  beforeAll(async () => {
    w = await world({}, { tls });
  });
  afterAll(() => w.close());

  it('an endpoint receives only the event types it subscribed to; a test event goes to one endpoint only', async () => {
    const other = await startReceiver(tls);
    try {
      const onlySent = await w.api('POST', '/v1/webhooks', { url: other.url, events: ['message.sent'] });
      expect(onlySent.status).toBe(201);
      other.setSecrets([onlySent.body.secret]);
      const all = await w.register();

      const { eventId } = await inbound(
        w.server.ctx,
        w.partner.partnerId,
        w.channel,
        '+14155550122',
        'only for the first',
      );
      await waitFor(() => w.receiver.delivered.includes(eventId), 'received by the all-events endpoint', 5000);
      const test = await w.api('POST', `/v1/webhooks/${all.id}/test`);
      expect(test.status).toBe(202);
      const t = await waitFor(
        () => w.receiver.received.find((x) => x.id === test.body.event_id),
        'the test event',
        5000,
      );
      expect(t.verified).toBe(true);
      expect(t.body).toMatchObject({ event: 'webhook.test', endpoint_id: all.id });

      // Give the other endpoint every chance to (wrongly) receive either.
      const sent = await w.api('POST', '/v1/messages', { channel: 'sms', to: '+14155550133', body: 'x' });
      await waitFor(
        () => other.received.some((x) => x.body?.message_id === sent.body.id),
        'message.sent at the filtered endpoint',
        5000,
      );
      expect(other.received.map((x) => x.body.event)).toEqual(['message.sent']);
      expect(
        (await deliveryRows(w.server.ctx, onlySent.body.id)).every(
          (d) => d.event_id !== eventId && d.event_id !== test.body.event_id,
        ),
      ).toBe(true);
    } finally {
      await other.close();
    }
  });
});

describe('secret rotation', () => {
  let w: World;
  beforeAll(async () => {
    // 0.01 h = 36 s of grace.
    w = await world({ 'webhooksOut.rotationGraceHours': 0.01 }, { tls });
  });
  afterAll(() => w.close());

  it('old and new secret both sign during the grace period, then only the new one', async () => {
    const ep = await w.register();
    const rotated = await w.api('POST', `/v1/webhooks/${ep.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    const fresh: string = rotated.body.secret;
    expect(fresh).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(fresh).not.toBe(ep.secret);
    const endsIn = Date.parse(rotated.body.secret_rotation_ends_at) - w.server.clock.now();
    expect(endsIn).toBeGreaterThan(30_000);
    expect(endsIn).toBeLessThanOrEqual(36_000);

    w.receiver.setSecrets([ep.secret, fresh]);
    const during = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550144', 'during')).eventId;
    const r = await waitFor(() => w.receiver.received.find((x) => x.id === during), 'event during grace', 5000);
    expect(r.headers['webhook-signature'].split(' ')).toHaveLength(2);
    for (const secret of [ep.secret, fresh])
      expect(() => new Webhook(secret).verify(r.raw.toString(), r.headers)).not.toThrow();
    expect(r.headers['x-msgd-signature']).toBe('sha256=' + createHmac('sha256', fresh).update(r.raw).digest('hex'));
    expect(r.headers['x-msgd-signature-previous']).toBe(
      'sha256=' + createHmac('sha256', ep.secret).update(r.raw).digest('hex'),
    );

    // The grace period ends: the previous secret's expiry is put in the past rather than msgd's
    // clock moved past it, since on PostgreSQL a job is due on the database's clock, which a
    // test cannot move (a delivery enqueued at msgd's moved time would wait the difference).
    await w.server.ctx.store.run(
      sql`UPDATE webhook_endpoints SET previous_secret_expires_at = ${w.server.clock.now() - 1} WHERE id = ${ep.id}`,
    );
    const ended = await w.api('GET', `/v1/webhooks/${ep.id}`);
    expect(ended.body.secret_rotation_ends_at).toBeNull();
    const after = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550144', 'after')).eventId;
    const r2 = await waitFor(() => w.receiver.received.find((x) => x.id === after), 'event after grace', 5000);
    expect(r2.headers['webhook-signature'].split(' ')).toHaveLength(1);
    expect(r2.headers['x-msgd-signature-previous']).toBeUndefined();
    expect(() => new Webhook(fresh).verify(r2.raw.toString(), r2.headers)).not.toThrow();
    expect(() => new Webhook(ep.secret).verify(r2.raw.toString(), r2.headers)).toThrow();
  });
});
