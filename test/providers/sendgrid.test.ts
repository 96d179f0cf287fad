import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sendgridAdapter as adapter } from '../../src/providers/sendgrid/send.js';
import type { MessageContent } from '../../src/providers/types.js';
import { startSendgridFake, type SendgridFake } from '../fakes/sendgrid.js';
import { makeCtx, makeGw, makeMsg, newDispatcher } from './helpers.js';

const KEY = 'SG.test-key';
const dispatcher = newDispatcher();
const ctx = makeCtx(dispatcher);
let fake: SendgridFake;

const gw = (key = KEY) => makeGw('sendgrid', { base_url: fake.url }, { api_key: key });
const email = (
  content: Partial<Extract<MessageContent, { kind: 'email' }>> = {},
  to = 'to@example.com',
  from = 'news@example.com',
) => makeMsg('email', to, from, { kind: 'email', subject: 'Hi', html: '<p>Hello</p>', text: 'Hello', ...content });

beforeAll(async () => {
  fake = await startSendgridFake({ apiKeys: [KEY], restrictedKeys: ['SG.readonly'] });
});
afterAll(async () => {
  await fake.close();
  await dispatcher.close();
});
beforeEach(() => fake.reset());

describe('sendgrid adapter', () => {
  it('posts v3 mail/send with plain before html and returns X-Message-Id', async () => {
    const m = email({ fromName: 'Example News', replyTo: 'help@example.com' });
    const r = await adapter.send(gw(), m, ctx);
    const req = fake.last()!;
    expect(req.path).toBe('/v3/mail/send');
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.body).toEqual({
      personalizations: [{ to: [{ email: 'to@example.com' }], custom_args: { msgd_message_id: m.id } }],
      from: { email: 'news@example.com', name: 'Example News' },
      reply_to: { email: 'help@example.com' },
      subject: 'Hi',
      content: [
        { type: 'text/plain', value: 'Hello' },
        { type: 'text/html', value: '<p>Hello</p>' },
      ],
    });
    expect(req.reply!.status).toBe(202);
    expect(req.reply!.body).toBe('');
    expect(fake.sent).toHaveLength(1);
    expect(r).toEqual({ outcome: 'accepted', providerMessageId: fake.sent[0].messageId });
  });

  it('sends html-only mail and omits name and reply_to when absent', async () => {
    const r = await adapter.send(gw(), email({ text: undefined }), ctx);
    const body = fake.last()!.body;
    expect(body.content).toEqual([{ type: 'text/html', value: '<p>Hello</p>' }]);
    expect(body.from).toEqual({ email: 'news@example.com' });
    expect(body).not.toHaveProperty('reply_to');
    expect(r.outcome).toBe('accepted');
  });

  it('accepts a 200 (sandbox mode) under our own message id', async () => {
    fake.failNext({ kind: 'status', status: 200, body: '' });
    const m = email();
    expect(await adapter.send(gw(), m, ctx)).toEqual({
      outcome: 'accepted',
      providerMessageId: m.id,
      providerStatus: 'sandbox',
    });
  });

  it('retries a 429 using X-RateLimit-Reset', async () => {
    fake.failNext({ kind: 'rate_limit', retryAfterS: 2 });
    const r = await adapter.send(gw(), email(), ctx);
    expect(r).toMatchObject({ outcome: 'retry', code: 'sendgrid_429', message: 'too many requests' });
    const after = r.outcome === 'retry' ? r.retryAfterMs : undefined;
    expect(after).toBeGreaterThan(1000);
    expect(after).toBeLessThanOrEqual(3000);
  });

  it('retries a 408: the provider gave up waiting for the request and took nothing', async () => {
    fake.failNext({ kind: 'status', status: 408 });
    const r = await adapter.send(gw(), email(), ctx);
    expect(fake.last()!.reply!.status).toBe(408);
    expect(r).toMatchObject({ outcome: 'retry', code: 'sendgrid_408' });
    expect((r as { maybeDelivered?: boolean }).maybeDelivered ?? false).toBe(false);
  });

  it('retries 5xx, timeouts and resets', async () => {
    fake.failNext({ kind: 'status', status: 503 });
    fake.failNext({ kind: 'timeout' });
    fake.failNext({ kind: 'reset' });
    const a = await adapter.send(gw(), email(), ctx);
    const b = await adapter.send(gw(), email(), makeCtx(dispatcher, { timeoutMs: 150 }));
    const c = await adapter.send(gw(), email(), ctx);
    expect(a).toMatchObject({ outcome: 'retry', code: 'sendgrid_503' });
    expect(b).toMatchObject({ outcome: 'retry', code: 'timeout' });
    expect(c).toMatchObject({ outcome: 'retry', code: 'network_error' });
  });

  it('fails on a bad key (401) and a key without mail.send (403)', async () => {
    const bad = await adapter.send(gw('SG.nope'), email(), ctx);
    const restricted = await adapter.send(gw('SG.readonly'), email(), ctx);
    expect(bad).toEqual({
      outcome: 'failed',
      code: 'sendgrid_401',
      message: 'The provided authorization grant is invalid, expired, or revoked',
    });
    expect(restricted).toMatchObject({ outcome: 'failed', code: 'sendgrid_403' });
  });

  it('fails a 400 with the field-level errors joined', async () => {
    const r = await adapter.send(gw(), email({ subject: '' }, 'to@example.com', 'not-an-address'), ctx);
    expect(r).toMatchObject({ outcome: 'failed', code: 'sendgrid_400' });
    const message = r.outcome === 'failed' ? r.message : '';
    expect(message).toContain('from.email: The from email does not contain a valid address.');
    expect(message).toContain('subject: The subject is required.');
  });

  it('fails a 413 for one recipient only', async () => {
    fake.failFor('big@example.com', { kind: 'error', status: 413, message: 'Payload Too Large' });
    const big = await adapter.send(gw(), email({}, 'big@example.com'), ctx);
    const ok = await adapter.send(gw(), email(), ctx);
    expect(big).toEqual({ outcome: 'failed', code: 'sendgrid_413', message: 'Payload Too Large' });
    expect(ok.outcome).toBe('accepted');
  });
});
