import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import {
  connect,
  keptStore,
  setupPartner,
  startTestServer,
  type KeptStore,
  type TestServer,
} from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, startReceiver, type Receiver, type TlsFiles } from '../helpers/webhook-receiver.js';
import { apiFor, deliveryRows, inbound, outOverrides } from './helpers.js';

// Deliveries are jobs in the database: stopping msgd in the middle of retrying loses none.
// The receiver is down while events happen, msgd stops with every delivery waiting for its
// next attempt, the receiver comes back, a new msgd starts on the same store, and
// every event is delivered (once, by the receiver's webhook-id dedupe). The endpoint that
// answered 410 before the restart stays disabled after it.

const N = 25;
// Retries 1.5 s apart: the stop lands while every delivery waits for its next attempt.
const SCHEDULE = [0, 1500, 1500, 1500, 1500, 1500, 1500, 1500];

describe('restart mid-retry', () => {
  let tls: TlsFiles;
  let kept: KeptStore;
  let good: Receiver;
  let gone: Receiver;
  let server: TestServer | null = null;

  beforeAll(async () => {
    tls = makeCert();
    kept = await keptStore();
    good = await startReceiver(tls);
    gone = await startReceiver(tls);
  });
  afterAll(async () => {
    await server?.stop();
    await good.close();
    await gone.close();
    tls.cleanup();
    await kept.drop();
  });

  it('delivers every event exactly once per event id after the restart; the disabled endpoint gets nothing more', async () => {
    const overrides = outOverrides(tls, { 'webhooksOut.retryScheduleMs': SCHEDULE });
    server = await startTestServer(overrides, kept);
    const p = await setupPartner(server.ctx, { slug: 'restart' });
    const c = (await connect(server.ctx, p.partnerId, { kind: 'sandbox' }, 'sms', '+15550007777')).channel;
    const channel = { id: c.id, type: 'sms' as const, gatewayId: c.gateway_id, sender: c.sender };
    const api = apiFor(server, p.token);
    const a = await api('POST', '/v1/webhooks', { url: good.url });
    const b = await api('POST', '/v1/webhooks', { url: gone.url });
    good.setSecrets([a.body.secret]);
    gone.setSecrets([b.body.secret]);
    gone.behave({ kind: 'status', status: 410 });
    await good.down();

    const ids: string[] = [];
    for (let i = 0; i < N; i++)
      ids.push(
        (await inbound(server.ctx, p.partnerId, channel, `+1415555${String(i).padStart(4, '0')}`, `m${i}`)).eventId,
      );
    const ctx1 = server.ctx;
    await waitFor(
      async () => (await deliveryRows(ctx1, a.body.id)).filter((d) => d.attempts >= 1).length === N,
      'a failed first attempt each',
      8000,
    );
    await waitFor(
      async () => (await deliveryRows(ctx1, b.body.id)).every((d) => d.status !== 'pending'),
      '410 endpoint settled',
      8000,
    );
    expect(await ctx1.store.get(sql`SELECT status FROM webhook_endpoints WHERE id = ${b.body.id}`)).toEqual({
      status: 'disabled',
    });
    // Requests already in flight when the first 410 came back got theirs too; none after.
    expect(gone.received.length).toBeGreaterThanOrEqual(1);
    const goneAfter410 = gone.received.length;

    await server.stop();
    server = null;
    expect(good.received).toHaveLength(0);

    await good.up();
    server = await startTestServer(overrides, kept);
    const ctx2 = server.ctx;
    // A new event after the restart: it must reach the live endpoint and not the disabled one.
    const late = (await inbound(ctx2, p.partnerId, channel, '+14155559999', 'after restart')).eventId;
    ids.push(late);

    await waitFor(() => ids.every((id) => good.delivered.includes(id)), 'every event delivered', 15000);
    expect(new Set(good.delivered).size).toBe(good.delivered.length);
    expect([...good.delivered].sort()).toEqual([...ids].sort());
    await waitFor(
      async () => (await deliveryRows(ctx2, a.body.id)).every((d) => d.status === 'succeeded'),
      'all succeeded',
      5000,
    );
    expect(await deliveryRows(ctx2, a.body.id)).toHaveLength(N + 1);
    expect(good.received.every((r) => r.verified)).toBe(true);
    expect(gone.received).toHaveLength(goneAfter410);
    expect((await deliveryRows(ctx2, b.body.id)).some((d) => d.event_id === late)).toBe(false);
  });
});
