import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messageQuote } from '../../src/http/schemas/v1.js';
import { connect, setupPartner, type PartnerSetup, type TestServer } from '../helpers/server.js';
import { balanceOf } from '../helpers/rows.js';
import { type Sql, sql } from '../../src/db/sql.js';
import { call, startV1 } from './helpers.js';

// POST /v1/messages/quote: the price and the verdict of the send the body describes, from the
// same rules and prices a send uses, with nothing written.

let server: TestServer;
let a: PartnerSetup;
let b: PartnerSetup;

const count = async (q: Sql) => (await server.ctx.store.get<{ n: number }>(q))!.n;
/**
 * Every row a send could write for a partner: messages, ledger entries, idempotency keys,
 * events, and its balance (a message's dispatch job comes with its message).
 */
const writes = async (p: PartnerSetup) => ({
  messages: await count(sql`SELECT count(*) AS n FROM messages WHERE partner_id = ${p.partnerId}`),
  ledger: await count(sql`SELECT count(*) AS n FROM ledger_entries WHERE partner_id = ${p.partnerId}`),
  idempotency: await count(sql`SELECT count(*) AS n FROM idempotency_keys WHERE partner_id = ${p.partnerId}`),
  events: await count(sql`SELECT count(*) AS n FROM events WHERE partner_id = ${p.partnerId}`),
  balance: await balanceOf(server.ctx, p.partnerId),
});
const quote = (token: string, body: unknown, headers?: Record<string, string>) =>
  call(server, 'POST', '/v1/messages/quote', { token, body, headers });
const sms = (body: string, extra: Record<string, unknown> = {}) => ({
  channel: 'sms',
  to: '+14155550123',
  body,
  ...extra,
});

beforeAll(async () => {
  server = await startV1({ 'scheduling.minAheadSeconds': 60 });
  a = await setupPartner(server.ctx, { balance: '1.00', prices: { sms: '0.0075', email: '0.001' } });
  b = await setupPartner(server.ctx, { balance: '1.00', prices: { sms: '0.05' } });
  await connect(server.ctx, a.partnerId, { kind: 'sandbox', name: `sms-${a.slug}` }, 'sms', '+15550001111');
  await connect(server.ctx, b.partnerId, { kind: 'sandbox', name: `sms-${b.slug}` }, 'sms', '+15550001112');
  await connect(server.ctx, a.partnerId, { kind: 'sandbox', name: `mail-${a.slug}` }, 'email', 'news@example.com');
  await connect(
    server.ctx,
    a.partnerId,
    {
      kind: 'whatsapp_cloud',
      name: `wa-${a.slug}`,
      settings: { base_url: 'http://127.0.0.1:9', phone_number_id: '106540352242922' },
      secrets: { access_token: 'EAA-wa', app_secret: 'app-secret' },
    },
    'whatsapp',
    '+15550783881',
  );
});
afterAll(() => server.stop());

describe('POST /v1/messages/quote', () => {
  it('prices a GSM-7 SMS per segment: 161 characters are 2 parts of 153', async () => {
    const before = await writes(a);
    const r = await quote(a.token, sms('a'.repeat(161)));
    expect(r.status).toBe(200);
    expect(messageQuote.parse(r.body)).toBeTruthy();
    expect(r.body).toEqual({
      channel: 'sms',
      to: '+14155550123',
      gateway: { id: expect.stringMatching(/^gw_/), name: `sms-${a.slug}` },
      from: '+15550001111',
      send_at: null,
      encoding: 'GSM-7',
      segments: 2,
      per: 'segment',
      unit_price: { micro: 7_500, amount: '0.0075', currency: 'USD' },
      total: { micro: 15_000, amount: '0.015', currency: 'USD' },
      currency: 'USD',
      available: { micro: 1_000_000, amount: '1.00', currency: 'USD' },
      covered: true,
      sendable: true,
      refusal: null,
    });
    // 160 GSM-7 characters still fit one part.
    expect((await quote(a.token, sms('a'.repeat(160)))).body).toMatchObject({ segments: 1, total: { micro: 7_500 } });
    expect(await writes(a)).toEqual(before);
    expect(await balanceOf(server.ctx, a.partnerId)).toBe(1_000_000);
  });

  it('prices a UCS-2 SMS per segment: one Cyrillic letter makes parts of 67', async () => {
    const r = await quote(a.token, sms('ж'.repeat(135)));
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      encoding: 'UCS-2',
      segments: 3,
      unit_price: { micro: 7_500 },
      total: { micro: 22_500, amount: '0.0225' },
    });
    expect((await quote(a.token, sms('ж'.repeat(70)))).body).toMatchObject({ encoding: 'UCS-2', segments: 1 });
    expect((await quote(a.token, sms(`${'a'.repeat(69)}ж`))).body).toMatchObject({ encoding: 'UCS-2', segments: 1 });
    expect((await quote(a.token, sms(`${'a'.repeat(70)}ж`))).body).toMatchObject({ encoding: 'UCS-2', segments: 2 });
  });

  it('answers the price a send then debits', async () => {
    const text = `Your code is ${'ж'.repeat(80)}`;
    const q = await quote(a.token, sms(text));
    const before = await balanceOf(server.ctx, a.partnerId);
    const sent = await call(server, 'POST', '/v1/messages', { token: a.token, body: sms(text) });
    expect(sent.status).toBe(200);
    expect(before - (await balanceOf(server.ctx, a.partnerId))).toBe(q.body.total.micro);
    expect(q.body.total.micro).toBe(15_000);
  });

  it("shows each partner its own prices and gateway, never another's", async () => {
    const ra = await quote(a.token, sms('hello'));
    const rb = await quote(b.token, sms('hello'));
    expect(ra.body.unit_price.micro).toBe(7_500);
    expect(rb.body.unit_price.micro).toBe(50_000);
    expect(rb.body.gateway.name).toBe(`sms-${b.slug}`);
    expect(JSON.stringify(rb.body)).not.toContain(a.slug);
  });

  it('an unassigned channel: sendable false with the 403 channel_not_assigned a send answers', async () => {
    const before = await writes(b);
    const body = { channel: 'messenger', to: '24680', body: 'hi' };
    const r = await quote(b.token, body);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      channel: 'messenger',
      gateway: null,
      from: null,
      sendable: false,
      refusal: { status: 403, code: 'channel_not_assigned' },
    });
    const sent = await call(server, 'POST', '/v1/messages', { token: b.token, body });
    expect(sent.status).toBe(403);
    expect(sent.body.error.code).toBe(r.body.refusal.code);
    expect(sent.body.error.message).toBe(r.body.refusal.message);
    expect(await writes(b)).toEqual(before);
  });

  it('funds that do not cover it: covered false, with the 402 the send answers', async () => {
    const poor = await setupPartner(server.ctx, { balance: '0.01', prices: { sms: '0.0075' } });
    await connect(server.ctx, poor.partnerId, { kind: 'sandbox' }, 'sms', '+15550002222');
    const ok = await quote(poor.token, sms('short'));
    expect(ok.body).toMatchObject({ covered: true, sendable: true, total: { micro: 7_500 } });
    const before = await writes(poor);
    const long = sms('a'.repeat(200));
    const r = await quote(poor.token, long);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      segments: 2,
      total: { micro: 15_000 },
      available: { micro: 10_000 },
      covered: false,
      sendable: false,
      refusal: { status: 402, code: 'insufficient_balance' },
    });
    expect(await writes(poor)).toEqual(before);
    const sent = await call(server, 'POST', '/v1/messages', { token: poor.token, body: long });
    expect(sent.status).toBe(402);
    expect(sent.body.error.message).toBe(r.body.refusal.message);
    expect(await balanceOf(server.ctx, poor.partnerId)).toBe(10_000);
  });

  it('refuses as the send would: send_at out of range, a closed 24-hour window', async () => {
    const soon = new Date(Date.now() + 5_000).toISOString();
    const r = await quote(a.token, sms('later', { send_at: soon }));
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      send_at: null,
      sendable: false,
      refusal: { status: 400, code: 'invalid_request', details: [{ field: 'send_at' }] },
    });
    const later = new Date(Date.now() + 3_600_000);
    const ok = await quote(a.token, sms('later', { send_at: later.toISOString() }));
    expect(ok.body).toMatchObject({ send_at: later.toISOString(), sendable: true });

    const wa = await quote(a.token, { channel: 'whatsapp', to: '+14155550123', body: 'free-form' });
    expect(wa.body).toMatchObject({
      gateway: { name: `wa-${a.slug}` },
      sendable: false,
      refusal: { status: 400, code: 'outside_customer_service_window' },
    });
  });

  it('a malformed body is a 400 as on a send; scope messages:send; Idempotency-Key stores nothing', async () => {
    // A partner of its own: a's earlier send is still writing its events.
    const c = await setupPartner(server.ctx, { balance: '1.00', prices: { sms: '0.0075' } });
    await connect(server.ctx, c.partnerId, { kind: 'sandbox' }, 'sms', '+15550001113');
    const before = await writes(c);
    const bad = await quote(c.token, { channel: 'sms', to: 'nope', body: '' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
    expect((await quote(c.token, '{"channel":')).status).toBe(400);
    const reader = await setupPartner(server.ctx, { scopes: 'messages:read' });
    const denied = await quote(reader.token, sms('hi'));
    expect(denied.status).toBe(403);
    expect((await call(server, 'POST', '/v1/messages/quote', { body: sms('hi') })).status).toBe(401);
    const keyed = await quote(c.token, sms('hi'), { 'idempotency-key': 'quote-1' });
    expect(keyed.status).toBe(200);
    expect(await writes(c)).toEqual(before);
  });
});
