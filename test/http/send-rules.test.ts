import { request as httpRequest } from 'node:http';
import { createConnection } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/db/open.js';
import type { CoreCtx } from '../../src/core/context.js';
import { activatePartner, suspendPartner } from '../../src/core/partners.js';
import { issueToken, listTokens, revokeToken } from '../../src/core/tokens.js';
import { topup } from '../../src/core/ledger.js';
import { updateGateway } from '../../src/core/gateways.js';
import { unassignChannel } from '../../src/core/channels.js';
import { setPrice } from '../../src/core/prices.js';
import { parseMoney } from '../../src/lib/money.js';
import { serverStore, startTestServer, type TestServer } from '../helpers/server.js';
import { EMAIL, SMS, WHATSAPP, sandboxPartner, send } from '../helpers/gateways.js';
import { balanceOf, messagesOf } from '../helpers/rows.js';
import { coreCtx } from '../helpers/ctx.js';

// The rules every send endpoint shares, in the spec's order: 401 token, 403 partner/scope/
// channel, 402 funds exhausted, 400 payload, 402 price, 200; and the HTTP envelope around
// them (error shape, X-Request-Id, 404/413/415).

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.stop();
});

const VALID: Record<string, unknown> = {
  [SMS]: { to: '+14155550123', text: 'hello' },
  [EMAIL]: { to: 'ana@example.com', subject: 'Hi', html: '<p>Hi</p>' },
  [WHATSAPP]: { to: '+14155550123', type: 'text', text: 'hello' },
  messenger: { channel: 'messenger', to: '2460102340987654', type: 'text', text: 'hello' },
  instagram: { channel: 'instagram', to: '6789012345678901', type: 'text', text: 'hello' },
};
const CASES: Array<{ name: string; path: string; body: unknown; channel: string }> = [
  { name: 'sms', path: SMS, body: VALID[SMS], channel: 'sms' },
  { name: 'email', path: EMAIL, body: VALID[EMAIL], channel: 'email' },
  { name: 'whatsapp', path: WHATSAPP, body: VALID[WHATSAPP], channel: 'whatsapp' },
  { name: 'messenger', path: WHATSAPP, body: VALID.messenger, channel: 'messenger' },
  { name: 'instagram', path: WHATSAPP, body: VALID.instagram, channel: 'instagram' },
];
const INVALID: Record<string, unknown> = {
  sms: { to: 'nope' },
  email: { to: 'nope' },
  whatsapp: { to: 'nope' },
  messenger: { channel: 'messenger' },
  instagram: { channel: 'instagram', text: 5 },
};

function expectError(r: { status: number; body: any; headers: Headers }, status: number, code: string) {
  expect({ status: r.status, code: r.body?.error?.code }).toEqual({ status, code });
  expect(typeof r.body.error.message).toBe('string');
  expect(r.body.error.message.length).toBeGreaterThan(0);
  expect(Array.isArray(r.body.error.details)).toBe(true);
  expect(r.headers.get('x-request-id')).toMatch(/^req_[0-9a-z]{26}$/);
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
}

async function raw(path: string, init: RequestInit) {
  const res = await fetch(s.url + path, { method: 'POST', ...init });
  const text = await res.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}

describe.each(CASES)('$name: 401 for every kind of bad credentials', ({ path, body }) => {
  it('missing, unknown, malformed, revoked and expired tokens are 401 unauthorized', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    expectError(await send(s.url, path, body), 401, 'unauthorized');
    const unknown = await send(s.url, path, body, 'msgd_live_thisisnotarealtokenatall0000000000000000');
    expectError(unknown, 401, 'unauthorized');
    expect(unknown.body.error.message).toMatch(/not valid/);
    for (const header of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer a b', p.token]) {
      const r = await send(s.url, path, body, undefined, { authorization: header });
      expectError(r, 401, 'unauthorized');
      expect(r.body.error.message).toMatch(/malformed|missing/);
    }

    expect((await send(s.url, path, body, p.token)).status).toBe(200);
    const tok = (await listTokens(s.ctx, p.partnerId)).find((t) => t.name === 'test')!;
    await revokeToken(s.ctx, tok.id, 'test');
    const revoked = await send(s.url, path, body, p.token);
    expectError(revoked, 401, 'unauthorized');
    expect(revoked.body.error.message).toMatch(/revoked/);
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(1);
  });
});

describe('token expiry', () => {
  it('a token works until expires_at and is 401 "expired" after, on every endpoint', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    const expiresAt = s.clock.now() + 60_000;
    const t = await issueToken(s.ctx, { partner: p.partnerId, name: 'short', scopes: '*', expiresAt }, 'test');
    for (const c of CASES) expect((await send(s.url, c.path, c.body, t.secret)).status).toBe(200);
    s.clock.advance(60_000);
    for (const c of CASES) {
      const r = await send(s.url, c.path, c.body, t.secret);
      expectError(r, 401, 'unauthorized');
      expect(r.body.error.message).toMatch(/expired/);
    }
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(CASES.length);
  });
});

describe.each(CASES)('$name: 403 before anything about money or payload', ({ path, body, channel, name }) => {
  it('suspended partner: 403 partner_suspended, even with no funds and a bad payload', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '0' });
    await suspendPartner(s.ctx, p.partnerId, 'test');
    expectError(await send(s.url, path, body, p.token), 403, 'partner_suspended');
    expectError(await send(s.url, path, INVALID[name], p.token), 403, 'partner_suspended');
    expectError(await send(s.url, path, '{"to":', p.token), 403, 'partner_suspended');
  });

  it('a token without messages:send: 403 insufficient_scope', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10', scopes: 'messages:read conversations:read' });
    const r = await send(s.url, path, body, p.token);
    expectError(r, 403, 'insufficient_scope');
    expect(r.body.error.message).toContain('messages:send');
    expectError(await send(s.url, path, INVALID[name], p.token), 403, 'insufficient_scope');
  });

  it('no gateway assigned for the channel: 403 channel_not_assigned, before 402 and 400', async () => {
    const others = ['sms', 'email', 'whatsapp', 'messenger', 'instagram'].filter((c) => c !== channel);
    const p = await sandboxPartner(s.ctx, { balance: '10', channels: others });
    const r = await send(s.url, path, body, p.token);
    expectError(r, 403, 'channel_not_assigned');
    expect(r.body.error.message).toContain(channel);
    expectError(await send(s.url, path, INVALID[name], p.token), 403, 'channel_not_assigned');
    const broke = await sandboxPartner(s.ctx, { balance: '0', channels: others });
    expectError(await send(s.url, path, body, broke.token), 403, 'channel_not_assigned');
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(0);
  });

  it('the assigned gateway is disabled or the channel unassigned: 403 channel_not_assigned', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10', channels: [channel] });
    expect((await send(s.url, path, body, p.token)).status).toBe(200);
    await updateGateway(s.ctx, p.gateways[channel], { status: 'disabled' }, 'test');
    const r = await send(s.url, path, body, p.token);
    expectError(r, 403, 'channel_not_assigned');
    expect(r.body.error.message).toMatch(/disabled/);
    await updateGateway(s.ctx, p.gateways[channel], { status: 'active' }, 'test');
    expect((await send(s.url, path, body, p.token)).status).toBe(200);
    await unassignChannel(s.ctx, { partner: p.partnerId, type: channel }, 'test');
    expectError(await send(s.url, path, body, p.token), 403, 'channel_not_assigned');
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(2);
  });
});

describe.each(CASES)('$name: 402 when funds are exhausted, before the payload is looked at', ({ path, body, name }) => {
  it('balance + credit <= 0: 402 insufficient_balance for valid, invalid and unparseable bodies', async () => {
    const zero = await sandboxPartner(s.ctx, { balance: '0' });
    const valid = await send(s.url, path, body, zero.token);
    const invalid = await send(s.url, path, INVALID[name], zero.token);
    expectError(valid, 402, 'insufficient_balance');
    expectError(invalid, 402, 'insufficient_balance');
    // The same answer either way, though a valid body meets the check in the send transaction
    // and an invalid one before it is refused: exhausted, whatever the price (here none).
    expect(valid.body.error.message).toBe('balance and credit limit are exhausted; top up to send');
    expect(invalid.body.error.message).toBe(valid.body.error.message);
    expectError(await send(s.url, path, '{"to": "+1', zero.token), 402, 'insufficient_balance');
    expectError(await send(s.url, path, '', zero.token), 402, 'insufficient_balance');
    expect(await messagesOf(s.ctx, zero.partnerId)).toHaveLength(0);
  });

  it('a balance at -credit_limit is exhausted; credit above it still sends', async () => {
    const p = await sandboxPartner(s.ctx, {
      balance: '0',
      credit: '0.02',
      prices: { sms: '0.01', email: '0.01', whatsapp: '0.01', messenger: '0.01', instagram: '0.01' },
    });
    expect((await send(s.url, path, body, p.token)).status).toBe(200);
    expect((await send(s.url, path, body, p.token)).status).toBe(200);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(-parseMoney('0.02'));
    expectError(await send(s.url, path, INVALID[name], p.token), 402, 'insufficient_balance');
    expectError(await send(s.url, path, body, p.token), 402, 'insufficient_balance');
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(2);
  });
});

describe('a body that names no channel', () => {
  it('WhatsApp endpoint: 403 like send-sms.php when none of whatsapp, messenger, instagram is assigned, else 402 when broke', async () => {
    const none = await sandboxPartner(s.ctx, { balance: '0', channels: ['sms', 'email'] });
    for (const body of ['{"to":', '']) {
      const r = await send(s.url, WHATSAPP, body, none.token);
      expectError(r, 403, 'channel_not_assigned');
      expect(r.body.error.message).toContain('whatsapp, messenger or instagram');
      expectError(
        await send(s.url, SMS, body, (await sandboxPartner(s.ctx, { balance: '0', channels: ['email'] })).token),
        403,
        'channel_not_assigned',
      );
    }
    // A disabled gateway is no gateway.
    const disabled = await sandboxPartner(s.ctx, { balance: '0', channels: ['messenger'] });
    await updateGateway(s.ctx, disabled.gateways.messenger, { status: 'disabled' }, 'test');
    expectError(await send(s.url, WHATSAPP, '{"to":', disabled.token), 403, 'channel_not_assigned');
    const messengerOnly = await sandboxPartner(s.ctx, { balance: '0', channels: ['messenger'] });
    expectError(await send(s.url, WHATSAPP, '{"to":', messengerOnly.token), 402, 'insufficient_balance');
    const funded = await sandboxPartner(s.ctx, { balance: '1', channels: ['instagram'] });
    expectError(await send(s.url, WHATSAPP, '{"to":', funded.token), 400, 'invalid_json');
  });

  it('POST /v1/messages: 403 when the partner has no channel at all', async () => {
    const none = await sandboxPartner(s.ctx, { balance: '0', channels: [] });
    for (const body of ['{"channel":', JSON.stringify({ channel: 'carrier-pigeon', to: 'x', body: 'x' })]) {
      expectError(await send(s.url, '/v1/messages', body, none.token), 403, 'channel_not_assigned');
    }
    const some = await sandboxPartner(s.ctx, { balance: '0', channels: ['email'] });
    expectError(await send(s.url, '/v1/messages', '{"channel":', some.token), 402, 'insufficient_balance');
  });
});

describe('order of the rules across the board', () => {
  it('a bad token with malformed JSON is 401, not 400', async () => {
    for (const path of [SMS, EMAIL, WHATSAPP]) {
      expectError(await send(s.url, path, '{not json', 'msgd_live_bogus'), 401, 'unauthorized');
      expectError(await send(s.url, path, '{not json'), 401, 'unauthorized');
    }
  });

  it('a bad token is 401 before 415: a body of another type or a compressed one is not looked at first', async () => {
    const { gzipSync } = await import('node:zlib');
    const json = JSON.stringify(VALID[SMS]);
    for (const path of [SMS, EMAIL, WHATSAPP, '/v1/messages', '/v1/contacts']) {
      const auths: Record<string, string>[] = [{}, { authorization: 'Bearer msgd_live_bogus' }];
      for (const auth of auths) {
        expectError(
          await raw(path, { headers: { 'content-type': 'text/plain', ...auth }, body: json }),
          401,
          'unauthorized',
        );
        expectError(
          await raw(path, { headers: { 'content-type': 'application/json; charset=latin1', ...auth }, body: json }),
          401,
          'unauthorized',
        );
        const gz = await raw(path, {
          headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', ...auth },
          body: gzipSync(json),
        });
        expectError(gz, 401, 'unauthorized');
      }
    }
    // The partner's own 403s come before 415 too; 415 still comes before the channel, money and payload.
    const suspended = await sandboxPartner(s.ctx, { balance: '10' });
    await suspendPartner(s.ctx, suspended.partnerId, 'test');
    expectError(
      await raw(SMS, {
        headers: { 'content-type': 'text/plain', authorization: `Bearer ${suspended.token}` },
        body: json,
      }),
      403,
      'partner_suspended',
    );
    const broke = await sandboxPartner(s.ctx, { balance: '0' });
    expectError(
      await raw(SMS, { headers: { 'content-type': 'text/plain', authorization: `Bearer ${broke.token}` }, body: json }),
      415,
      'unsupported_media_type',
    );
  });

  it('401 answers carry an RFC 6750 WWW-Authenticate challenge', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    const tok = (await listTokens(s.ctx, p.partnerId))[0];
    await revokeToken(s.ctx, tok.id, 'test');
    for (const path of [SMS, EMAIL, WHATSAPP, '/v1/messages']) {
      expect((await send(s.url, path, VALID[SMS])).headers.get('www-authenticate')).toBe('Bearer');
      expect(
        (await send(s.url, path, VALID[SMS], undefined, { authorization: 'Basic dXNlcjpwYXNz' })).headers.get(
          'www-authenticate',
        ),
      ).toBe('Bearer');
      for (const bad of ['msgd_live_thisisnotarealtokenatall0000000000000000', p.token]) {
        const r = await send(s.url, path, VALID[SMS], bad);
        expectError(r, 401, 'unauthorized');
        expect(r.headers.get('www-authenticate')).toBe(
          `Bearer error="invalid_token", error_description="${r.body.error.message}"`,
        );
      }
      for (const empty of ['Bearer', 'Bearer ', 'bearer  ']) {
        const r = await send(s.url, path, VALID[SMS], undefined, { authorization: empty });
        expect([r.status, r.body.error.message, r.headers.get('www-authenticate')]).toEqual([
          401,
          expect.stringMatching(/^missing bearer token/),
          'Bearer',
        ]);
      }
      const malformed = await send(s.url, path, VALID[SMS], undefined, { authorization: 'Bearer a b' });
      expect(malformed.headers.get('www-authenticate')).toMatch(
        /^Bearer error="invalid_token", error_description="malformed Authorization header/,
      );
    }
    const v1get = await fetch(`${s.url}/v1/channels`, { headers: { authorization: 'Bearer msgd_live_nope' } });
    expect([v1get.status, v1get.headers.get('www-authenticate')]).toEqual([
      401,
      expect.stringMatching(/^Bearer error="invalid_token"/),
    ]);
    // Other answers carry none.
    expect(
      (await send(s.url, SMS, VALID[SMS], (await sandboxPartner(s.ctx, { balance: '10' })).token)).headers.get(
        'www-authenticate',
      ),
    ).toBeNull();
  });

  it('two Authorization headers are 401 whichever comes first: which token was meant is a guess', async () => {
    // 10 a minute: one request's place comes back only after 6 s, so the count below does not
    // depend on how fast a loaded machine runs the requests in between.
    const good = await sandboxPartner(s.ctx, { balance: '10', rateLimitPerMinute: 10 });
    const revoked = await sandboxPartner(s.ctx, { balance: '10' });
    await revokeToken(s.ctx, (await listTokens(s.ctx, revoked.partnerId))[0].id, 'test');
    const post = (authorization: string[]) =>
      new Promise<{ status: number; body: any; remaining: number }>((resolve, reject) => {
        const req = httpRequest(
          `${s.url}${SMS}`,
          { method: 'POST', headers: { 'content-type': 'application/json' } },
          (res) => {
            let text = '';
            res.on('data', (c) => (text += c));
            res.on('end', () =>
              resolve({
                status: res.statusCode!,
                body: JSON.parse(text),
                remaining: Number(res.headers['ratelimit-remaining']),
              }),
            );
          },
        );
        // setHeader takes a list, sent as one header line per value, in order.
        req.setHeader('authorization', authorization);
        req.on('error', reject);
        req.end(JSON.stringify(VALID[SMS]));
      });
    const first = await post([`Bearer ${good.token}`]);
    for (const pair of [
      [`Bearer ${good.token}`, `Bearer ${revoked.token}`],
      [`Bearer ${good.token}`, `Bearer ${good.token}`],
    ]) {
      const r = await post(pair);
      expect([r.status, r.body.error.code, r.body.error.message]).toEqual([
        401,
        'unauthorized',
        'more than one Authorization header: send exactly one',
      ]);
    }
    expect(await messagesOf(s.ctx, good.partnerId)).toHaveLength(1);
    // Not counted against either token's rate limit.
    const next = await post([`Bearer ${good.token}`]);
    expect([first.status, next.status]).toEqual([200, 200]);
    expect(next.remaining).toBe(first.remaining - 1);
  });

  it('with funds, a malformed body is 400 invalid_json and an invalid one 400 invalid_request', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    for (const path of [SMS, EMAIL, WHATSAPP]) {
      expectError(await send(s.url, path, '{not json', p.token), 400, 'invalid_json');
      expectError(await send(s.url, path, '', p.token), 400, 'invalid_json');
      expectError(await send(s.url, path, '[1,2]', p.token), 400, 'invalid_request');
      expectError(await send(s.url, path, '"text"', p.token), 400, 'invalid_request');
    }
  });

  it('a price that exceeds what is left is 402, but only after the payload is valid (400 first)', async () => {
    const p = await sandboxPartner(s.ctx, {
      balance: '0.005',
      prices: { sms: '0.01', email: '0.01', whatsapp: '0.01' },
    });
    expectError(await send(s.url, SMS, { to: 'nope', text: 'x' }, p.token), 400, 'invalid_request');
    const r = await send(s.url, SMS, VALID[SMS], p.token);
    expectError(r, 402, 'insufficient_balance');
    expect(r.body.error.message).toMatch(/cover/);
    expectError(await send(s.url, EMAIL, VALID[EMAIL], p.token), 402, 'insufficient_balance');
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.005'));
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(0);
  });

  it('200 answers {id, status: "queued"} and the row is queued with its debit', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '1', prices: { sms: '0.01' } });
    // The sandbox is fast; hold the worker's hand off this one by checking the response only.
    const r = await send(s.url, SMS, VALID[SMS], p.token);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ id: expect.stringMatching(/^msg_[0-9a-z]{26}$/), status: 'queued' });
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
    const [m] = await messagesOf(s.ctx, p.partnerId);
    expect(m.id).toBe(r.body.id);
    expect(m.price).toBe(parseMoney('0.01'));
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.99'));
  });
});

describe('HTTP envelope', () => {
  it('unknown routes are 404 in the error shape, with a request id', async () => {
    for (const [method, path] of [
      ['GET', '/nope'],
      ['POST', '/api/send-fax.php'],
      ['GET', '/api/send-fax.php'],
    ] as const) {
      const res = await fetch(s.url + path, { method });
      const body = await res.json();
      expect(res.status).toBe(404);
      expect(body).toEqual({ error: { code: 'not_found', message: expect.stringContaining(path), details: [] } });
      expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    }
  });

  it('a trailing slash is the same endpoint, with the same idempotency', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    for (const c of CASES) {
      const r = await send(s.url, `${c.path}/`, c.body, p.token);
      expect(r.status, r.text).toBe(200);
    }
    expect((await send(s.url, `${SMS}/?utm=1`, VALID[SMS], p.token)).status).toBe(200);
    const key = { 'idempotency-key': 'slash-1' };
    const first = await send(s.url, SMS, VALID[SMS], p.token, key);
    const again = await send(s.url, `${SMS}/`, VALID[SMS], p.token, key);
    expect([again.status, again.body, again.headers.get('idempotent-replayed')]).toEqual([200, first.body, 'true']);
    expectError(await send(s.url, `${SMS}/`, VALID[SMS]), 401, 'unauthorized');
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(CASES.length + 2);
  });

  it('another method on a send path is 405 method_not_allowed with Allow: POST, token or not', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    for (const path of [SMS, EMAIL, WHATSAPP, `${SMS}/`]) {
      for (const method of ['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
        for (const headers of [{}, { authorization: `Bearer ${p.token}` }] as Record<string, string>[]) {
          const res = await fetch(s.url + path, { method, headers });
          expectError({ status: res.status, body: await res.json(), headers: res.headers }, 405, 'method_not_allowed');
          expect(res.headers.get('allow')).toBe('POST');
        }
      }
      const head = await fetch(s.url + path, { method: 'HEAD' });
      expect([head.status, head.headers.get('allow'), await head.text()]).toEqual([405, 'POST', '']);
      // Methods fetch will not send and the router has no route for.
      for (const method of ['TRACE', 'PROPFIND']) {
        const r = await new Promise<{ status: number; allow: unknown; body: any }>((resolve, reject) => {
          const q = httpRequest(s.url + path, { method }, (res) => {
            let body = '';
            res.setEncoding('utf8').on('data', (d) => (body += d));
            res.on('end', () => resolve({ status: res.statusCode!, allow: res.headers.allow, body: JSON.parse(body) }));
          });
          q.on('error', reject).end();
        });
        expect([r.status, r.allow, r.body.error.code]).toEqual([405, 'POST', 'method_not_allowed']);
      }
    }
    // A POST is never told to send a POST: a path the router does not know stays a 404.
    const twice = await fetch(`${s.url}${SMS}//`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect([twice.status, (await twice.json()).error.code]).toEqual([404, 'not_found']);
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(0);
  });

  it("what Node's HTTP parser refuses is answered in the error shape with a request id, and the server carries on", async () => {
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const u = new URL(s.url);
        const sock = createConnection({ host: u.hostname, port: Number(u.port) });
        let got = '';
        sock.setEncoding('utf8').on('data', (d) => (got += d));
        sock.on('end', () => resolve(got)).on('error', reject);
        sock.write(request);
      });
    const parse = (answer: string) => {
      const [head, body] = answer.split('\r\n\r\n');
      return { status: Number(head.split(' ')[1]), head: head.toLowerCase(), body: JSON.parse(body) };
    };
    const cases: Array<[string, number, string]> = [
      [`FOO ${SMS} HTTP/1.1\r\nHost: x\r\n\r\n`, 400, 'bad_request'],
      [
        `POST ${SMS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}`,
        400,
        'bad_request',
      ],
      [`POST ${SMS} HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n`, 400, 'bad_request'],
      [`POST ${SMS} HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(17_000)}\r\n\r\n`, 431, 'headers_too_large'],
    ];
    for (const [request, status, code] of cases) {
      const r = parse(await raw(request));
      expect(r.status).toBe(status);
      expect(r.body).toEqual({ error: { code, message: expect.any(String), details: [] } });
      expect(r.head).toMatch(/\r\nx-request-id: req_[0-9a-z]+/);
      expect(r.head).toContain('content-type: application/json');
    }
    expect((await fetch(s.url + '/healthz')).status).toBe(200);
  });

  it('a request whose body breaks off or is malformed gets its 400 at once, and shutdown is not held up by it', async () => {
    const own = await startTestServer();
    try {
      const p = await sandboxPartner(own.ctx, { balance: '10' });
      const u = new URL(own.url);
      const head = `POST ${SMS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${p.token}\r\nContent-Type: application/json\r\n`;
      const cases = [
        // a chunk size that is not hex
        { request: `${head}Transfer-Encoding: chunked\r\n\r\n5\r\n{"to"\r\nZZZ\r\n`, halfClose: false },
        // a client that announces 100 bytes, sends 10 and stops sending
        { request: `${head}Content-Length: 100\r\n\r\n{"to":"+1`, halfClose: true },
      ];
      for (const c of cases) {
        const sock = createConnection({ host: u.hostname, port: Number(u.port), allowHalfOpen: true });
        let got = '';
        sock.setEncoding('utf8').on('data', (d) => (got += d));
        const ended = new Promise<void>((resolve) => sock.on('end', resolve));
        sock.write(c.request);
        if (c.halfClose) sock.end();
        const outcome = await Promise.race([
          ended.then(() => 'answered'),
          new Promise((r) => setTimeout(() => r('no answer'), 3000)),
        ]);
        expect(outcome).toBe('answered');
        expect(got).toMatch(/^HTTP\/1\.1 400 /);
        expect(JSON.parse(got.split('\r\n\r\n')[1]).error.code).toBe('bad_request');
        sock.destroy();
      }
      expect(await messagesOf(own.ctx, p.partnerId)).toHaveLength(0);
      const stopped = await Promise.race([
        own.stop().then(() => 'stopped'),
        new Promise((r) => setTimeout(() => r('hung'), 5000)),
      ]);
      expect(stopped).toBe('stopped');
    } catch (e) {
      await own.stop();
      throw e;
    }
  });

  it('a parser error after a pipelined request answers that request first; a client left half-open cannot hold up shutdown', async () => {
    const own = await startTestServer();
    try {
      const p = await sandboxPartner(own.ctx, { balance: '10' });
      const u = new URL(own.url);
      const sock = createConnection({ host: u.hostname, port: Number(u.port), allowHalfOpen: true });
      let got = '';
      sock.setEncoding('utf8').on('data', (d) => (got += d));
      const ended = new Promise<void>((resolve) => sock.on('end', resolve));
      const body = JSON.stringify({ to: '+14155550123', text: 'pipelined' });
      sock.write(
        `POST ${SMS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${p.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}` +
          `FOO / HTTP/1.1\r\nHost: x\r\n\r\n`,
      );
      await ended;
      const answers = got.split(/(?=HTTP\/1\.1 \d{3} )/);
      expect(answers.map((a) => Number(a.split(' ')[1]))).toEqual([200, 400]);
      expect(JSON.parse(answers[0].split('\r\n\r\n')[1])).toMatchObject({ status: 'queued' });
      expect(await messagesOf(own.ctx, p.partnerId)).toHaveLength(1);
      // The client never closes its side: msgd must still stop at once.
      const stopped = await Promise.race([
        own.stop().then(() => 'stopped'),
        new Promise((r) => setTimeout(() => r('hung'), 5000)),
      ]);
      expect(stopped).toBe('stopped');
      sock.destroy();
    } catch (e) {
      await own.stop();
      throw e;
    }
  });

  it('a body over the limit is 413 payload_too_large', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    const big = JSON.stringify({ to: 'a@example.com', subject: 'x', html: 'x'.repeat(1024 * 1024 + 10) });
    const r = await raw(EMAIL, {
      headers: { 'content-type': 'application/json', authorization: `Bearer ${p.token}` },
      body: big,
    });
    expectError(r, 413, 'payload_too_large');
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(0);
    // The token is checked before the body is read: without one, the same body is a 401.
    expectError(await raw(EMAIL, { headers: { 'content-type': 'application/json' }, body: big }), 401, 'unauthorized');
  });

  it('anything but JSON is 415 unsupported_media_type, even when the bytes are JSON', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    const json = JSON.stringify(VALID[SMS]);
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/xml',
    ]) {
      const r = await raw(SMS, { headers: { 'content-type': type, authorization: `Bearer ${p.token}` }, body: json });
      expectError(r, 415, 'unsupported_media_type');
    }
    const charset = await raw(SMS, {
      headers: { 'content-type': 'application/json; charset=utf-8', authorization: `Bearer ${p.token}` },
      body: json,
    });
    expect(charset.status).toBe(200);
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(1);
  });

  it('JSON in another charset is 415; bytes that are not UTF-8 are 400 invalid_json; a UTF-8 BOM is ignored', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    const auth = { authorization: `Bearer ${p.token}` };
    const latin1 = Buffer.from('{"to":"+14155550123","text":"Gr\u00fc\u00dfe"}', 'latin1');
    for (const type of [
      'application/json; charset=iso-8859-1',
      'application/json;charset="ISO-8859-1"',
      'application/json; charset=windows-1252',
    ]) {
      for (const path of [SMS, '/v1/messages']) {
        const r = await raw(path, { headers: { 'content-type': type, ...auth }, body: latin1 });
        expectError(r, 415, 'unsupported_media_type');
        expect(r.body.error.message).toMatch(/charset .* is not supported.*UTF-8/);
      }
    }
    // Undeclared, the same bytes are not UTF-8: refused, not stored as U+FFFD and charged as UCS-2.
    for (const path of [SMS, '/v1/messages']) {
      const r = await raw(path, { headers: { 'content-type': 'application/json', ...auth }, body: latin1 });
      expectError(r, 400, 'invalid_json');
      expect(r.body.error.message).toMatch(/UTF-8/);
    }
    const contact = await raw('/v1/contacts', {
      headers: { 'content-type': 'application/json', ...auth },
      body: Buffer.from('{"email":"x@example.com","name":"\xe9"}', 'latin1'),
    });
    expectError(contact, 400, 'invalid_json');
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(0);

    const utf8 = Buffer.from('{"to":"+14155550123","text":"Gr\u00fc\u00dfe"}', 'utf8');
    for (const type of [
      'application/json; charset=utf-8',
      'application/json; charset="UTF-8"',
      'application/json; charset=UTF8',
    ]) {
      expect((await raw(SMS, { headers: { 'content-type': type, ...auth }, body: utf8 })).status).toBe(200);
    }
    const bom = await raw(SMS, {
      headers: { 'content-type': 'application/json', ...auth },
      body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8]),
    });
    expect(bom.status, bom.text).toBe(200);
    const v1bom = await raw('/v1/messages', {
      headers: { 'content-type': 'application/json', ...auth },
      body: Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from('{"channel":"sms","to":"+14155550123","body":"hi"}'),
      ]),
    });
    expect(v1bom.status, v1bom.text).toBe(200);
    const stored = await messagesOf(s.ctx, p.partnerId);
    expect(stored).toHaveLength(5);
    expect(JSON.parse(stored[0].content).text).toBe('Grüße');
    expect(stored[0].segments).toBe(1);
  });

  it('the send API is rate limited per token, together with /v1: RateLimit-* on every answer, then 429 with Retry-After', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10', rateLimitPerMinute: 3 });
    const first = await send(s.url, SMS, VALID[SMS], p.token);
    expect(first.status).toBe(200);
    expect([first.headers.get('ratelimit-limit'), first.headers.get('ratelimit-remaining')]).toEqual(['3', '2']);
    // A /v1 read spends from the same allowance.
    const v1 = await fetch(`${s.url}/v1/messages/${first.body.id}`, {
      headers: { authorization: `Bearer ${p.token}` },
    });
    expect([v1.status, v1.headers.get('ratelimit-remaining')]).toEqual([200, '1']);
    expect((await send(s.url, SMS, VALID[SMS], p.token)).status).toBe(200);
    const refused = await send(s.url, SMS, VALID[SMS], p.token);
    expectError(refused, 429, 'rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(2);
    // Another partner's token has its own allowance.
    const other = await sandboxPartner(s.ctx, { balance: '10' });
    expect((await send(s.url, SMS, VALID[SMS], other.token)).status).toBe(200);
  });

  it('a compressed body is 415: msgd reads bodies as sent', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    const { gzipSync } = await import('node:zlib');
    const r = await raw(SMS, {
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', authorization: `Bearer ${p.token}` },
      body: gzipSync(JSON.stringify(VALID[SMS])),
    });
    expectError(r, 415, 'unsupported_media_type');
    expect(r.body.error.message).toContain('gzip');
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(0);
  });

  it('a URL the router cannot read is answered in the error shape with a request id', async () => {
    const bad = await fetch(`${s.url}/v1/messages/%ZZ`);
    expectError({ status: bad.status, body: await bad.json(), headers: bad.headers }, 400, 'invalid_request');
    const long = await fetch(`${s.url}/v1/messages/msg_${'x'.repeat(200)}`);
    expectError({ status: long.status, body: await long.json(), headers: long.headers }, 414, 'invalid_request');
  });

  it('JSON nested past 32 levels, or with an unpaired surrogate or a NUL, is 400 invalid_json and changes nothing', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${p.token}` };
    const deep = `{"to":"+14155550123","text":"hi","extra":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    const idems: Record<string, string>[] = [{}, { 'idempotency-key': 'deep-1' }];
    for (const idem of idems) {
      const r = await raw(SMS, { headers: { ...headers, ...idem }, body: deep });
      expectError(r, 400, 'invalid_json');
      expect(r.body.error.message).toContain('32 levels');
    }
    const ok32 = `{"to":"+14155550123","text":"hi","extra":${'['.repeat(31)}${']'.repeat(31)}}`;
    expect((await raw(SMS, { headers, body: ok32 })).status).toBe(200);
    const contact = await fetch(`${s.url}/v1/contacts`, {
      method: 'POST',
      headers,
      body: `{"email":"deep@example.com","attributes":{"a":${'{"b":'.repeat(4000)}1${'}'.repeat(4000)}}}`,
    });
    expect(contact.status).toBe(400);
    expect((await contact.json()).error.code).toBe('invalid_json');
    const lone = await raw(SMS, { headers, body: '{"to":"+14155550123","text":"broken \\ud800 half"}' });
    expectError(lone, 400, 'invalid_json');
    expect(lone.body.error.message).toContain('surrogate');
    const pair = await raw(SMS, { headers, body: '{"to":"+14155550123","text":"whole \\ud83d\\ude00 pair"}' });
    expect(pair.status).toBe(200);
    for (const [path, body] of [
      [SMS, '{"to":"+14155550123","text":"a \\u0000 b"}'],
      [EMAIL, '{"to":"ana@example.com","subject":"Hi\\u0000","html":"<p>x</p>"}'],
      [WHATSAPP, '{"to":"+14155550123","text":"x","note":"\\u0000"}'],
    ]) {
      const nul = await raw(path, { headers, body });
      expectError(nul, 400, 'invalid_json');
      expect(nul.body.error.message).toContain('NUL');
    }
    // A backslash and "u0000" as text is no NUL.
    expect((await raw(SMS, { headers, body: '{"to":"+14155550123","text":"C:\\\\u0000"}' })).status).toBe(200);
    expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(3);
  });

  it('X-Request-Id is on every answer; a sane caller id is echoed, a hostile one replaced', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '10' });
    const mine = await send(s.url, SMS, VALID[SMS], p.token, { 'x-request-id': 'partner-trace.42' });
    expect(mine.headers.get('x-request-id')).toBe('partner-trace.42');
    const hostile = await send(s.url, SMS, VALID[SMS], p.token, { 'x-request-id': 'a b\u00e9<script>' });
    expect(hostile.headers.get('x-request-id')).toMatch(/^req_/);
    const ids = new Set<string>();
    for (const r of [
      await send(s.url, SMS, VALID[SMS], p.token),
      await send(s.url, SMS, { to: 'x' }, p.token),
      await send(s.url, SMS, VALID[SMS]),
      await fetch(s.url + '/healthz'),
    ]) {
      const id = r.headers.get('x-request-id')!;
      expect(id).toMatch(/^req_/);
      ids.add(id);
    }
    expect(ids.size).toBe(4);
  });
});

describe('operator changes from another connection (msgctl) apply on the next request', () => {
  /** Run fn with a core context on a connection of its own to the server's store, as msgctl has. */
  async function asMsgctl(fn: (ctl: CoreCtx) => Promise<void>) {
    if (serverStore === 'postgres') {
      const { openStore } = await import('../../src/db/open-store.js');
      const opened = await openStore(s.rt.config, {
        env: { MSGD_MASTER_KEY: s.ctx.masterKey.toString('hex') },
        migrate: false,
      });
      try {
        await fn({ ...s.ctx, db: opened.db, store: opened.store });
      } finally {
        await opened.close();
      }
      return;
    }
    const db2 = openDb(s.rt.dataDir!.db.path);
    try {
      await fn(coreCtx({ db: db2, masterKey: s.ctx.masterKey }, { config: s.ctx.config }));
    } finally {
      db2.close();
    }
  }

  it('suspend, activate, top up and revoke through a second connection', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '0.01', prices: { sms: '0.01' } });
    await asMsgctl(async (ctl) => {
      expect((await send(s.url, SMS, VALID[SMS], p.token)).status).toBe(200);
      expectError(await send(s.url, SMS, VALID[SMS], p.token), 402, 'insufficient_balance');
      await topup(ctl, p.partnerId, parseMoney('0.02'), 'msgctl balance topup', 'cli');
      expect((await send(s.url, SMS, VALID[SMS], p.token)).status).toBe(200);

      await suspendPartner(ctl, p.partnerId, 'cli');
      expectError(await send(s.url, SMS, VALID[SMS], p.token), 403, 'partner_suspended');
      await activatePartner(ctl, p.partnerId, 'cli');
      expect((await send(s.url, SMS, VALID[SMS], p.token)).status).toBe(200);

      const tok = (await listTokens(ctl, p.partnerId))[0];
      await revokeToken(ctl, tok.prefix, 'cli');
      const r = await send(s.url, SMS, VALID[SMS], p.token);
      expectError(r, 401, 'unauthorized');
      expect(r.body.error.message).toMatch(/revoked/);
      expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(3);
      expect(await balanceOf(s.ctx, p.partnerId)).toBe(0);
    });
  });

  it('a price, a disabled gateway and an unassigned channel set through a second connection apply on the next request', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '1.00', prices: { sms: '0.01' } });
    await asMsgctl(async (ctl) => {
      expect((await send(s.url, SMS, VALID[SMS], p.token)).status).toBe(200);
      expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.99'));
      await setPrice(ctl, { channel: 'sms', amount: parseMoney('0.25'), partner: p.partnerId }, 'cli');
      expect((await send(s.url, SMS, VALID[SMS], p.token)).status).toBe(200);
      expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.74'));

      await updateGateway(ctl, p.gateways.sms, { status: 'disabled' }, 'cli');
      expectError(await send(s.url, SMS, VALID[SMS], p.token), 403, 'channel_not_assigned');
      await updateGateway(ctl, p.gateways.sms, { status: 'active' }, 'cli');
      expect((await send(s.url, SMS, VALID[SMS], p.token)).status).toBe(200);

      await unassignChannel(ctl, { partner: p.partnerId, type: 'sms' }, 'cli');
      expectError(await send(s.url, SMS, VALID[SMS], p.token), 403, 'channel_not_assigned');
      expect(await messagesOf(s.ctx, p.partnerId)).toHaveLength(3);
    });
  });
});
