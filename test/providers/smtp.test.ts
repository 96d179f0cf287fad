import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { smtpAdapter as adapter } from '../../src/providers/smtp/send.js';
import type { MessageContent } from '../../src/providers/types.js';
import { startSmtpFake, type SmtpFake } from '../fakes/smtp.js';
import { makeCtx, makeGw, makeMsg, newDispatcher } from './helpers.js';

const dispatcher = newDispatcher();
const ctx = makeCtx(dispatcher, { timeoutMs: 3_000 });
let plain: SmtpFake;
let authed: SmtpFake;

const gwFor = (fake: SmtpFake, extra: Record<string, unknown> = {}, secrets: Record<string, string> = {}) =>
  makeGw(
    'smtp',
    { host: fake.host, port: fake.port, secure: false, require_tls: false, tls_reject_unauthorized: true, ...extra },
    secrets,
  );
const mail = (to = 'alice@example.com', content: Partial<Extract<MessageContent, { kind: 'email' }>> = {}) =>
  makeMsg('email', to, 'noreply@msgd.test', {
    kind: 'email',
    subject: 'Your receipt',
    html: '<p>Thanks for your order</p>',
    text: 'Thanks for your order',
    ...content,
  });

beforeAll(async () => {
  plain = await startSmtpFake();
  authed = await startSmtpFake({ auth: { user: 'relay', pass: 's3cret' } });
});
afterAll(async () => {
  await adapter.close!();
  await plain.close();
  await authed.close();
  await dispatcher.close();
});
beforeEach(() => {
  plain.reset();
  authed.reset();
});

describe('smtp adapter', () => {
  it('delivers to a real SMTP server with the right envelope, headers and body', async () => {
    const m = mail('alice@example.com', { fromName: 'Shop Team', replyTo: 'help@msgd.test' });
    const r = await adapter.send(gwFor(plain), m, ctx);
    expect(plain.messages).toHaveLength(1);
    const got = plain.messages[0];
    expect(got.envelopeFrom).toBe('noreply@msgd.test');
    expect(got.envelopeTo).toEqual(['alice@example.com']);
    expect(got.subject).toBe('Your receipt');
    expect(got.headers.from).toBe('Shop Team <noreply@msgd.test>');
    expect(got.headers.to).toBe('alice@example.com');
    expect(got.headers['reply-to']).toBe('help@msgd.test');
    expect(got.headers['x-msgd-message-id']).toBe(m.id);
    expect(got.headers['content-type']).toMatch(/^multipart\/alternative/);
    expect(got.raw).toContain('<p>Thanks for your order</p>');
    // No reports come back over SMTP: nothing needs to find the message by its Message-ID.
    expect(r).toEqual({ outcome: 'accepted', providerMessageId: got.messageId, namedInReports: true });
  });

  it('authenticates when a user is set', async () => {
    const r = await adapter.send(gwFor(authed, { user: 'relay' }, { password: 's3cret' }), mail(), ctx);
    expect(r.outcome).toBe('accepted');
    expect(authed.messages[0].user).toBe('relay');
  });

  it('fails on rejected credentials (535), then works once the password is fixed', async () => {
    const g = gwFor(authed, { user: 'relay' }, { password: 'wrong' });
    const bad = await adapter.send(g, mail(), ctx);
    expect(bad).toMatchObject({ outcome: 'failed', code: 'smtp_535' });
    g.secrets.password = 's3cret';
    expect((await adapter.send(g, mail(), ctx)).outcome).toBe('accepted');
  });

  it('fails permanently on a 550 for the recipient and on a 554 after DATA', async () => {
    plain.failFor('nobody@example.com', { kind: 'reply', code: 550 });
    plain.failNext({ kind: 'reply', code: 554, stage: 'data', message: 'Message rejected as spam' });
    const g = gwFor(plain);
    const rcpt = await adapter.send(g, mail('nobody@example.com'), ctx);
    const data = await adapter.send(g, mail('bob@example.com'), ctx);
    expect(rcpt).toMatchObject({ outcome: 'failed', code: 'smtp_550' });
    expect(data).toMatchObject({ outcome: 'failed', code: 'smtp_554' });
    expect(data.outcome === 'failed' && data.message).toContain('Message rejected as spam');
    expect(plain.messages).toHaveLength(0);
  });

  it('retries a 4xx reply', async () => {
    plain.failFor('busy@example.com', { kind: 'reply', code: 451, count: 1 });
    const g = gwFor(plain);
    const first = await adapter.send(g, mail('busy@example.com'), ctx);
    const second = await adapter.send(g, mail('busy@example.com'), ctx);
    expect(first).toMatchObject({ outcome: 'retry', code: 'smtp_451' });
    expect(second.outcome).toBe('accepted');
  });

  it('retries while the server is down and delivers once it is back', async () => {
    const g = gwFor(plain);
    expect((await adapter.send(g, mail(), ctx)).outcome).toBe('accepted');
    await plain.down();
    const down = await adapter.send(g, mail(), ctx);
    expect(down).toMatchObject({ outcome: 'retry', code: 'network_error' });
    // Refused: the mail cannot have gone, so no duplicate is possible.
    expect(down.outcome === 'retry' && down.maybeDelivered).toBeFalsy();
    await plain.up();
    expect((await adapter.send(g, mail(), ctx)).outcome).toBe('accepted');
    expect(plain.messages).toHaveLength(2);
  });

  it('retries when the server never answers the DATA', async () => {
    plain.failNext({ kind: 'timeout' });
    const started = Date.now();
    const r = await adapter.send(gwFor(plain), mail(), makeCtx(dispatcher, { timeoutMs: 300 }));
    // The server may have taken the mail and only its answer been lost.
    expect(r).toMatchObject({ outcome: 'retry', code: 'timeout', maybeDelivered: true });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('retries without suspecting a duplicate when the server takes the connection but never greets', async () => {
    // A relay behind a firewall or overloaded: TCP connects, no 220 ever comes.
    const sockets = new Set<Socket>();
    const mute = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => mute.listen(0, '127.0.0.1', r));
    try {
      const port = (mute.address() as AddressInfo).port;
      const g = makeGw(
        'smtp',
        { host: '127.0.0.1', port, secure: false, require_tls: false, tls_reject_unauthorized: true },
        {},
      );
      const r = await adapter.send(g, mail(), makeCtx(dispatcher, { timeoutMs: 300 }));
      expect(r).toMatchObject({ outcome: 'retry', code: 'timeout' });
      expect(r.outcome === 'retry' && r.message).toMatch(/greeting/i);
      expect(r.outcome === 'retry' && r.maybeDelivered).toBeFalsy();
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => mute.close(r));
    }
  });

  it('refuses non-email content', async () => {
    const m = makeMsg('email', 'a@example.com', 'b@example.com', { kind: 'text', text: 'hi' });
    expect(await adapter.send(gwFor(plain), m, ctx)).toMatchObject({ outcome: 'failed', code: 'unsupported_content' });
  });
});

describe('smtp adapter over TLS', () => {
  let starttls: SmtpFake;
  let implicit: SmtpFake;
  beforeAll(async () => {
    starttls = await startSmtpFake({ tls: 'starttls', auth: { user: 'relay', pass: 'pw' } });
    implicit = await startSmtpFake({ tls: 'implicit' });
  });
  afterAll(async () => {
    await starttls.close();
    await implicit.close();
  });

  it('upgrades with STARTTLS when require_tls is set', async () => {
    const g = gwFor(starttls, { require_tls: true, tls_reject_unauthorized: false, user: 'relay' }, { password: 'pw' });
    expect((await adapter.send(g, mail(), ctx)).outcome).toBe('accepted');
    expect(starttls.messages[0].secure).toBe(true);
  });

  it('speaks TLS from the first byte when secure is set', async () => {
    const g = gwFor(implicit, { secure: true, tls_reject_unauthorized: false });
    expect((await adapter.send(g, mail(), ctx)).outcome).toBe('accepted');
    expect(implicit.messages[0].secure).toBe(true);
  });

  it('does not deliver to an unverifiable certificate when verification is on', async () => {
    const g = gwFor(implicit, { secure: true, tls_reject_unauthorized: true });
    const r = await adapter.send(g, mail(), ctx);
    // Retried rather than failed: the operator can fix the certificate before the message expires.
    expect(r).toMatchObject({ outcome: 'retry', code: 'network_error' });
    expect(r.outcome === 'retry' && r.message).toMatch(/self-signed/);
    // The handshake failed before any SMTP command: the mail cannot have gone.
    expect(r.outcome === 'retry' && r.maybeDelivered).toBeFalsy();
    expect(implicit.messages).toHaveLength(1);
  });
});
