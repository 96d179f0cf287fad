import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { openGatewaysOfKindIn } from '../../src/core/gateway-secrets.js';
import { updateGateway } from '../../src/core/gateways.js';
import { getMessageRowIn, messageHistoryIn } from '../../src/core/messages.js';
import { postWebhook, sandboxHeaders } from '../fakes/webhook-senders.js';
import { postJson, startTestServer, type TestServer } from '../helpers/server.js';
import { lastRow, processed } from '../helpers/webhook-log.js';
import { waitFor } from '../helpers/wait.js';

// The demo: no provider anywhere. The sandbox accepts, then msgd posts the signed delivery
// report to its own /api/webhook.php and it goes through the real inbound path.

let s: TestServer;
let secret: string;
let gatewayId: string;

beforeAll(async () => {
  s = await startTestServer({ 'demo.enabled': true });
  const gw = (await openGatewaysOfKindIn(s.ctx, ['sandbox']))[0];
  secret = gw.secrets.signing_secret;
  gatewayId = gw.id;
});
afterAll(async () => {
  await s.stop();
});

describe('the demo sandbox flow', () => {
  it('goes queued -> sent -> delivered through a signed sandbox webhook', async () => {
    expect(s.demo?.token).toBeTruthy();
    const res = await postJson(
      `${s.url}/api/send-sms.php`,
      { to: '+14155550123', text: 'Hello from msgd' },
      s.demo!.token,
    );
    expect(res.status).toBe(200);
    const m = await waitFor(
      async () => {
        const row = await getMessageRowIn(s.ctx.store, res.body.id);
        return row?.status === 'delivered' ? row : undefined;
      },
      'the demo message to be delivered',
      10_000,
    );
    expect(m.provider_message_id).toMatch(/^sbx_/);
    expect((await messageHistoryIn(s.ctx.store, m.id)).map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);
    const log = (await s.ctx.store.get(
      sql`SELECT * FROM provider_webhooks WHERE provider = 'sandbox' ORDER BY id DESC LIMIT 1`,
    )) as any;
    expect(log).toMatchObject({
      gateway_id: gatewayId,
      verification: 'ok',
      processing: 'processed',
      path: `/api/webhook.php?gateway=${gatewayId}`,
    });
    expect(JSON.parse(log.body.toString())).toEqual({
      object: 'msgd_sandbox',
      events: [
        {
          id: expect.stringMatching(/^sbx_[0-9a-f]{24}$/),
          message_id: m.provider_message_id,
          status: 'delivered',
          timestamp: expect.any(Number),
        },
      ],
    });
    expect(JSON.parse(log.headers)['x-msgd-sandbox-signature']).toBe('[redacted]');
    const delivered = (await s.ctx.store.get(
      sql`SELECT COUNT(*) AS n FROM events WHERE type = 'message.delivered'`,
    )) as { n: number };
    expect(delivered.n).toBe(1);
  });

  it('reports delivered no earlier than sent, to the millisecond', async () => {
    const gw = (await openGatewaysOfKindIn(s.ctx, ['sandbox']))[0];
    // Reported at once: with whole seconds the report then nearly always reads earlier than the send.
    await updateGateway(s.ctx, gw.id, { settings: { delivery_delay_ms: '0' } }, 'test');
    for (let i = 0; i < 5; i++) {
      const res = await postJson(`${s.url}/api/send-sms.php`, { to: '+14155550123', text: `n${i}` }, s.demo!.token);
      expect(res.status).toBe(200);
      const m = await waitFor(async () => {
        const row = await getMessageRowIn(s.ctx.store, res.body.id);
        return row?.status === 'delivered' ? row : undefined;
      }, 'delivered');
      const h = await messageHistoryIn(s.ctx.store, m.id);
      const sent = h.find((x) => x.status === 'sent')!;
      const delivered = h.find((x) => x.status === 'delivered')!;
      expect(delivered.occurred_at, JSON.stringify(h)).toBeGreaterThanOrEqual(sent.occurred_at);
    }
  });

  it('simulates an inbound message posted by hand with the gateway’s signing secret', async () => {
    const body = JSON.stringify({
      object: 'msgd_sandbox',
      events: [
        {
          id: 'demo-in-1',
          type: 'message',
          channel: 'sms',
          from: '+14155550123',
          to: '+15550000001',
          text: 'Reply!',
          timestamp: Math.floor(Date.now() / 1000),
        },
      ],
    });
    const res = await postWebhook(`${s.url}/api/webhook.php`, body, sandboxHeaders(secret, body));
    expect(res.status).toBe(200);
    expect((await processed(s.ctx, res.json.id)).processing).toBe('processed');
    const ev = (await s.ctx.store.get(sql`SELECT payload FROM events WHERE type = 'message.received'`)) as {
      payload: string;
    };
    expect(JSON.parse(ev.payload)).toMatchObject({
      channel: 'sms',
      from: '+14155550123',
      body: 'Reply!',
      to: '+15550000001',
    });
  });

  it('refuses a sandbox webhook with a wrong or missing signature', async () => {
    const body = JSON.stringify({
      object: 'msgd_sandbox',
      events: [{ id: 'x', message_id: 'sbx_1', status: 'delivered', timestamp: 1 }],
    });
    expect((await postWebhook(`${s.url}/api/webhook.php`, body, sandboxHeaders('guess', body))).status).toBe(401);
    expect((await lastRow(s.ctx)).verification_reason).toContain(
      'signature does not match the signing_secret of gateway sandbox',
    );
    expect((await postWebhook(`${s.url}/api/webhook.php`, body, { 'content-type': 'application/json' })).status).toBe(
      401,
    );
    expect((await lastRow(s.ctx)).verification_reason).toBe('missing X-Msgd-Sandbox-Signature header');
  });
});
