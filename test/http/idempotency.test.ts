import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSuppression } from '../../src/core/suppressions.js';
import { parseMoney } from '../../src/lib/money.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { EMAIL, SMS, WHATSAPP, sandboxPartner, send } from '../helpers/gateways.js';
import { balanceOf, ledgerOf, messagesOf } from '../helpers/rows.js';
import { expectMoneyConsistent } from '../helpers/expectations.js';

// Idempotency-Key: a retried request gets the first answer and costs nothing more; the
// same key with another body is refused. Concurrent duplicates included.

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.stop();
});

const SMS_BODY = { to: '+14155550123', text: 'Your code is 1234' };

async function partner(balance = '1') {
  return await sandboxPartner(s.ctx, { balance, prices: { sms: '0.01', email: '0.01', whatsapp: '0.01' } });
}

describe('Idempotency-Key', () => {
  it('same key and body: the same response, one message, one debit', async () => {
    const p = await partner();
    const key = { 'idempotency-key': 'order-42-sms' };
    const first = await send(s.url, SMS, SMS_BODY, p.token, key);
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    // Same JSON, other whitespace and key order: the same request.
    const again = await send(s.url, SMS, `{ "text": "Your code is 1234",\n  "to": "+14155550123" }`, p.token, key);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
    expect((await messagesOf(s.ctx, p.partnerId)).map((m) => m.id)).toEqual([first.body.id]);
    expect((await ledgerOf(s.ctx, p.partnerId)).filter((e) => e.kind === 'debit')).toHaveLength(1);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.99'));
  });

  it('same key with another body: 422 idempotency_key_reused, nothing written', async () => {
    const p = await partner();
    const key = { 'idempotency-key': 'k-1' };
    expect((await send(s.url, SMS, SMS_BODY, p.token, key)).status).toBe(200);
    const other = await send(s.url, SMS, { ...SMS_BODY, text: 'Your code is 9999' }, p.token, key);
    expect(other.status).toBe(422);
    expect(other.body.error).toMatchObject({ code: 'idempotency_key_reused', details: [] });
    expect(other.body.error.message).toMatch(/different request body/);
    expect(other.headers.get('x-request-id')).toMatch(/^req_/);
    // The same body on another endpoint is another request too.
    const elsewhere = await send(s.url, WHATSAPP, SMS_BODY, p.token, key);
    expect(elsewhere.status).toBe(422);
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(1);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.99'));
  });

  it('a retry answers its first outcome before any refusal; another body with the key is 422 even when refused', async () => {
    const p = await partner();
    const key = { 'idempotency-key': 'then-refused' };
    const first = await send(s.url, SMS, SMS_BODY, p.token, key);
    expect(first.status).toBe(200);
    // The recipient opts out afterwards: a new send to them is refused, the retry is not.
    await createSuppression(s.ctx, p.partnerId, { channel: 'sms', address: SMS_BODY.to }, 'operator:test');
    expect((await send(s.url, SMS, SMS_BODY, p.token)).body.error.code).toBe('recipient_suppressed');
    const retry = await send(s.url, SMS, SMS_BODY, p.token, key);
    expect({ status: retry.status, body: retry.body }).toEqual({ status: 200, body: first.body });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    // Another body under the key is the key's misuse first, whatever else is wrong with it.
    for (const body of [{ to: 'bad' }, { ...SMS_BODY, text: 'another' }]) {
      const other = await send(s.url, SMS, body, p.token, key);
      expect(other.status).toBe(422);
      expect(other.body.error.code).toBe('idempotency_key_reused');
    }
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(1);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.99'));
  });

  it('keys belong to a partner: another partner with the same key sends its own message', async () => {
    const a = await partner();
    const b = await partner();
    const key = { 'idempotency-key': 'shared-key' };
    const ra = await send(s.url, EMAIL, { to: 'x@example.com', subject: 's', html: '<b>h</b>' }, a.token, key);
    const rb = await send(s.url, EMAIL, { to: 'x@example.com', subject: 's', html: '<b>h</b>' }, b.token, key);
    expect([ra.status, rb.status]).toEqual([200, 200]);
    expect(ra.body.id).not.toBe(rb.body.id);
  });

  it('different keys with the same body are different messages', async () => {
    const p = await partner();
    const r1 = await send(s.url, SMS, SMS_BODY, p.token, { 'idempotency-key': 'a' });
    const r2 = await send(s.url, SMS, SMS_BODY, p.token, { 'idempotency-key': 'b' });
    const r3 = await send(s.url, SMS, SMS_BODY, p.token);
    expect(new Set([r1.body.id, r2.body.id, r3.body.id]).size).toBe(3);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.97'));
  });

  it('20 identical requests at once: 20 × the same 200, one message, one debit', async () => {
    const p = await partner();
    const key = { 'idempotency-key': 'burst-1' };
    const results = await Promise.all(Array.from({ length: 20 }, () => send(s.url, SMS, SMS_BODY, p.token, key)));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(1);
    expect((await ledgerOf(s.ctx, p.partnerId)).filter((e) => e.kind === 'debit')).toHaveLength(1);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.99'));
    expect(results.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(19);
    await expectMoneyConsistent(s.ctx, p.partnerId);
  });

  it('the retry of a request that spent the last funds still gets its 200', async () => {
    const p = await partner('0.01');
    const key = { 'idempotency-key': 'last-cent' };
    const first = await send(s.url, SMS, SMS_BODY, p.token, key);
    expect(first.status).toBe(200);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(0);
    const retry = await send(s.url, SMS, SMS_BODY, p.token, key);
    expect({ status: retry.status, body: retry.body }).toEqual({ status: 200, body: first.body });
    // A new request is refused as usual.
    expect((await send(s.url, SMS, SMS_BODY, p.token, { 'idempotency-key': 'new' })).status).toBe(402);
  });

  it('a refused request stores nothing: after a top-up the same key sends', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '0.005', channels: ['sms'], prices: { sms: '0.01' } });
    const key = { 'idempotency-key': 'after-topup' };
    expect((await send(s.url, SMS, SMS_BODY, p.token, key)).status).toBe(402);
    expect((await send(s.url, SMS, { to: 'bad' }, p.token, { 'idempotency-key': 'bad-then-good' })).status).toBe(400);
    const { topup } = await import('../../src/core/ledger.js');
    await topup(s.ctx, p.partnerId, parseMoney('1'), null, 'test');
    const r = await send(s.url, SMS, SMS_BODY, p.token, key);
    expect(r.status).toBe(200);
    expect(r.headers.get('idempotent-replayed')).toBeNull();
    expect((await send(s.url, SMS, SMS_BODY, p.token, { 'idempotency-key': 'bad-then-good' })).status).toBe(200);
  });

  it('a malformed key is 400 with a detail naming the header', async () => {
    const p = await partner();
    for (const bad of ['x'.repeat(256), 'has space', 'tab\there', 'caf\u00e9']) {
      const r = await send(s.url, SMS, SMS_BODY, p.token, { 'idempotency-key': bad });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('invalid_request');
      expect(r.body.error.details).toEqual([{ field: 'Idempotency-Key', message: expect.any(String) }]);
    }
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(0);
  });
});
