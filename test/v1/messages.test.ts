import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messageAccepted, messageOut } from '../../src/http/schemas/v1.js';
import { suspendPartner } from '../../src/core/partners.js';
import { setupPartner, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { balanceOf, ledgerOf } from '../helpers/rows.js';
import { sql } from '../../src/db/sql.js';
import { call, richPartner, startV1 } from './helpers.js';

// POST /v1/messages shares the send API's money path: the same rules in the same order, the
// same idempotency, the same ledger; and what either API sends is visible through /v1.

let server: TestServer;
let token: string;
let partnerId: string;

beforeAll(async () => {
  server = await startV1();
  const p = await richPartner(server.ctx, 1);
  token = p.token;
  partnerId = p.partnerId;
});
afterAll(() => server.stop());

const balance = () => balanceOf(server.ctx, partnerId);

describe('sending on every channel', () => {
  it.each([
    ['sms', { to: '+14155550123', body: 'hello sms' }, '+14155550123', 10_000],
    ['whatsapp', { to: '+447911123456', body: 'hello wa' }, '+447911123456', 20_000],
    ['email', { to: 'bob@example.com', subject: 'Hi', body: 'plain', html: '<p>hi</p>' }, 'bob@example.com', 1_000],
    ['messenger', { to: '24681357', body: 'hello fb' }, '24681357', 5_000],
    ['instagram', { to: '13572468', body: 'hello ig' }, '13572468', 5_000],
  ])('%s: 200 queued, debited, then visible with its history', async (channel, payload, to, price) => {
    const before = await balance();
    const r = await call(server, 'POST', '/v1/messages', { token, body: { channel, ...payload } });
    expect(r.status).toBe(200);
    expect(messageAccepted.parse(r.body)).toEqual({
      id: r.body.id,
      status: 'queued',
      channel,
      to,
      created_at: r.body.created_at,
      send_at: null,
    });
    expect(r.body.id).toMatch(/^msg_[0-9a-z]{26}$/);
    expect(r.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(before - (await balance())).toBe(price);

    const m = await waitFor(
      async () => {
        const g = await call(server, 'GET', `/v1/messages/${r.body.id}`, { token });
        return g.body?.status === 'sent' || g.body?.status === 'delivered' ? g : undefined;
      },
      'message sent',
      5000,
    );
    expect(messageOut.parse(m.body)).toBeTruthy();
    expect(m.body).toMatchObject({ id: r.body.id, direction: 'outbound', channel, to, price: { micro: price } });
    expect(m.body.history.map((h: any) => h.status).slice(0, 1)).toEqual(['queued']);
    expect(m.body.history.map((h: any) => h.status)).toContain('sent');
    if (channel === 'email')
      expect(m.body.content).toMatchObject({ kind: 'email', subject: 'Hi', text: 'plain', html: '<p>hi</p>' });
    else expect(m.body.content).toEqual({ kind: 'text', text: payload.body });
  });

  it('null for subject or html is the same as leaving it out', async () => {
    const sms = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'sms', to: '+14155550123', body: 'x', subject: null, html: null },
    });
    expect(sms.status, sms.text).toBe(200);
    const email = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'email', to: 'bob@example.com', subject: 'Hi', body: 'plain', html: null },
    });
    expect(email.status, email.text).toBe(200);
    const m = await call(server, 'GET', `/v1/messages/${email.body.id}`, { token });
    expect(m.body.content).toEqual({ kind: 'email', subject: 'Hi', text: 'plain' });
    const noSubject = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'email', to: 'bob@example.com', subject: null, body: 'plain' },
    });
    expect([noSubject.status, noSubject.body.error.details]).toEqual([
      400,
      [{ field: 'subject', message: 'required for email' }],
    ]);
  });

  it('an email address is trimmed, and an internationalised domain sent in ASCII', async () => {
    const r = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'email', to: ' bob@bücher.de ', subject: 'Hi', body: 'x' },
    });
    expect([r.status, r.body.to]).toEqual([200, 'bob@xn--bcher-kva.de']);
    const contact = await call(server, 'POST', '/v1/contacts', { token, body: { email: ' ann@bücher.de' } });
    expect([contact.status, contact.body.email]).toEqual([201, 'ann@xn--bcher-kva.de']);
    const found = await call(server, 'GET', `/v1/contacts?email=${encodeURIComponent('ANN@BÜCHER.de')}`, { token });
    expect(found.body.data.map((c: any) => c.id)).toEqual([contact.body.id]);
  });

  it('a message sent through /api/send-sms.php is visible through /v1', async () => {
    const legacy = await call(server, 'POST', '/api/send-sms.php', {
      token,
      body: { to: '+14155550999', text: 'legacy' },
    });
    expect(legacy.status).toBe(200);
    const m = await call(server, 'GET', `/v1/messages/${legacy.body.id}`, { token });
    expect(m.status).toBe(200);
    expect(m.body).toMatchObject({ id: legacy.body.id, channel: 'sms', to: '+14155550999' });
    const conv = await call(server, 'GET', `/v1/conversations/${m.body.conversation_id}`, { token });
    expect(conv.body.messages.data.map((x: any) => x.id)).toContain(legacy.body.id);
    const list = await call(server, 'GET', `/v1/conversations?contact=${m.body.contact_id}`, { token });
    expect(list.body.data.map((c: any) => c.id)).toEqual([m.body.conversation_id]);
  });

  it('an email sent through /api/send-email.php shows from_name and reply_to as the partner wrote them', async () => {
    const body = {
      to: 'bob@example.com',
      subject: 'Hi',
      html: '<p>hi</p>',
      from_name: 'The Shop',
      reply_to: 'help@shop.example',
    };
    const legacy = await call(server, 'POST', '/api/send-email.php', { token, body });
    expect(legacy.status, legacy.text).toBe(200);
    const m = await call(server, 'GET', `/v1/messages/${legacy.body.id}`, { token });
    expect(m.body.content).toEqual({
      kind: 'email',
      subject: 'Hi',
      html: '<p>hi</p>',
      from_name: 'The Shop',
      reply_to: 'help@shop.example',
    });
  });
});

describe('the rules, in order: 401, 403, 402 exhausted, 400, 402 price', () => {
  it('401 without or with a bad token, even when the body is broken', async () => {
    for (const t of [null, 'msgd_live_nope']) {
      const r = await call(server, 'POST', '/v1/messages', { token: t, body: '{broken' });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe('unauthorized');
    }
  });

  it('403 insufficient_scope before anything about the body', async () => {
    const p = await setupPartner(server.ctx, { scopes: 'messages:read' });
    const r = await call(server, 'POST', '/v1/messages', { token: p.token, body: '{broken' });
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('insufficient_scope');
  });

  it('403 partner_suspended', async () => {
    const p = await richPartner(server.ctx, 7);
    await suspendPartner(server.ctx, p.partnerId, 'test');
    const r = await call(server, 'POST', '/v1/messages', {
      token: p.token,
      body: { channel: 'sms', to: '+14155550123', body: 'x' },
    });
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('partner_suspended');
  });

  it('403 channel_not_assigned before a 400 for the same body', async () => {
    const p = await setupPartner(server.ctx, { balance: '10' });
    const r = await call(server, 'POST', '/v1/messages', {
      token: p.token,
      body: { channel: 'instagram', to: 'not-digits', body: '' },
    });
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('channel_not_assigned');
  });

  it('402 when balance and credit are exhausted, even for an invalid or unparseable body', async () => {
    const p = await richPartner(server.ctx, 8, { balance: '0' });
    for (const body of [{ channel: 'sms', to: 'nope' }, '{broken', { channel: 'carrier-pigeon' }]) {
      const r = await call(server, 'POST', '/v1/messages', { token: p.token, body });
      expect(r.status).toBe(402);
      expect(r.body.error.code).toBe('insufficient_balance');
    }
  });

  it.each([
    [{ channel: 'sms', to: '12345', body: 'x' }, 'to'],
    [{ channel: 'sms', to: '+14155550123' }, 'body'],
    [{ channel: 'email', to: 'bob@example.com', body: 'x' }, 'subject'],
    [{ channel: 'email', to: 'not-an-email', subject: 's', body: 'x' }, 'to'],
    [{ channel: 'messenger', to: '+14155550123', body: 'x' }, 'to'],
    [{ channel: 'sms', to: '+14155550123', body: 'x'.repeat(1601) }, 'body'],
    [{ channel: 'sms', to: '+14155550123', body: 'x', subject: 'no' }, 'subject'],
    [{ channel: 'telegram', to: '+14155550123', body: 'x' }, 'channel'],
    [{ channel: 'sms', to: '+14155550123', body: '  ' }, 'body'],
    [{ channel: 'whatsapp', to: '+14155550123', body: '\n' }, 'body'],
  ])('400 invalid_request naming the field: %j', async (body, field) => {
    const before = await balance();
    const r = await call(server, 'POST', '/v1/messages', { token, body });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_request');
    expect(r.body.error.details.map((d: any) => d.field)).toContain(field);
    expect(await balance()).toBe(before);
  });

  it("field problems are worded in the house style, never in zod's own words", async () => {
    const r = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'fax', to: '', body: 5, subject: 5 },
    });
    expect(r.body.error.details).toEqual([
      { field: 'channel', message: 'must be one of whatsapp, messenger, instagram, sms, email' },
      { field: 'to', message: 'must not be empty' },
      { field: 'body', message: 'must be a string: the message text' },
      { field: 'subject', message: 'must be a string' },
    ]);
    const missing = await call(server, 'POST', '/v1/messages', { token, body: { to: '+14155550123', body: 'x' } });
    expect(missing.body.error.details).toEqual([
      { field: 'channel', message: 'required: one of whatsapp, messenger, instagram, sms, email' },
    ]);
    // The other /v1 routes word their problems the same way.
    const contact = await call(server, 'POST', '/v1/contacts', {
      token,
      body: { phone: 5, name: 'x'.repeat(201), attributes: [] },
    });
    expect(contact.status).toBe(400);
    expect(contact.body.error.details).toEqual([
      { field: 'name', message: 'must be at most 200 characters' },
      { field: 'phone', message: 'must be a string' },
      { field: 'attributes', message: 'must be an object' },
    ]);
  });

  it('400 lists every field problem at once, as the send-*.php endpoints do', async () => {
    const cases: [unknown, { field: string; message: string }[]][] = [
      [
        { channel: 'email', to: 'not-an-address' },
        [
          { field: 'body', message: 'required: the message text' },
          { field: 'to', message: 'must be a valid email address' },
          { field: 'subject', message: 'required for email' },
        ],
      ],
      [
        { channel: 'sms', to: 'bad', body: null },
        [
          { field: 'body', message: 'required: the message text' },
          { field: 'to', message: 'must be a valid phone number in E.164 format with a leading +, e.g. +14155550123' },
        ],
      ],
      [
        { channel: 'email', to: 'bad', subject: 'a\nb', body: 'x', html: 5 },
        [
          { field: 'html', message: 'must be a string' },
          { field: 'to', message: 'must be a valid email address' },
          { field: 'subject', message: 'must not contain line breaks' },
        ],
      ],
      // One problem per field: an empty number is not also "not a valid phone number".
      [{ channel: 'sms', to: '', body: 'x' }, [{ field: 'to', message: 'must not be empty' }]],
      [
        { channel: 'email', to: 'bob@example.com', subject: 's', body: 'x', html: '' },
        [{ field: 'html', message: 'must not be empty: leave it out for a plain-text email' }],
      ],
      [
        { channel: 'email', to: 'bob@example.com', subject: ' ', body: 'x', html: '\n' },
        [
          { field: 'subject', message: 'must not be only whitespace' },
          { field: 'html', message: 'must not be only whitespace' },
        ],
      ],
    ];
    for (const [body, details] of cases) {
      const before = await balance();
      const r = await call(server, 'POST', '/v1/messages', { token, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.details, JSON.stringify(body)).toEqual(details);
      expect(await balance()).toBe(before);
    }
  });

  it('400 invalid_json for a malformed body from a funded partner', async () => {
    const r = await call(server, 'POST', '/v1/messages', { token, body: '{"channel": "sms",' });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_json');
  });

  it('402 when this message costs more than is left', async () => {
    const p = await richPartner(server.ctx, 9, { balance: '0.015' });
    const ok = await call(server, 'POST', '/v1/messages', {
      token: p.token,
      body: { channel: 'sms', to: '+14155550123', body: 'one' },
    });
    expect(ok.status).toBe(200);
    const r = await call(server, 'POST', '/v1/messages', {
      token: p.token,
      body: { channel: 'sms', to: '+14155550123', body: 'two' },
    });
    expect(r.status).toBe(402);
    expect(r.body.error.code).toBe('insufficient_balance');
  });
});

describe('Idempotency-Key', () => {
  it('a retry gets the first answer and is charged once; another body with the key is refused', async () => {
    const body = { channel: 'sms', to: '+14155550777', body: 'once' };
    const headers = { 'idempotency-key': `k-${Date.now()}` };
    const before = await balance();
    const a = await call(server, 'POST', '/v1/messages', { token, body, headers });
    const b = await call(server, 'POST', '/v1/messages', { token, body, headers });
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.body).toEqual(a.body);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(before - (await balance())).toBe(10_000);
    const c = await call(server, 'POST', '/v1/messages', { token, body: { ...body, body: 'other' }, headers });
    expect(c.status).toBe(422);
    expect(c.body.error.code).toBe('idempotency_key_reused');
  });

  it('20 retries at once with one key wait for the first: the same 200 each, one message, one debit', async () => {
    const body = { channel: 'sms', to: '+14155550778', body: 'at once' };
    const headers = { 'idempotency-key': `burst-${Date.now()}` };
    const before = await balance();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => call(server, 'POST', '/v1/messages', { token, body, headers })),
    );
    // No 409 "in use": each waits and gets the first answer.
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200));
    const first = answers.find((r) => r.headers.get('idempotent-replayed') === null)!;
    for (const r of answers) expect(r.body).toEqual(first.body);
    expect(answers.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(19);
    const rows = await server.ctx.store.all<{ id: string }>(
      sql`SELECT id FROM messages WHERE partner_id = ${partnerId} AND "to" = ${body.to}`,
    );
    expect(rows.map((m) => m.id)).toEqual([first.body.id]);
    const debits = (await ledgerOf(server.ctx, partnerId)).filter(
      (e) => e.kind === 'debit' && e.message_id === first.body.id,
    );
    expect(debits).toHaveLength(1);
    expect(before - (await balance())).toBe(10_000);
  });
});

describe('GET /v1/messages/{id}', () => {
  it('404 for an unknown id, in the documented error shape', async () => {
    const r = await call(server, 'GET', '/v1/messages/msg_01kzzzzzzzzzzzzzzzzzzzzzzz', { token });
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ error: { code: 'not_found', message: expect.any(String), details: [] } });
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
  });
});
