import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { SMS, send, sandboxPartner } from '../helpers/gateways.js';
import { waitFor } from '../helpers/wait.js';
import { sql } from '../../src/db/sql.js';

// /metrics exports msgd's work counters, the same ones msgctl tui's overview shows.

let s: TestServer | undefined;
afterEach(async () => {
  await s?.stop();
  s = undefined;
});

const TOKEN = 'metrics-token-0123456789abcdef';

describe('/metrics and the work counters', () => {
  it('counts a sandbox send and its verified status webhook', async () => {
    s = await startTestServer({ 'metrics.token': TOKEN });
    const p = await sandboxPartner(s.ctx, { balance: '10', channels: ['sms'] });
    await s.ctx.store.run(sql`UPDATE gateways SET settings = '{"delivery_delay_ms":0}' WHERE id = ${p.gateways.sms}`);
    expect((await send(s.url, SMS, { to: '+14155550123', text: 'hi' }, p.token)).status).toBe(200);
    const text = await waitFor(
      async () => {
        const t = await (await fetch(`${s!.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
        return /msgd_provider_webhooks_total\{provider="sandbox",verdict="verified"\} 1/.test(t) ? t : null;
      },
      'the send and its report in /metrics',
      10_000,
      50,
    );
    expect(text).toContain(`msgd_dispatch_attempts_total{gateway="${p.gateways.sms}",outcome="sent"} 1`);
    expect(text).toContain('# TYPE msgd_dispatch_attempts_total counter');
    expect(text).toContain('msgd_webhook_endpoints_disabled_total 0');
  });
});
