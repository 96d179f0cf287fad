import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startTwilioFake } from '../fakes/twilio.js';
import { waitFor, waitForExit } from '../helpers/wait.js';
import { cleanupAfterEach, prepare, startMsgd } from './child.js';
import { SMS, send } from '../helpers/gateways.js';

// server.shutdownTimeoutMs bounds a shutdown: neither a provider that never answers nor a
// client that never finishes its request keeps msgd (and its data-directory lock) alive.

const cleanup = cleanupAfterEach();

describe('a bounded shutdown', () => {
  it('a provider call that never ends: msgd exits once server.shutdownTimeoutMs has passed, saying why', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    fake.latencyMs = 120_000;
    const prep = cleanup.prep(
      await prepare(
        fake,
        { server: { shutdownTimeoutMs: 2_000 }, dispatch: { timeoutMs: 120_000 } },
        { balance: '10', price: '0.01' },
      ),
    );
    const c = cleanup.child(await startMsgd(prep));
    expect((await send(c.url, SMS, { to: '+14155550123', text: 'stuck' }, prep.partner.token)).status).toBe(200);
    await waitFor(() => fake.requests.length === 1, 'the provider call', 5_000);

    c.child.kill('SIGTERM');
    const exit = await waitForExit(c.child, 10_000);
    expect(exit.code).toBe(1);
    expect(exit.ms).toBeGreaterThanOrEqual(1_900);
    expect(exit.ms).toBeLessThan(4_000);
    expect(c.output()).toContain('shutdown took longer than server.shutdownTimeoutMs (2000 ms)');
    // The lock went with the process: the next msgd starts at once.
    const next = cleanup.child(await startMsgd(prep));
    expect((await fetch(`${next.url}/healthz`)).status).toBe(200);
  });

  it('a client that never finishes its request body does not hold the shutdown', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    const prep = cleanup.prep(
      await prepare(fake, { server: { shutdownTimeoutMs: 20_000 } }, { balance: '10', price: '0.01' }),
    );
    const c = cleanup.child(await startMsgd(prep));
    const sock = net.connect(prep.port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    sock.on('error', () => {});
    sock.write(
      `POST ${SMS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${prep.partner.token}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"to":',
    );
    const closed = new Promise((r) => sock.once('close', r));
    await new Promise((r) => setTimeout(r, 300));

    c.child.kill('SIGTERM');
    const exit = await waitForExit(c.child, 15_000);
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.ms).toBeLessThan(8_000);
    await closed;
  });
});
