import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';

// Slowloris: a client that sends its headers or body a byte at a time is cut off within
// server.headersTimeoutMs / server.requestTimeoutMs, also once it has been answered.

let s: TestServer | undefined;
afterEach(async () => {
  await s?.stop();
  s = undefined;
});

interface Drip {
  /** Everything the server sent. */
  received(): string;
  /** Resolves with the milliseconds from the start until the server closed the connection. */
  closed: Promise<number>;
  stop(): void;
}

/** Open a connection, send `head` at once, then `drip` one byte a second. */
function drip(port: number, head: string, trickle: string): Drip {
  const started = Date.now();
  const sock = net.connect(port, '127.0.0.1');
  let got = '';
  sock.on('data', (d) => (got += d));
  sock.on('error', () => {});
  const closed = new Promise<number>((r) => sock.once('close', () => r(Date.now() - started)));
  sock.write(head);
  let i = 0;
  const t = setInterval(() => {
    if (sock.destroyed || i >= trickle.length) return;
    sock.write(trickle[i++]);
  }, 1_000);
  void closed.finally(() => clearInterval(t));
  return { received: () => got, closed, stop: () => (clearInterval(t), sock.destroy()) };
}

const port = (t: TestServer) => Number(new URL(t.url).port);
const body = JSON.stringify({ to: '+14155550123', text: 'x'.repeat(80) });

describe('slow clients', () => {
  it('a body dripped at 1 B/s is cut off with a 408 within server.requestTimeoutMs', async () => {
    s = await startTestServer({ 'server.requestTimeoutMs': 2_000 });
    const p = await setupPartner(s.ctx, { balance: '10' });
    const d = drip(
      port(s),
      `POST /api/send-sms.php HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${p.token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      body,
    );
    try {
      const ms = await d.closed;
      expect(ms).toBeGreaterThanOrEqual(1_900);
      expect(ms).toBeLessThan(4_500);
      expect(d.received()).toMatch(/^HTTP\/1\.1 408 /);
      expect(d.received()).toContain('"code":"request_timeout"');
    } finally {
      d.stop();
    }
  });

  it('after a 401 for a request whose body still drips, the connection is closed at once', async () => {
    s = await startTestServer({ 'server.requestTimeoutMs': 30_000 });
    const d = drip(
      port(s),
      `POST /api/send-sms.php HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer msgd_live_nope\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      body,
    );
    try {
      const ms = await d.closed;
      expect(ms).toBeLessThan(1_500);
      expect(d.received()).toMatch(/^HTTP\/1\.1 401 /);
      expect(d.received().toLowerCase()).toContain('connection: close');
    } finally {
      d.stop();
    }
  });

  it('headers dripped at 1 B/s are cut off within server.headersTimeoutMs', async () => {
    s = await startTestServer({ 'server.headersTimeoutMs': 2_000 });
    const d = drip(port(s), 'GET /healthz HTTP/1.1\r\n', 'X-Slow: ' + 'a'.repeat(60));
    try {
      const ms = await d.closed;
      expect(ms).toBeLessThan(4_500);
      expect(d.received()).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      d.stop();
    }
  });

  it('a request that arrives in time is served over a kept-alive connection as before', async () => {
    s = await startTestServer({ 'server.requestTimeoutMs': 2_000 });
    for (let i = 0; i < 3; i++) expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
  });
});
