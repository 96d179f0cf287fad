import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { setupPartner, startTestServer, type PartnerSetup, type TestServer } from '../helpers/server.js';
import { startSendgridFake, type SendgridFake } from '../fakes/sendgrid.js';
import { startSmtpFake, type SmtpFake } from '../fakes/smtp.js';
import { EMAIL, FAST_DISPATCH, SG_KEY, send, sendgridGateway, smtpGateway } from '../helpers/gateways.js';
import { balanceOf, jobsOf, waitStatus } from '../helpers/rows.js';
import { expectFailedAndRefunded, expectSent } from '../helpers/expectations.js';

// Email through the full path: SendGrid v3 Mail Send over HTTP, and SMTP through
// nodemailer to a real smtp-server.

const MAIL = {
  to: 'ana@example.com',
  subject: 'Your receipt',
  html: '<p>Thanks!</p>',
  text: 'Thanks!',
  from_name: 'The Shop',
  reply_to: 'help@shop.example',
};

describe('sendgrid through the full path', () => {
  let s: TestServer;
  let fake: SendgridFake;
  let p: PartnerSetup;
  let from: string;
  beforeAll(async () => {
    fake = await startSendgridFake();
    s = await startTestServer(FAST_DISPATCH);
    p = await setupPartner(s.ctx, { balance: '10', prices: { email: '0.001' } });
    from = (await sendgridGateway(s.ctx, p.partnerId, fake)).from;
  });
  afterAll(async () => {
    await s?.stop();
    await fake?.close();
  });
  beforeEach(() => {
    fake.reset();
    fake.sent.length = 0;
  });

  async function mail(body: Record<string, unknown> = MAIL) {
    const r = await send(s.url, EMAIL, body, p.token);
    expect(r.status, r.text).toBe(200);
    return r.body.id as string;
  }

  it('POST /v3/mail/send with bearer key, custom_args carrying the msgd id; X-Message-Id stored', async () => {
    const id = await mail();
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests).toHaveLength(1);
    const req = fake.requests[0];
    expect(req.path).toBe('/v3/mail/send');
    expect(req.headers.authorization).toBe(`Bearer ${SG_KEY}`);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.body).toEqual({
      personalizations: [{ to: [{ email: 'ana@example.com' }], custom_args: { msgd_message_id: id } }],
      from: { email: from, name: 'The Shop' },
      reply_to: { email: 'help@shop.example' },
      subject: 'Your receipt',
      content: [
        { type: 'text/plain', value: 'Thanks!' },
        { type: 'text/html', value: '<p>Thanks!</p>' },
      ],
    });
    expect(req.reply!.status).toBe(202);
    expect(fake.sent).toHaveLength(1);
    // Not every SendGrid event carries custom_args (FACTS C2's click): the X-Message-Id stays indexed.
    await expectSent(s.ctx, m, fake.sent[0].messageId, { indexed: true });
  });

  it('a 429 is retried when the rate-limit window reopens, then sent', async () => {
    fake.failNext({ kind: 'rate_limit', retryAfterS: 1 });
    const id = await mail();
    const m = await waitStatus(s.ctx, id, 'sent', 6_000);
    expect(fake.requests.map((r) => r.reply?.status)).toEqual([429, 202]);
    const reset = Number(fake.requests[0].reply!.headers['x-ratelimit-reset']) * 1000;
    expect(fake.requests[1].at).toBeGreaterThanOrEqual(reset - 50);
    await expectSent(s.ctx, m, fake.sent[0].messageId);
  });

  it('5xx and a timeout are retried, then sent once, flagged a possible duplicate (the timeout)', async () => {
    fake.failNext({ kind: 'status', status: 503 });
    fake.failNext({ kind: 'timeout' });
    const id = await mail();
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests).toHaveLength(3);
    expect(fake.sent).toHaveLength(1);
    await expectSent(s.ctx, m, fake.sent[0].messageId, { uncertain: true });
  });

  it("a revoked API key (401) fails with SendGrid's message and refunds", async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.apiKeys.delete(SG_KEY);
    try {
      const id = await mail();
      const m = await waitStatus(s.ctx, id, 'failed');
      expect(m.error_message).toMatch(/authorization grant is invalid, expired, or revoked/);
      await expectFailedAndRefunded(s.ctx, p.partnerId, m, 'sendgrid_401', start);
      expect(fake.requests).toHaveLength(1);
    } finally {
      fake.apiKeys.add(SG_KEY);
    }
  });

  it('a 400 field error fails with the field named, refunded', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failNext({
      kind: 'error',
      status: 400,
      field: 'from',
      message: 'The from address does not match a verified Sender Identity.',
    });
    const id = await mail();
    const m = await waitStatus(s.ctx, id, 'failed');
    expect(m.error_message).toBe('from: The from address does not match a verified Sender Identity.');
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, 'sendgrid_400', start);
  });

  it('retries exhausted: failed, refunded, job dead', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failFor('down@example.com', { kind: 'status', status: 500 });
    const id = await mail({ ...MAIL, to: 'down@example.com' });
    const m = await waitStatus(s.ctx, id, 'failed', 10_000);
    expect(fake.requests).toHaveLength(4);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, 'retries_exhausted', start);
    expect(await jobsOf(s.ctx, id)).toMatchObject([{ state: 'dead', attempts: 4 }]);
  });
});

describe('smtp through the full path (real SMTP server)', () => {
  const AUTH = { user: 'relay', pass: 's3cret' };
  let s: TestServer;
  let fake: SmtpFake;
  let p: PartnerSetup;
  let from: string;
  beforeAll(async () => {
    fake = await startSmtpFake({ auth: AUTH });
    s = await startTestServer({ ...FAST_DISPATCH, 'dispatch.timeoutMs': 2_000 });
    p = await setupPartner(s.ctx, { balance: '10', prices: { email: '0.001' } });
    from = (await smtpGateway(s.ctx, p.partnerId, fake, AUTH)).from;
  });
  afterAll(async () => {
    await s?.stop();
    await fake?.close();
  });
  beforeEach(() => fake.reset());

  async function mail(body: Record<string, unknown> = MAIL) {
    const r = await send(s.url, EMAIL, body, p.token);
    expect(r.status, r.text).toBe(200);
    return r.body.id as string;
  }

  it('authenticates, delivers envelope and headers, stores the Message-ID', async () => {
    const id = await mail();
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.messages).toHaveLength(1);
    const got = fake.messages[0];
    expect(got.user).toBe('relay');
    expect(got.envelopeFrom).toBe(from);
    expect(got.envelopeTo).toEqual(['ana@example.com']);
    expect(got.subject).toBe('Your receipt');
    expect(got.headers.from).toBe(`The Shop <${from}>`);
    expect(got.headers['reply-to']).toBe('help@shop.example');
    expect(got.headers['x-msgd-message-id']).toBe(id);
    expect(got.raw).toContain('<p>Thanks!</p>');
    // Derived from msgd's id, so every attempt of one message carries the same Message-ID.
    expect(got.messageId).toBe(`<${id}@${from.split('@')[1]}>`);
    await expectSent(s.ctx, m, got.messageId!);
  });

  it('a 550 mailbox unavailable fails with the SMTP code and refunds', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failFor('gone@example.com', { kind: 'reply', code: 550 });
    const id = await mail({ ...MAIL, to: 'gone@example.com' });
    const m = await waitStatus(s.ctx, id, 'failed');
    expect(m.error_message).toMatch(/mailbox unavailable/);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, /^smtp_(550|rejected)$/, start);
    expect(fake.messages).toHaveLength(0);
  });

  it('a 451 try-again-later is retried, then delivered once', async () => {
    fake.failNext({ kind: 'reply', code: 451, stage: 'data' });
    const id = await mail();
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.messages).toHaveLength(1);
    await expectSent(s.ctx, m, fake.messages[0].messageId!);
  });

  it('retries exhausted on repeated 4xx: failed, refunded, job dead', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failFor('busy@example.com', { kind: 'reply', code: 452, stage: 'rcpt' });
    const id = await mail({ ...MAIL, to: 'busy@example.com' });
    const m = await waitStatus(s.ctx, id, 'failed', 10_000);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, 'retries_exhausted', start);
    expect(await jobsOf(s.ctx, id)).toMatchObject([{ state: 'dead', attempts: 4 }]);
  });
});
