import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, type TlsFiles } from '../helpers/webhook-receiver.js';
import { FAST_SCHEDULE, attemptRows, deliveryRows, inbound, world, type World } from './helpers.js';

// Receivers that fail: every failure is an attempt in the log, retried on the schedule
// (FAST_SCHEDULE here: 0, 100, 200, 300, 400 ms) until delivered, dead, or the endpoint is
// disabled. The receiver dedupes by webhook-id; duplicates are possible and identifiable.

let tls: TlsFiles;
beforeAll(() => {
  tls = makeCert();
});
afterAll(() => tls.cleanup());

function endpointRow(w: World, id: string): Promise<any> {
  return w.server.ctx.store.get(sql`SELECT * FROM webhook_endpoints WHERE id = ${id}`);
}

async function fannedOut(w: World, eventId: string): Promise<boolean> {
  const row = await w.server.ctx.store.get<{ fanned_out: number }>(
    sql`SELECT fanned_out FROM events WHERE id = ${eventId}`,
  );
  return row?.fanned_out === 1;
}

async function settled(w: World, endpointId: string, eventId: string, status: string, timeoutMs = 8000) {
  return waitFor(
    async () => {
      const d = (await deliveryRows(w.server.ctx, endpointId)).find((x) => x.event_id === eventId);
      return d && d.status === status ? d : undefined;
    },
    `delivery of ${eventId} ${status}`,
    timeoutMs,
  );
}

describe('retries', () => {
  let w: World;
  let ep: { id: string };
  beforeAll(async () => {
    w = await world({}, { tls });
    ep = await w.register();
  });
  afterAll(() => w.close());

  it('500 twice, then 2xx: delivered once, three attempts logged with status and snippet', async () => {
    w.receiver.behave((_r, n) => (n <= 2 ? { kind: 'status', status: 500, body: 'database down' } : { kind: 'ok' }));
    const { eventId } = await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550200', 'retry me');
    const d = await settled(w, ep.id, eventId, 'succeeded');
    expect(w.receiver.seen.get(eventId)).toBe(3);
    expect(w.receiver.delivered.filter((x) => x === eventId)).toHaveLength(1);
    const a = await attemptRows(w.server.ctx, d.id);
    expect(a.map((x) => x.status_code)).toEqual([500, 500, 200]);
    expect(a[0].response_snippet).toBe('database down');
    expect(a[0].error).toBe('HTTP 500');
    expect(d.attempts).toBe(3);
    // Same event id on every attempt, a fresh timestamp on each.
    const reqs = w.receiver.received.filter((x) => x.id === eventId);
    expect(new Set(reqs.map((x) => x.headers['x-msgd-event-id']))).toEqual(new Set([eventId]));
    expect(reqs[2].at - reqs[0].at).toBeGreaterThanOrEqual(250);
    expect((await endpointRow(w, ep.id)).failing_since).toBeNull();
  });

  it('a receiver slower than the timeout is a failure, retried; the late duplicate is identifiable', async () => {
    let first = true;
    w.receiver.behave(() => (first ? ((first = false), { kind: 'slow', ms: 1500 }) : { kind: 'ok' }));
    const { eventId } = await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550201', 'slow');
    const d = await settled(w, ep.id, eventId, 'succeeded');
    const a = await attemptRows(w.server.ctx, d.id);
    expect(a[0].status_code).toBeNull();
    expect(a[0].error).toMatch(/timeout/);
    expect(a[0].duration_ms).toBeGreaterThanOrEqual(900);
    expect(a[a.length - 1].status_code).toBe(200);
    await waitFor(() => (w.receiver.seen.get(eventId) ?? 0) >= 2, 'both requests seen', 3000);
    expect(w.receiver.delivered.filter((x) => x === eventId)).toHaveLength(1);
  });

  it('receiver down: connection errors are retried until it is back', async () => {
    await w.receiver.down();
    const { eventId } = await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550202', 'down');
    await waitFor(
      async () => {
        const d = (await deliveryRows(w.server.ctx, ep.id)).find((x) => x.event_id === eventId);
        return d && d.attempts >= 2;
      },
      'two failed attempts',
      5000,
    );
    await w.receiver.up();
    const d = await settled(w, ep.id, eventId, 'succeeded');
    const a = await attemptRows(w.server.ctx, d.id);
    expect(a[0].error).toMatch(/ECONNREFUSED/);
    expect(a[0].status_code).toBeNull();
    expect(w.receiver.delivered).toContain(eventId);
  });

  it('429 and 503 with Retry-After: the next attempt waits at least that long', async () => {
    w.receiver.behave((_r, n) =>
      n === base + 1
        ? { kind: 'status', status: 429, headers: { 'retry-after': '1' } }
        : n === base + 2
          ? { kind: 'status', status: 503, headers: { 'retry-after': '1' } }
          : { kind: 'ok' },
    );
    const base = w.receiver.received.length;
    const { eventId } = await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550203', 'throttled');
    const d = await settled(w, ep.id, eventId, 'succeeded');
    const reqs = w.receiver.received.filter((x) => x.id === eventId);
    expect(reqs).toHaveLength(3);
    // The schedule alone would retry after ~100 and ~200 ms.
    expect(reqs[1].at - reqs[0].at).toBeGreaterThanOrEqual(950);
    expect(reqs[2].at - reqs[1].at).toBeGreaterThanOrEqual(950);
    expect((await attemptRows(w.server.ctx, d.id)).map((x) => x.status_code)).toEqual([429, 503, 200]);
  });

  it('a redirect is a failure and is not followed', async () => {
    w.receiver.behave({ kind: 'status', status: 302, headers: { location: 'https://127.0.0.1:1/elsewhere' } });
    const { eventId } = await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550204', 'moved');
    const d = await waitFor(
      async () => (await deliveryRows(w.server.ctx, ep.id)).find((x) => x.event_id === eventId && x.attempts >= 1),
      'attempt',
      5000,
    );
    const a = await attemptRows(w.server.ctx, d.id);
    expect(a[0].status_code).toBe(302);
    expect(a[0].error).toMatch(/redirects are not followed/);
    w.receiver.behave({ kind: 'ok' });
    await settled(w, ep.id, eventId, 'succeeded');
  });
});

describe('giving up', () => {
  it('always 500: the delivery is dead after the whole schedule', async () => {
    const w = await world({}, { tls });
    try {
      const ep = await w.register();
      w.receiver.behave({ kind: 'status', status: 500 });
      const { eventId } = await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550210', 'never');
      const d = await settled(w, ep.id, eventId, 'dead');
      expect(d.attempts).toBe(FAST_SCHEDULE.length);
      expect(w.receiver.seen.get(eventId)).toBe(FAST_SCHEDULE.length);
      expect(await attemptRows(w.server.ctx, d.id)).toHaveLength(FAST_SCHEDULE.length);
      // Its job is finished: nothing left in the queue for it.
      expect(await w.server.ctx.store.get(sql`SELECT COUNT(*) AS n FROM jobs WHERE kind = 'webhook.deliver'`)).toEqual({
        n: 0,
      });
    } finally {
      await w.close();
    }
  });

  it('410 Gone disables the endpoint at once; it receives nothing more', async () => {
    const w = await world({}, { tls });
    try {
      const ep = await w.register();
      w.receiver.behave({ kind: 'status', status: 410 });
      const first = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550211', 'gone')).eventId;
      const d = await settled(w, ep.id, first, 'failed');
      expect(d.attempts).toBe(1);
      const row = await endpointRow(w, ep.id);
      expect(row.status).toBe('disabled');
      expect(row.disabled_reason).toMatch(/410 Gone/);
      const listed = await w.api('GET', '/v1/webhooks');
      expect(listed.body.data[0]).toMatchObject({ id: ep.id, status: 'disabled' });
      expect(listed.body.data[0].disabled_reason).toMatch(/410/);

      w.receiver.behave({ kind: 'ok' });
      const second = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550211', 'after')).eventId;
      await waitFor(() => fannedOut(w, second), 'fanned out', 3000);
      // Fanned out without a delivery to the disabled endpoint: nothing can be sent to it.
      expect(await deliveryRows(w.server.ctx, ep.id)).toHaveLength(1);
      expect(w.receiver.received).toHaveLength(1);
    } finally {
      await w.close();
    }
  });

  it('an endpoint failing continuously past disableAfterHours is disabled and its pending deliveries stop', async () => {
    // The default 5 days, reached by moving the start of the failures back (moving msgd's clock
    // instead would leave PostgreSQL's behind, and the retries it schedules days ahead there); a
    // schedule long enough to outlast it.
    const w = await world(
      { 'webhooksOut.retryScheduleMs': [0, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200] },
      { tls },
    );
    try {
      const ep = await w.register();
      w.receiver.behave({ kind: 'status', status: 500 });
      const a = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550212', 'a')).eventId;
      const b = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550213', 'b')).eventId;
      await waitFor(
        async () => (await endpointRow(w, ep.id)).failing_since !== null,
        'the endpoint to start failing',
        5000,
      );
      const days = w.server.rt.config.webhooksOut.disableAfterHours * 3_600_000;
      await w.server.ctx.store.run(
        sql`UPDATE webhook_endpoints SET failing_since = failing_since - ${days} WHERE id = ${ep.id}`,
      );
      await waitFor(async () => (await endpointRow(w, ep.id)).status === 'disabled', 'endpoint disabled', 8000);
      const row = await endpointRow(w, ep.id);
      expect(row.disabled_reason).toMatch(/failing continuously since .* last error: HTTP 500/);
      for (const id of [a, b])
        await waitFor(
          async () =>
            ['failed', 'cancelled'].includes(
              (await deliveryRows(w.server.ctx, ep.id)).find((x) => x.event_id === id)?.status,
            ),
          `${id} stopped`,
          3000,
        );
      const count = w.receiver.received.length;
      w.receiver.behave({ kind: 'ok' });
      const c = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550214', 'c')).eventId;
      await waitFor(() => fannedOut(w, c), 'event c to be fanned out', 3000);
      expect((await deliveryRows(w.server.ctx, ep.id)).some((d) => d.event_id === c)).toBe(false);
      expect(w.receiver.received.length).toBe(count);
      expect(w.receiver.seen.has(c)).toBe(false);
      const test = await w.api('POST', `/v1/webhooks/${ep.id}/test`);
      expect(test.status).toBe(409);
    } finally {
      await w.close();
    }
  });
});
