import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { SMS, send, twilioGateway } from '../helpers/gateways.js';
import { waitStatus } from '../helpers/rows.js';

// /metrics times each provider call to send a message: a histogram by gateway kind and
// outcome, so an operator sees a provider slowing down before its calls time out.

let s: TestServer;
let fake: TwilioFake;

beforeAll(async () => {
  fake = await startTwilioFake();
  s = await startTestServer({
    'metrics.port': 0,
    'dispatch.timeoutMs': 5_000,
    'jobs.backoffBaseMs': 10,
    'jobs.backoffCapMs': 1000,
  });
});
afterAll(async () => {
  await s?.stop();
  await fake?.close();
});

/** The histogram's samples for one kind and outcome: buckets by `le`, then sum and count. */
function histogram(text: string, kind: string, outcome: string) {
  const labels = `kind="${kind}",outcome="${outcome}"`;
  const buckets: Record<string, number> = {};
  for (const m of text.matchAll(
    new RegExp(`^msgd_provider_request_duration_seconds_bucket\\{le="([^"]+)",${labels}\\} (\\S+)$`, 'gm'),
  ))
    buckets[m[1]] = Number(m[2]);
  const one = (suffix: string) =>
    Number(new RegExp(`^msgd_provider_request_duration_seconds_${suffix}\\{${labels}\\} (\\S+)$`, 'm').exec(text)?.[1]);
  return { buckets, sum: one('sum'), count: one('count') };
}

describe('provider latency in /metrics', () => {
  it('times each provider call by gateway kind and outcome', async () => {
    const p = await setupPartner(s.ctx, { balance: '10', prices: { sms: '0.0075' } });
    await twilioGateway(s.ctx, p.partnerId, fake);
    const sms = async (to = '+14155550123') => {
      const r = await send(s.url, SMS, { to, text: 'hi' }, p.token);
      expect(r.status, r.text).toBe(200);
      return r.body.id as string;
    };

    // Twilio takes 600 ms to accept one message.
    fake.failNext({ kind: 'latency', ms: 600 });
    await waitStatus(s.ctx, await sms(), 'sent');
    // A 503, then a quick success: one call retried, one sent.
    fake.failNext({ kind: 'status', status: 503 });
    await waitStatus(s.ctx, await sms(), 'sent');
    // An invalid number: failed for good (Twilio's 21211).
    fake.failNext({ kind: 'error', code: 21211 });
    await waitStatus(s.ctx, await sms(), 'failed');

    const text = await (await fetch(s.metricsUrl!)).text();
    expect(text).toContain('# TYPE msgd_provider_request_duration_seconds histogram');
    const sent = histogram(text, 'twilio', 'sent');
    expect(sent.count).toBe(2);
    expect(sent.buckets['+Inf']).toBe(2);
    // The quick one under 500 ms, the slow one between 500 ms and 1 s.
    expect(sent.buckets['0.5']).toBe(1);
    expect(sent.buckets['1']).toBe(2);
    expect(sent.sum).toBeGreaterThanOrEqual(0.6);
    expect(sent.sum).toBeLessThan(2);
    expect(histogram(text, 'twilio', 'retried').count).toBe(1);
    expect(histogram(text, 'twilio', 'failed').count).toBe(1);
    // Kinds with no calls show no series.
    expect(text).not.toContain('kind="sendgrid"');
  });
});
