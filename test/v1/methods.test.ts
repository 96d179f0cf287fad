import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorOut } from '../../src/http/schemas/v1.js';
import { sql } from '../../src/db/sql.js';
import type { TestServer } from '../helpers/server.js';
import { call, richPartner, startV1 } from './helpers.js';

// A /v1 path that exists answers another method with 405 and the methods it has in Allow, as
// the send API does; a path that does not exist stays a 404.

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startV1();
  token = (await richPartner(server.ctx, 1)).token;
});
afterAll(() => server.stop());

const CASES: [method: string, path: string, allow: string][] = [
  ['PUT', '/v1/messages', 'GET, HEAD, POST'],
  ['DELETE', '/v1/messages', 'GET, HEAD, POST'],
  ['PATCH', '/v1/messages/msg_01kzzzzzzzzzzzzzzzzzzzzzzz', 'GET, HEAD'],
  ['POST', '/v1/messages/msg_01kzzzzzzzzzzzzzzzzzzzzzzz', 'GET, HEAD'],
  ['DELETE', '/v1/conversations', 'GET, HEAD'],
  ['POST', '/v1/conversations/conv_01kzzzzzzzzzzzzzzzzzzzzzzz', 'GET, HEAD'],
  ['PUT', '/v1/contacts', 'GET, HEAD, POST'],
  ['PUT', '/v1/webhooks/whe_01kzzzzzzzzzzzzzzzzzzzzzzz', 'GET, HEAD, DELETE'],
  ['GET', '/v1/webhooks/whe_01kzzzzzzzzzzzzzzzzzzzzzzz/rotate-secret', 'POST'],
  ['DELETE', '/v1/channels/', 'GET, HEAD'],
  ['POST', '/v1/openapi.json', 'GET, HEAD'],
];

describe('a wrong method on a /v1 path', () => {
  it.each(CASES)('%s %s is 405 with Allow: %s, token or not, and changes nothing', async (method, path, allow) => {
    const count = () => server.ctx.store.get(sql`SELECT COUNT(*) AS n FROM messages`);
    const before = await count();
    for (const t of [token, null]) {
      const r = await call(server, method, path, {
        token: t,
        body: method === 'GET' ? undefined : { channel: 'sms', to: '+14155550123', body: 'x' },
      });
      expect(r.status, r.text).toBe(405);
      expect(r.headers.get('allow')).toBe(allow);
      expect(errorOut.parse(r.body).error.code).toBe('method_not_allowed');
      expect(r.body.error.message).toContain(method);
      expect(r.headers.get('x-request-id')).toBeTruthy();
    }
    expect(await count()).toEqual(before);
  });

  it('methods the router has no route for at all (TRACE, PROPFIND) are 405 too', async () => {
    for (const method of ['TRACE', 'PROPFIND']) {
      const r = await new Promise<{ status: number; allow: unknown; body: any }>((resolve, reject) => {
        const q = httpRequest(`${server.url}/v1/messages`, { method }, (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, allow: res.headers.allow, body: JSON.parse(body) }));
        });
        q.on('error', reject).end();
      });
      expect([r.status, r.allow, r.body.error.code]).toEqual([405, 'GET, HEAD, POST', 'method_not_allowed']);
    }
  });

  it('a path that does not exist is still 404, whatever the method', async () => {
    for (const [method, path] of [
      ['GET', '/v1/nothing'],
      ['POST', '/v1/messages/msg_x/extra'],
      ['DELETE', '/v1'],
    ]) {
      const r = await call(server, method, path, { token });
      expect(r.status).toBe(404);
      expect(r.headers.get('allow')).toBeNull();
      expect(r.body.error.code).toBe('not_found');
    }
  });
});
