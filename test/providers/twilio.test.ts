import { Agent } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { callProvider, type HttpResponse } from '../../src/providers/http.js';
import { twilioAdapter as adapter } from '../../src/providers/twilio/send.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { makeCtx, makeGw, makeMsg, newDispatcher, text } from './helpers.js';
import { twilioSettings } from '../../src/providers/twilio/kind.js';

const SID = 'AC0123456789abcdef0123456789abcdef';
const TOKEN = 'test_auth_token';
const dispatcher = newDispatcher();
const ctx = makeCtx(dispatcher, { publicUrl: 'https://gw.example.com' });
let fake: TwilioFake;

const gw = (extra: Record<string, unknown> = {}, token = TOKEN) =>
  makeGw('twilio', { base_url: fake.url, account_sid: SID, ...extra }, { auth_token: token });
const sms = (to = '+15558675310', body = 'Your code is 123456') => makeMsg('sms', to, '+15017250604', text(body));

beforeAll(async () => {
  fake = await startTwilioFake({ accounts: { [SID]: TOKEN } });
});
afterAll(async () => {
  await fake.close();
  await dispatcher.close();
});
beforeEach(() => fake.reset());

describe('twilio adapter', () => {
  it('creates a message with Basic auth and form parameters, returning the SM sid', async () => {
    const g = gw();
    const msg = sms();
    const r = await adapter.send(g, msg, ctx);
    const req = fake.last()!;
    expect(req.path).toBe(`/2010-04-01/Accounts/${SID}/Messages.json`);
    expect(req.headers.authorization).toBe(`Basic ${Buffer.from(`${SID}:${TOKEN}`).toString('base64')}`);
    expect(req.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(req.headers.accept).toBe('application/json');
    expect(req.body).toEqual({
      To: '+15558675310',
      From: '+15017250604',
      Body: 'Your code is 123456',
      // The callback names the gateway and the message: its reports find it by msgd's id.
      StatusCallback: `https://gw.example.com/api/webhook.php?gateway=${g.id}&message=${msg.id}`,
    });
    const answered = JSON.parse(req.reply!.body);
    expect(req.reply!.status).toBe(201);
    expect(answered.sid).toMatch(/^SM[0-9a-f]{32}$/);
    expect(answered.num_segments).toBe('1');
    expect(answered.date_created).toMatch(/^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000$/);
    expect(r).toEqual({
      outcome: 'accepted',
      providerMessageId: answered.sid,
      providerStatus: 'queued',
      namedInReports: true,
    });
  });

  it('uses MessagingServiceSid instead of From and omits StatusCallback without a public URL', async () => {
    const r = await adapter.send(
      gw({ messaging_service_sid: 'MG0123456789abcdef0123456789abcdef' }),
      sms(),
      makeCtx(dispatcher),
    );
    const body = fake.last()!.body;
    expect(body.MessagingServiceSid).toBe('MG0123456789abcdef0123456789abcdef');
    expect(body).not.toHaveProperty('From');
    expect(body).not.toHaveProperty('StatusCallback');
    // No callback, so any report (a Messaging Service's own callback URL) has only the SID.
    expect(r).toEqual({
      outcome: 'accepted',
      providerMessageId: expect.stringMatching(/^SM/),
      providerStatus: 'accepted',
      namedInReports: false,
    });
  });

  it('retries 20429 with the Retry-After hint', async () => {
    fake.failNext({ kind: 'rate_limit', retryAfterS: 3 });
    const r = await adapter.send(gw(), sms(), ctx);
    expect(fake.last()!.reply!.status).toBe(429);
    expect(r).toMatchObject({ outcome: 'retry', code: '20429', retryAfterMs: 3000 });
  });

  it('retries a 408: the provider gave up waiting for the request and took nothing', async () => {
    fake.failNext({ kind: 'status', status: 408 });
    const r = await adapter.send(gw(), sms(), ctx);
    expect(fake.last()!.reply!.status).toBe(408);
    expect(r).toMatchObject({ outcome: 'retry' });
    expect((r as { maybeDelivered?: boolean }).maybeDelivered ?? false).toBe(false);
  });

  it('retries 5xx, timeouts and resets', async () => {
    fake.failNext({ kind: 'status', status: 500 });
    fake.failNext({ kind: 'timeout' });
    fake.failNext({ kind: 'reset' });
    const a = await adapter.send(gw(), sms(), ctx);
    const b = await adapter.send(gw(), sms(), makeCtx(dispatcher, { timeoutMs: 150 }));
    const c = await adapter.send(gw(), sms(), ctx);
    expect(a).toMatchObject({ outcome: 'retry', code: '20500' });
    expect(b).toMatchObject({ outcome: 'retry', code: 'timeout' });
    expect(c).toMatchObject({ outcome: 'retry', code: 'network_error' });
    // A 5xx is Twilio's answer that it did not take the message; a timeout or a reset after
    // the request was sent may have been accepted.
    expect([a, b, c].map((r) => (r as { maybeDelivered?: boolean }).maybeDelivered ?? false)).toEqual([
      false,
      true,
      true,
    ]);
  });

  it('retries an answer whose body stalls after its headers, as one that may have been taken', async () => {
    fake.failNext({ kind: 'stall' });
    const started = Date.now();
    const r = await adapter.send(gw(), sms(), makeCtx(dispatcher, { timeoutMs: 150 }));
    expect(r).toMatchObject({ outcome: 'retry', code: 'timeout', maybeDelivered: true });
    expect((r as { message: string }).message).toBe('provider began to answer, then sent nothing for 150 ms');
    expect(Date.now() - started).toBeLessThan(2_000);
    // The connection it stalled on is not reused: the next send goes through.
    expect(await adapter.send(gw(), sms(), ctx)).toMatchObject({ outcome: 'accepted' });
  });

  it('reads no more than 1 MB of an answer: a huge error page is cut, reported and left behind', async () => {
    fake.failNext({ kind: 'status', status: 503, body: '<html>' + 'x'.repeat(3 * 1024 * 1024) });
    const r = await adapter.send(gw(), sms(), ctx);
    expect(r).toMatchObject({ outcome: 'retry', code: 'http_503' });
    expect((r as { message: string }).message).toMatch(/^HTTP 503: <html>x+…$/);
    fake.failNext({ kind: 'status', status: 503, body: '<html>' + 'x'.repeat(3 * 1024 * 1024) });
    const raw = (await callProvider(ctx, {
      url: `${fake.url}/2010-04-01/Accounts/${SID}/Messages.json`,
      headers: {},
    })) as HttpResponse;
    expect(raw.status).toBe(503);
    expect(raw.text.startsWith('<html>x')).toBe(true);
    expect(raw.text.length).toBeLessThanOrEqual(1024 * 1024);
    // The cut connection is not reused: the next send goes through.
    expect(await adapter.send(gw(), sms(), ctx)).toMatchObject({ outcome: 'accepted' });
  });

  it('times out calls queued for a connection behind a silent provider too, one after the other', async () => {
    // One connection, two calls, a provider that never answers: the second call waits for the
    // first to time out, then times out on its own, instead of hanging.
    const one = new Agent({ connections: 1, pipelining: 1 });
    try {
      fake.failNext({ kind: 'timeout', count: 2 });
      const started = Date.now();
      const results = await Promise.all([1, 2].map(() => adapter.send(gw(), sms(), makeCtx(one, { timeoutMs: 300 }))));
      expect(results.map((r) => `${r.outcome}:${(r as { code?: string }).code}`)).toEqual([
        'retry:timeout',
        'retry:timeout',
      ]);
      expect(Date.now() - started).toBeLessThan(4_000);
      expect(fake.requests).toHaveLength(2);
    } finally {
      await one.destroy();
    }
  });

  it('fails an invalid To with 21211 (real validation by the fake)', async () => {
    const r = await adapter.send(gw(), sms('5551234567'), ctx);
    expect(fake.last()!.reply!.status).toBe(400);
    expect(r).toEqual({
      outcome: 'failed',
      code: '21211',
      message: "The 'To' number 5551234567 is not a valid phone number.",
    });
  });

  it('fails an unsubscribed recipient (21610) and a blocked region (21408), only for them', async () => {
    fake.failFor('+15550001111', { kind: 'error', code: 21610 });
    fake.failFor('+8613800000000', { kind: 'error', code: 21408 });
    const stop = await adapter.send(gw(), sms('+15550001111'), ctx);
    const region = await adapter.send(gw(), sms('+8613800000000'), ctx);
    const ok = await adapter.send(gw(), sms('+15558675310'), ctx);
    expect(stop).toMatchObject({ outcome: 'failed', code: '21610' });
    expect(region).toMatchObject({ outcome: 'failed', code: '21408' });
    expect(ok.outcome).toBe('accepted');
  });

  it('sends with an API key (SK sid and secret) instead of the auth token when the gateway has one', async () => {
    const KEY = 'SK0123456789abcdef0123456789abcdef';
    fake.apiKeys.set(KEY, { account: SID, secret: 'key_secret' });
    const settings = twilioSettings.parse({
      base_url: fake.url,
      account_sid: SID,
      api_key_sid: KEY,
    });
    const keyed = (secret?: string) =>
      makeGw('twilio', settings, { auth_token: TOKEN, ...(secret ? { api_key_secret: secret } : {}) });
    const r = await adapter.send(keyed('key_secret'), sms(), ctx);
    expect(r.outcome).toBe('accepted');
    const req = fake.last()!;
    expect(req.path).toBe(`/2010-04-01/Accounts/${SID}/Messages.json`);
    expect(req.headers.authorization).toBe(`Basic ${Buffer.from(`${KEY}:key_secret`).toString('base64')}`);
    expect(await adapter.send(keyed('wrong'), sms(), ctx)).toMatchObject({ outcome: 'failed', code: '20003' });
    expect(await adapter.send(keyed(), sms(), ctx)).toMatchObject({ outcome: 'failed', code: 'missing_secret' });
    expect(twilioSettings.safeParse({ account_sid: SID, api_key_sid: 'AC123' }).success).toBe(false);
  });

  it('fails on bad credentials with 20003', async () => {
    const r = await adapter.send(gw({}, 'wrong'), sms(), ctx);
    expect(fake.last()!.reply!.status).toBe(401);
    expect(r).toMatchObject({ outcome: 'failed', code: '20003', message: 'Authenticate' });
  });

  it('retries while Twilio is unreachable', async () => {
    await fake.down();
    const r = await adapter.send(gw(), sms(), ctx);
    // A new connection is refused before a byte is sent: certainly not delivered. (A kept-alive
    // socket the server drops mid-request is ambiguous, and flagged.)
    const fresh = newDispatcher();
    const refused = await adapter.send(gw(), sms(), makeCtx(fresh));
    await fresh.close();
    await fake.up();
    expect(r).toMatchObject({ outcome: 'retry', code: 'network_error' });
    expect(refused).toMatchObject({
      outcome: 'retry',
      code: 'network_error',
      message: expect.stringContaining('ECONNREFUSED'),
    });
    expect((refused as { maybeDelivered?: boolean }).maybeDelivered).toBeUndefined();
    expect((await adapter.send(gw(), sms(), ctx)).outcome).toBe('accepted');
  });
});
