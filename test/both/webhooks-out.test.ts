import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { idFloor } from '../../src/lib/id-time.js';
import { retentionTask } from '../../src/webhooks-out/index.js';
import {
  DELIVERY_SCAN_LIMIT,
  attemptLinesAfter,
  deliveryEvent,
  getDelivery,
  lastAttempts,
  latestAttemptLines,
  listAttempts,
  listDeliveries,
  listEndpointDeliveries,
  newestAttemptId,
  recentAttempts,
} from '../../src/webhooks-out/store.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// Outbound webhooks' reads on both stores: the operator's and the partner's views of deliveries
// and their attempts, and the retention that ends them.

const DAY = 86_400_000;
const T0 = 1_750_000_000_000;

/** An id of this prefix created at `ms`, `n` telling apart ids of the same millisecond. */
const idAt = (prefix: string, ms: number, n = 0) => `${idFloor(prefix, ms).slice(0, -4)}${String(n).padStart(4, '0')}`;

const q = (s: string | null) => (s === null ? 'NULL' : `'${s}'`);

function delivery(d: {
  id: string;
  event: string;
  endpoint: string;
  partner: string;
  status: string;
  attempts: number;
  next?: number | null;
  code?: number | null;
  error?: string | null;
  at: number;
}): string {
  return `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, partner_id, status, attempts, next_attempt_at,
      last_status_code, last_error, created_at, updated_at)
    VALUES (${q(d.id)}, ${q(d.event)}, ${q(d.endpoint)}, ${q(d.partner)}, ${q(d.status)}, ${d.attempts},
      ${d.next ?? 'NULL'}, ${d.code ?? 'NULL'}, ${q(d.error ?? null)}, ${d.at}, ${d.at});`;
}

function attempt(a: { delivery: string; no: number; code: number | null; error?: string | null; at: number }): string {
  return `INSERT INTO webhook_attempts (delivery_id, attempt_no, status_code, duration_ms, response_snippet, error, created_at)
    VALUES (${q(a.delivery)}, ${a.no}, ${a.code ?? 'NULL'}, 12, ${a.code ? "'ok'" : 'NULL'}, ${q(a.error ?? null)}, ${a.at});`;
}

// Partner A: one endpoint with four deliveries, one each of: succeeded after a retry, still
// being retried, dead after its schedule then replayed (pending again), cancelled. Partner B:
// one endpoint with one failed delivery.
const EV = [idAt('evt', T0, 1), idAt('evt', T0 + 1000, 2), idAt('evt', T0 + 2000, 3), idAt('evt', T0 + 3000, 4)];
const EVB = idAt('evt', T0 + 500, 9);
const D = [idAt('dlv', T0, 1), idAt('dlv', T0 + 1000, 2), idAt('dlv', T0 + 2000, 3), idAt('dlv', T0 + 3000, 4)];
const DB = idAt('dlv', T0 + 500, 9);

const FIXTURE = `
INSERT INTO partners (id, slug, name, created_at, updated_at) VALUES ('prt_a', 'acme', 'Acme', 1, 1);
INSERT INTO partners (id, slug, name, created_at, updated_at) VALUES ('prt_b', 'bravo', 'Bravo', 1, 1);
INSERT INTO webhook_endpoints (id, partner_id, url, secret, status, created_at, updated_at)
  VALUES ('whe_a', 'prt_a', 'https://a.example/hook', 'sealed', 'enabled', 1, 1);
INSERT INTO webhook_endpoints (id, partner_id, url, secret, status, created_at, updated_at)
  VALUES ('whe_b', 'prt_b', 'https://b.example/hook', 'sealed', 'enabled', 1, 1);
INSERT INTO events (id, partner_id, type, payload, fanned_out, created_at) VALUES
  ('${EV[0]}', 'prt_a', 'message.sent', '{}', 1, ${T0}),
  ('${EV[1]}', 'prt_a', 'message.delivered', '{}', 1, ${T0 + 1000}),
  ('${EV[2]}', 'prt_a', 'message.failed', '{}', 1, ${T0 + 2000}),
  ('${EV[3]}', 'prt_a', 'message.received', '{}', 1, ${T0 + 3000}),
  ('${EVB}', 'prt_b', 'message.sent', '{}', 1, ${T0 + 500});
${delivery({ id: D[0], event: EV[0], endpoint: 'whe_a', partner: 'prt_a', status: 'succeeded', attempts: 2, code: 200, at: T0 })}
${delivery({ id: D[1], event: EV[1], endpoint: 'whe_a', partner: 'prt_a', status: 'pending', attempts: 1, next: T0 + 9000, code: 503, error: 'HTTP 503', at: T0 + 1000 })}
${delivery({ id: D[2], event: EV[2], endpoint: 'whe_a', partner: 'prt_a', status: 'pending', attempts: 3, next: T0 + 5000, code: null, error: 'timeout', at: T0 + 2000 })}
${delivery({ id: D[3], event: EV[3], endpoint: 'whe_a', partner: 'prt_a', status: 'cancelled', attempts: 0, error: 'endpoint deleted', at: T0 + 3000 })}
${delivery({ id: DB, event: EVB, endpoint: 'whe_b', partner: 'prt_b', status: 'failed', attempts: 1, code: 410, at: T0 + 500 })}
${attempt({ delivery: D[0], no: 1, code: 500, error: 'HTTP 500', at: T0 + 10 })}
${attempt({ delivery: DB, no: 1, code: 410, at: T0 + 510 })}
${attempt({ delivery: D[0], no: 2, code: 200, at: T0 + 20 })}
${attempt({ delivery: D[1], no: 1, code: 503, error: 'HTTP 503', at: T0 + 1010 })}
${attempt({ delivery: D[2], no: 1, code: null, error: 'timeout', at: T0 + 2010 })}
${attempt({ delivery: D[2], no: 2, code: null, error: 'timeout', at: T0 + 2020 })}
${attempt({ delivery: D[2], no: 3, code: null, error: 'timeout', at: T0 + 2030 })}
`;

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
});
afterEach(() => t.close());

describe('outbound webhook deliveries', () => {
  it('shows an endpoint its own deliveries only, newest first, filtered by outcome and paged', async () => {
    await t.exec(FIXTURE);
    const ids = async (outcome?: Parameters<typeof listEndpointDeliveries>[2]['outcome']) =>
      (await listEndpointDeliveries(t.ctx, 'whe_a', { outcome, limit: 10 })).rows.map((d) => d.id);

    expect(await ids()).toEqual([D[3], D[2], D[1], D[0]]);
    expect(await ids('succeeded')).toEqual([D[0]]);
    expect(await ids('retrying')).toEqual([D[2], D[1]]);
    expect(await ids('pending')).toEqual([D[2], D[1]]);
    expect(await ids('cancelled')).toEqual([D[3]]);
    // Partner B's failed delivery is never on A's endpoint.
    expect(await ids('failed')).toEqual([]);

    const all = await listEndpointDeliveries(t.ctx, 'whe_a', { limit: 10 });
    expect(all).toMatchObject({ next: null, bounded: false });
    expect(all.rows[0]).toMatchObject({ id: D[3], status: 'cancelled', event_type: 'message.received' });

    const first = await listEndpointDeliveries(t.ctx, 'whe_a', { limit: 3 });
    expect(first.rows.map((d) => d.id)).toEqual([D[3], D[2], D[1]]);
    expect(first.next).toBe(D[1]);
    const second = await listEndpointDeliveries(t.ctx, 'whe_a', { before: first.next, limit: 3 });
    expect(second).toEqual({ rows: [expect.objectContaining({ id: D[0], attempts: 2 })], next: null, bounded: false });

    const b = await listEndpointDeliveries(t.ctx, 'whe_b', { limit: 10 });
    expect(b.rows.map((d) => d.id)).toEqual([DB]);
    expect(await listEndpointDeliveries(t.ctx, 'whe_none', { limit: 10 })).toEqual({
      rows: [],
      next: null,
      bounded: false,
    });
  });

  it('an outcome filter looks back at most DELIVERY_SCAN_LIMIT deliveries per page', async () => {
    await t.exec(FIXTURE);
    // Newer than the fixture's: that many succeeded deliveries hide the older pending ones.
    const rows: string[] = [];
    for (let i = 0; i < DELIVERY_SCAN_LIMIT; i++)
      rows.push(
        `('${idAt('dlv', T0 + 10_000, i)}', 'evt_x${i}', 'whe_a', 'prt_a', 'succeeded', 1, ${T0 + 10_000}, ${T0 + 10_000})`,
      );
    await t.exec(
      `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, partner_id, status, attempts, created_at, updated_at)
       VALUES ${rows.join(', ')}`,
    );
    const page = await listEndpointDeliveries(t.ctx, 'whe_a', { outcome: 'retrying', limit: 10 });
    expect(page.rows).toEqual([]);
    expect(page.bounded).toBe(true);
    expect(page.next).toBe(idAt('dlv', T0 + 10_000, 0));
    // The next page looks further back and finds them.
    const next = await listEndpointDeliveries(t.ctx, 'whe_a', { outcome: 'retrying', before: page.next, limit: 10 });
    expect(next.rows.map((d) => d.id)).toEqual([D[2], D[1]]);
    expect(next.bounded).toBe(false);
  });

  it("lists every partner's deliveries for the operator, with the failed filter and an endpoint", async () => {
    await t.exec(FIXTURE);
    const all = await listDeliveries(t.ctx);
    expect(all.map((d) => d.id)).toEqual([D[3], D[2], D[1], DB, D[0]]);
    expect(all[3]).toMatchObject({
      id: DB,
      partner_slug: 'bravo',
      url: 'https://b.example/hook',
      event_type: 'message.sent',
      status: 'failed',
      last_status_code: 410,
    });
    expect((await listDeliveries(t.ctx, { failed: true })).map((d) => d.id)).toEqual([D[2], D[1], DB]);
    expect((await listDeliveries(t.ctx, { endpointId: 'whe_b' })).map((d) => d.id)).toEqual([DB]);
    expect((await listDeliveries(t.ctx, { endpointId: 'whe_a', failed: true, limit: 1 })).map((d) => d.id)).toEqual([
      D[2],
    ]);
    // A delivery whose event retention removed still lists, without its type.
    await t.ctx.store.run(sql`DELETE FROM events WHERE id = ${EV[3]}`);
    expect((await listDeliveries(t.ctx, { limit: 1 }))[0]).toMatchObject({ id: D[3], event_type: null });
  });

  it('reads a delivery and its attempts, first to last, and the last attempt of a page of them', async () => {
    await t.exec(FIXTURE);
    expect(await getDelivery(t.ctx, D[1])).toMatchObject({
      id: D[1],
      endpoint_id: 'whe_a',
      partner_id: 'prt_a',
      status: 'pending',
      attempts: 1,
      next_attempt_at: T0 + 9000,
      last_error: 'HTTP 503',
    });
    expect(await getDelivery(t.ctx, 'dlv_none')).toBeUndefined();
    await t.ctx.store.run(sql`UPDATE events SET payload = ${'{"type":"message.delivered"}'} WHERE id = ${EV[1]}`);
    expect(await deliveryEvent(t.ctx, EV[1])).toEqual({
      type: 'message.delivered',
      payload: '{"type":"message.delivered"}',
    });
    expect(await deliveryEvent(t.ctx, 'evt_none')).toBeUndefined();

    const log = await listAttempts(t.ctx, D[0]);
    expect(log.map((a) => [a.attempt_no, a.status_code, a.error])).toEqual([
      [1, 500, 'HTTP 500'],
      [2, 200, null],
    ]);
    expect(await listAttempts(t.ctx, D[3])).toEqual([]);

    const last = await lastAttempts(t.ctx, [D[0], D[2], D[3]]);
    expect([...last.keys()].sort()).toEqual([D[0], D[2]].sort());
    expect(last.get(D[0])).toMatchObject({ attempt_no: 2, status_code: 200 });
    expect(last.get(D[2])).toMatchObject({ attempt_no: 3, error: 'timeout' });
    expect((await lastAttempts(t.ctx, [])).size).toBe(0);
  });

  it('tails the attempts by id, and lists recent ones since a time', async () => {
    expect(await newestAttemptId(t.ctx)).toBeNull();
    expect(await latestAttemptLines(t.ctx, 10)).toEqual([]);
    await t.exec(FIXTURE);
    const newest = await newestAttemptId(t.ctx);
    expect(newest).toBe(7);

    const latest = await latestAttemptLines(t.ctx, 3);
    expect(latest.map((a) => a.id)).toEqual([5, 6, 7]);
    expect(latest[2]).toMatchObject({
      attempt_no: 3,
      status_code: null,
      error: 'timeout',
      event_id: EV[2],
      event_type: 'message.failed',
      url: 'https://a.example/hook',
      partner_id: 'prt_a',
    });
    expect((await attemptLinesAfter(t.ctx, 4, 2)).map((a) => a.id)).toEqual([5, 6]);
    expect(await attemptLinesAfter(t.ctx, 7, 10)).toEqual([]);

    const recent = await recentAttempts(t.ctx, { since: T0 + 500 });
    expect(recent.map((a) => a.id)).toEqual([7, 6, 5, 4, 2]);
    expect(recent[4]).toMatchObject({
      delivery_id: DB,
      endpoint_id: 'whe_b',
      partner_id: 'prt_b',
      url: 'https://b.example/hook',
      event_type: 'message.sent',
      status_code: 410,
    });
    expect((await recentAttempts(t.ctx, { limit: 2 })).map((a) => a.id)).toEqual([7, 6]);
  });

  it('retention removes old attempts, finished deliveries and their events, never what is pending', async () => {
    await t.exec(FIXTURE);
    t.clock.now = T0 + 30 * DAY + 2025;
    const result = await retentionTask(30).run({ ctx: t.ctx });
    // Attempts by their time; deliveries and events by their ids' time, the pending ones kept.
    expect(result).toEqual({ attempts: 6, deliveries: 2, events: 2 });
    const left = await t.ctx.store.all<{ id: string; status: string }>(
      sql`SELECT id, status FROM webhook_deliveries ORDER BY id`,
    );
    expect(left).toEqual([
      { id: D[1], status: 'pending' },
      { id: D[2], status: 'pending' },
      { id: D[3], status: 'cancelled' },
    ]);
    const events = await t.ctx.store.all<{ id: string }>(sql`SELECT id FROM events ORDER BY id`);
    expect(events.map((e) => e.id)).toEqual([EV[1], EV[2], EV[3]]);
    expect((await t.ctx.store.all<{ id: number }>(sql`SELECT id FROM webhook_attempts`)).map((a) => a.id)).toEqual([7]);
  });
});
