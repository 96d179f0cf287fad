import { afterEach, describe, expect, it } from 'vitest';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { SMS, send, twilioGateway } from '../helpers/gateways.js';
import { setupPartner } from '../helpers/server.js';

// At the default level (info) a provider outage shows in the log at once, as a few lines rather
// than one per attempt, and its end too.

let s: TestServer | undefined;
let fake: TwilioFake | undefined;
afterEach(async () => {
  await s?.stop();
  await fake?.close();
  s = fake = undefined;
});

const lines = (t: TestServer) =>
  t.logs
    .join('')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

describe('send failures at info', () => {
  it('an outage of a gateway: the first failure with its details, a summary, and the recovery', async () => {
    fake = await startTwilioFake();
    // The circuit breaker off: this is about the attempts' log lines, and an open circuit would
    // hold the messages after a few failures (its own lines are tested in test/e2e/failover.test.ts).
    s = await startTestServer({
      'jobs.backoffBaseMs': 10,
      'jobs.backoffCapMs': 1000,
      'jobs.maxAttempts': 50,
      'dispatch.circuitBreaker.consecutiveFailures': 1000,
      'dispatch.circuitBreaker.failureRate': 0,
    });
    const p = await setupPartner(s.ctx, { balance: '100', prices: { sms: '0.01' }, rateLimitPerMinute: 100_000 });
    const gw = await twilioGateway(s.ctx, p.partnerId, fake);
    fake.failNext({ kind: 'status', status: 503, count: 300 });

    for (let i = 0; i < 30; i++)
      expect((await send(s.url, SMS, { to: '+14155550123', text: `outage ${i}` }, p.token)).status).toBe(200);
    // About 10 attempts a message with backoff: seconds on a quiet machine, several times that on a busy one.
    await waitFor(() => fake!.requests.length >= 300, '300 failed attempts', 60_000, 50);
    await waitFor(
      () => lines(s!).some((l) => l.msg?.startsWith('send attempts succeed again')),
      'the recovery line',
      20_000,
      50,
    );

    const mine = lines(s).filter((l) => l.gatewayId === gw.gateway.id);
    // 300 failed attempts, a handful of lines.
    expect(mine.length).toBeLessThanOrEqual(4);
    expect(mine[0]).toMatchObject({
      level: 30,
      msg: 'send attempt failed: retrying',
      provider: 'twilio',
      gateway: gw.gateway.name,
      attempt: 1,
      maxAttempts: 50,
    });
    expect(typeof mine[0].code).toBe('string');
    expect(mine[0].nextTryWithinS).toBeGreaterThan(0);
    expect(mine[0].messageId).toMatch(/^msg_/);
    const recovered = mine.at(-1)!;
    expect(recovered.msg).toMatch(/^send attempts succeed again after 300 failures/);
    expect(recovered.failures).toBe(300);
  }, 90_000);
});
