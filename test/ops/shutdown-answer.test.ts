import { connect as tcp, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

// A request that msgd reads after it began shutting down, on a connection that was busy when the
// shutdown began (idle ones are closed at once), is answered in the house error shape.

let server: TestServer | undefined;
afterEach(async () => {
  await server?.stop().catch(() => {});
  server = undefined;
});

/** Everything the socket has received so far. */
function received(socket: Socket) {
  const got: Buffer[] = [];
  socket.on('data', (d) => got.push(d));
  return () => Buffer.concat(got).toString('latin1');
}

describe('requests during shutdown', () => {
  // The web console is registered into the app by src/server.ts: the shutdown answer is the
  // app's, so /ui gets it as the partner APIs and the provider webhook paths do.
  it.each([
    [
      'a provider webhook',
      'POST /api/webhook.php?gateway=gw_none HTTP/1.1\r\nHost: x\r\nX-Request-Id: after-close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{',
      '}',
    ],
    [
      'the web console',
      'POST /ui/login HTTP/1.1\r\nHost: x\r\nX-Request-Id: after-close\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\n\r\na=',
      '1',
    ],
  ])('get 503 not_ready in the documented shape, with Retry-After and X-Request-Id: %s', async (_what, start, rest) => {
    server = await startTestServer();
    const { port } = new URL(server.url);
    const socket = tcp(Number(port), '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    const text = received(socket);
    // A request whose body is still arriving when shutdown begins.
    socket.write(start);
    const closing = server.close();
    socket.write(rest);
    await waitFor(() => text().includes('}'), 'the answer').catch((e) => {
      throw new Error(`${e.message}: ${text()}`);
    });
    const second = text();
    const [head, body] = second.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 503 /);
    expect(head.toLowerCase()).toContain('retry-after:');
    expect(head.toLowerCase()).toContain('x-request-id: after-close');
    expect(head.toLowerCase()).toContain('connection: close');
    const json = JSON.parse(body.slice(body.indexOf('{'), body.lastIndexOf('}') + 1));
    expect(json).toEqual({
      error: { code: 'not_ready', message: expect.stringContaining('shutting down'), details: [] },
    });
    socket.destroy();
    await closing;
  });
});
