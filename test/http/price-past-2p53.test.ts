import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_MONEY } from '../../src/lib/money.js';
import { SMS, sandboxPartner, send } from '../helpers/gateways.js';
import { balanceOf, messagesOf } from '../helpers/rows.js';
import { postJson, startTestServer, type TestServer } from '../helpers/server.js';

// The largest SMS price (MAX_MONEY a segment) times a long text's segments passes 2^53, past
// which a JS number is not a safe integer: such a send is refused as more than msgd handles
// (402, nothing written), and its quote states the total exactly.

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
}, 60_000);
afterAll(() => t?.stop());

describe('an SMS whose price passes 2^53', () => {
  it('is a 402 on send and an exact total on quote, never a 500', async () => {
    const p = await sandboxPartner(t.ctx, {
      balance: '1000000000',
      credit: '1000000000',
      prices: { sms: '999999999.999999' },
      channels: ['sms'],
    });
    // 1600 GSM-7 characters are 11 segments of 153: 11 × 999999999999999 micro-units, past 2^53,
    // where the product as a number is 1 micro-unit off.
    const text = 'é'.repeat(1600);
    const before = await balanceOf(t.ctx, p.partnerId);
    const r = await send(t.url, SMS, { to: '+14155550123', text }, p.token);
    expect(r.status).toBe(402);
    expect(r.body.error.code).toBe('insufficient_balance');
    expect(r.body.error.message).toBe('this message costs more than the largest amount msgd handles (1000000000.00)');
    expect(await messagesOf(t.ctx, p.partnerId)).toEqual([]);
    expect(await balanceOf(t.ctx, p.partnerId)).toBe(before);

    const q = await postJson(`${t.url}/v1/messages/quote`, { channel: 'sms', to: '+14155550123', body: text }, p.token);
    expect(q.status).toBe(200);
    expect(q.body.segments).toBe(11);
    expect(q.body.total.amount).toBe('10999999999.999989');
    expect(q.body.sendable).toBe(false);
    expect(q.body.refusal.code).toBe('insufficient_balance');
    expect(MAX_MONEY * 11).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
  });
});
