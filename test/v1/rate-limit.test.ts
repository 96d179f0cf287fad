import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setPartnerLimits } from '../../src/core/partners.js';
import { issueToken } from '../../src/core/tokens.js';
import { RateLimiter } from '../../src/http/rate-limit.js';
import type { TestServer } from '../helpers/server.js';
import { call, richPartner, startV1 } from './helpers.js';

let server: TestServer;

beforeAll(async () => {
  server = await startV1({ 'rateLimit.perMinute': 20 });
});
afterAll(() => server.stop());

function limits(r: { headers: Headers }) {
  return {
    limit: Number(r.headers.get('ratelimit-limit')),
    remaining: Number(r.headers.get('ratelimit-remaining')),
    reset: Number(r.headers.get('ratelimit-reset')),
  };
}

describe('rate limits on /v1', () => {
  it('every response carries the headers: 200, 400, 401, 403, 404, unknown routes, the document', async () => {
    const p = await richPartner(server.ctx, 1, { scopes: 'conversations:read' });
    const responses = [
      await call(server, 'GET', '/v1/conversations', { token: p.token }),
      await call(server, 'GET', '/v1/conversations?limit=0', { token: p.token }),
      await call(server, 'GET', '/v1/conversations', { token: null }),
      await call(server, 'GET', '/v1/contacts', { token: p.token }),
      await call(server, 'GET', '/v1/conversations/conv_01kzzzzzzzzzzzzzzzzzzzzzzz', { token: p.token }),
      await call(server, 'GET', '/v1/no-such-thing', { token: p.token }),
      await call(server, 'GET', '/v1/openapi.json'),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 400, 401, 403, 404, 404, 200]);
    for (const r of responses) {
      const l = limits(r);
      expect(l.limit).toBe(20);
      expect(l.remaining).toBeGreaterThanOrEqual(0);
      expect(l.remaining).toBeLessThan(20);
      expect(l.reset).toBeGreaterThanOrEqual(1);
      expect(r.headers.get('x-request-id')).toBeTruthy();
    }
    // The first four share the token's bucket: remaining counts down.
    expect([0, 1, 3, 4].map((i) => limits(responses[i]).remaining)).toEqual([19, 18, 17, 16]);
  });

  it('past the limit: 429 in the error shape with Retry-After; per token, partner override first', async () => {
    const p = await richPartner(server.ctx, 2);
    await setPartnerLimits(server.ctx, p.partnerId, { rateLimitPerMinute: 3 }, 'test');
    const seen = [];
    for (let i = 0; i < 4; i++) seen.push(await call(server, 'GET', '/v1/channels', { token: p.token }));
    expect(seen.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(seen.map((r) => limits(r).remaining)).toEqual([2, 1, 0, 0]);
    expect(limits(seen[0]).limit).toBe(3);
    const refused = seen[3];
    expect(refused.body).toEqual({
      error: { code: 'rate_limited', message: expect.stringContaining('3 per minute'), details: [] },
    });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(20);

    // A second token of the same partner has its own bucket; other partners use the default.
    const second = (await issueToken(server.ctx, { partner: p.partnerId, name: 'two', scopes: '*' }, 'test')).secret;
    const s = await call(server, 'GET', '/v1/channels', { token: second });
    expect(s.status).toBe(200);
    expect(limits(s)).toMatchObject({ limit: 3, remaining: 2 });
    const other = await richPartner(server.ctx, 3);
    expect(limits(await call(server, 'GET', '/v1/channels', { token: other.token })).limit).toBe(20);
    // Even a send is refused before it is priced.
    const send = await call(server, 'POST', '/v1/messages', {
      token: p.token,
      body: { channel: 'sms', to: '+14155550123', body: 'x' },
    });
    expect(send.status).toBe(429);
  });
});

describe('GCRA', () => {
  it('allows a burst of the limit, then one request per interval', () => {
    let now = 1_000_000;
    const rl = new RateLimiter(() => now);
    const burst = Array.from({ length: 6 }, () => rl.take('k', 6));
    expect(burst.map((v) => v.allowed)).toEqual([true, true, true, true, true, true]);
    expect(burst.map((v) => v.remaining)).toEqual([5, 4, 3, 2, 1, 0]);
    const refused = rl.take('k', 6);
    expect(refused).toMatchObject({ allowed: false, remaining: 0, retryAfterS: 10 });
    now += 9_999;
    expect(rl.take('k', 6).allowed).toBe(false);
    now += 1;
    expect(rl.take('k', 6)).toMatchObject({ allowed: true, remaining: 0 });
    now += 60_000;
    expect(rl.take('k', 6)).toMatchObject({ allowed: true, remaining: 5, resetS: 10 });
    expect(rl.take('other', 6).remaining).toBe(5);
  });
});
