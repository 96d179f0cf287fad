import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

// One line per request at debug (the path without its query: Meta's handshake carries the
// verify token there), none at info; every response carries X-Request-Id.

let s: TestServer | undefined;
afterEach(async () => {
  await s?.stop();
  s = undefined;
});

const requestLines = (logs: string[]) =>
  logs
    .flatMap((chunk) => chunk.split('\n'))
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === 'request');

describe('request log', () => {
  it('at debug, logs method, path without the query, status and time; the secret in the query never appears', async () => {
    s = await startTestServer({ 'log.level': 'debug' });
    const res = await fetch(
      `${s.url}/api/webhook.php?hub.mode=subscribe&hub.verify_token=sekrit-token&hub.challenge=5`,
    );
    expect(res.status).toBe(403);
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    const lines = requestLines(s.logs);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      method: 'GET',
      path: '/api/webhook.php',
      status: 403,
      reqId: res.headers.get('x-request-id'),
    });
    expect(typeof lines[0].ms).toBe('number');
    expect(s.logs.join('')).not.toContain('sekrit-token');
  });

  it('at info, writes no line per request', async () => {
    s = await startTestServer({ 'log.level': 'info' });
    const res = await fetch(`${s.url}/healthz`);
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    expect(requestLines(s.logs)).toEqual([]);
  });

  it('with log.accessLog, at info, one line per request with request id, route, status and duration', async () => {
    s = await startTestServer({ 'log.level': 'info', 'log.accessLog': true });
    const res = await fetch(`${s.url}/v1/messages/msg_nope?limit=5`, { headers: { 'x-request-id': 'trace-42' } });
    expect(res.status).toBe(401);
    const lines = requestLines(s.logs);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 30,
      reqId: 'trace-42',
      method: 'GET',
      route: '/v1/messages/:id',
      path: '/v1/messages/msg_nope',
      status: 401,
    });
    expect(typeof lines[0].ms).toBe('number');
  });
});
