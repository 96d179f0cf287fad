import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../src/core/audit.js';
import { createEndpoint, deleteEndpoint, disableEndpointIn, getEndpoint } from '../../src/core/endpoints.js';
import { emitEventIn } from '../../src/core/events.js';
import { sql } from '../../src/db/sql.js';
import { JobQueue } from '../../src/queue/queue.js';
import { type AttemptSettle, settleAttempt } from '../../src/webhooks-out/deliver.js';
import { Fanout } from '../../src/webhooks-out/fanout.js';
import { MAX_REPLAY_EVENTS, replayEvent, replaySince, sendTestEvent } from '../../src/webhooks-out/replay.js';
import { DEFAULT_SCHEDULE_MS, nextDelayMs } from '../../src/webhooks-out/schedule.js';
import { DELIVERY_JOB, getDelivery, listAttempts, loadForAttempts } from '../../src/webhooks-out/store.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { raceOnRow } from './race.js';
import { sleep, waitFor } from '../helpers/wait.js';

// Outbound webhooks' writes on both stores: the fan-out of events to deliveries and their jobs,
// the settle of an attempt (success, failure and its retry, 410, the endpoint disabled after
// failing too long), the delivery load, the test event and replay, and the races of two
// fan-outs or two replays at once.

const HOUR = 3_600_000;

let t: StoreCtx;
let queue: JobQueue;
let fanout: Fanout;
let a1: string;
let a2: string;
let b1: string;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  queue = new JobQueue(t.dialect === 'sqlite' ? t.ctx.db : t.ctx.store);
  fanout = new Fanout({ ctx: t.ctx, queue, firstDelayMs: () => 0, logger: { error: () => {} } });
  await insertPartner(t, { id: 'prt_a', slug: 'acme' });
  await insertPartner(t, { id: 'prt_b', slug: 'bravo' });
  a1 = (await createEndpoint(t.ctx, 'prt_a', { url: 'https://a.example/all' })).endpoint.id;
  a2 = (await createEndpoint(t.ctx, 'prt_a', { url: 'https://a.example/sent', events: ['message.sent'] })).endpoint.id;
  b1 = (await createEndpoint(t.ctx, 'prt_b', { url: 'https://b.example/all' })).endpoint.id;
});
afterEach(() => t.close());

const emit = (partner: string, type: 'message.sent' | 'message.failed' | 'message.received', n = 0) =>
  emitEventIn(t.ctx.store, t.ctx, partner, type, { message_id: `msg_${n}` });

interface Pair {
  event_id: string;
  endpoint_id: string;
  status: string;
}
const deliveries = () =>
  t.ctx.store.all<Pair & { id: string }>(
    sql`SELECT id, event_id, endpoint_id, status FROM webhook_deliveries ORDER BY event_id, endpoint_id`,
  );
const pairs = async () => (await deliveries()).map((d) => `${d.event_id} ${d.endpoint_id}`);
/** The delivery ids the queue holds jobs for, with the attempt count each run began at. */
const jobs = async () =>
  (
    await t.ctx.store.all<{ payload: string }>(sql`SELECT payload FROM jobs WHERE kind = ${DELIVERY_JOB} ORDER BY id`)
  ).map((j) => JSON.parse(j.payload) as { d: string; b: number });
const unfanned = async () =>
  (await t.ctx.store.get<{ n: number }>(sql`SELECT CAST(COUNT(*) AS BIGINT) AS n FROM events WHERE fanned_out = 0`))!.n;

describe('fan-out', () => {
  it('makes exactly one delivery and one job per event and subscribed enabled endpoint of its partner', async () => {
    const sent = await emit('prt_a', 'message.sent');
    const failed = await emit('prt_a', 'message.failed');
    const other = await emit('prt_b', 'message.received');
    expect(await unfanned()).toBe(3);
    expect(await fanout.runOnce()).toBe(3);
    expect(await pairs()).toEqual(
      [`${sent.id} ${a1}`, `${sent.id} ${a2}`, `${failed.id} ${a1}`, `${other.id} ${b1}`].sort(),
    );
    expect(await unfanned()).toBe(0);
    const ds = await deliveries();
    expect(ds.every((d) => d.status === 'pending')).toBe(true);
    expect((await jobs()).map((j) => j.d).sort()).toEqual(ds.map((d) => d.id).sort());
    expect((await jobs()).every((j) => j.b === 0)).toBe(true);
    // Nothing left: fanning out again makes nothing more.
    expect(await fanout.runOnce()).toBe(0);
    expect(await deliveries()).toHaveLength(4);
  });

  it('skips disabled and deleted endpoints, and never broadcasts a test event', async () => {
    await t.ctx.store.transaction((tx) => disableEndpointIn(t.ctx, tx, a1, 'off'));
    await deleteEndpoint(t.ctx, 'prt_a', a2);
    await emitEventIn(t.ctx.store, t.ctx, 'prt_b', 'webhook.test', { endpoint_id: 'whe_elsewhere' });
    const sent = await emit('prt_a', 'message.sent');
    // No enabled endpoint of A subscribes: the event is stored fanned out already.
    expect(await getEventFannedOut(sent.id)).toBe(1);
    expect(await fanout.runOnce()).toBe(1);
    expect(await deliveries()).toEqual([]);
    expect(await unfanned()).toBe(0);
  });

  it('fans out a batch at a time, every event once however the batches fall', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) ids.push((await emit('prt_b', 'message.sent', i)).id);
    expect(await fanout.runOnce(10)).toBe(10);
    expect(await fanout.runOnce(10)).toBe(10);
    expect(await fanout.runOnce(10)).toBe(5);
    expect((await deliveries()).map((d) => d.event_id).sort()).toEqual(ids.sort());
    expect(await jobs()).toHaveLength(25);
  });

  it('two fan-outs at once deliver no event twice: one delivery and one job per event and endpoint', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) ids.push((await emit(i % 2 ? 'prt_a' : 'prt_b', 'message.sent', i)).id);
    const other = new Fanout({ ctx: t.ctx, queue, firstDelayMs: () => 0, logger: { error: () => {} } });
    const handled = await Promise.all([fanout.runOnce(40), other.runOnce(40), fanout.runOnce(40)]);
    expect(handled.reduce((a, b) => a + b, 0)).toBe(60);
    const ds = await deliveries();
    // A's events go to both of its endpoints, B's to its one.
    expect(ds).toHaveLength(30 * 2 + 30);
    expect(new Set(ds.map((d) => `${d.event_id} ${d.endpoint_id}`)).size).toBe(ds.length);
    const js = await jobs();
    expect(js.map((j) => j.d).sort()).toEqual(ds.map((d) => d.id).sort());
  });

  it('a fan-out failing on every sweep logs its first failure, not each one, and says when it works again', async () => {
    const lines: { level: string; obj: Record<string, unknown>; msg?: string }[] = [];
    const failing = new Fanout({
      ctx: t.ctx,
      queue,
      firstDelayMs: () => 0,
      sweepMs: 20,
      failureLogIntervalMs: 60_000,
      logger: {
        error: (obj, msg) => lines.push({ level: 'error', obj: obj as Record<string, unknown>, msg }),
        info: (obj, msg) => lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
      },
    });
    const ev = await emit('prt_b', 'message.sent');
    // The endpoints out of reach: every batch fails until they are back.
    await t.exec('ALTER TABLE webhook_endpoints RENAME TO webhook_endpoints_away');
    try {
      failing.start();
      await sleep(500);
    } finally {
      await t.exec('ALTER TABLE webhook_endpoints_away RENAME TO webhook_endpoints');
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'error', msg: 'webhook fan-out failed; the sweep will retry' });
    await waitFor(async () => (await unfanned()) === 0, 'the event fanned out');
    await failing.stop();
    expect(await pairs()).toEqual([`${ev.id} ${b1}`]);
    expect(lines).toHaveLength(2);
    expect(lines[1].level).toBe('info');
    expect(lines[1].msg).toMatch(/^webhook fan-outs succeed again after \d+ failures in \d+ s$/);
    expect(lines[1].obj.failures).toBeGreaterThan(3);
  });
});

async function getEventFannedOut(id: string): Promise<number | undefined> {
  return (await t.ctx.store.get<{ fanned_out: number }>(sql`SELECT fanned_out FROM events WHERE id = ${id}`))
    ?.fanned_out;
}

describe('an attempt and its settle', () => {
  let deliveryId: string;
  beforeEach(async () => {
    await emit('prt_b', 'message.sent');
    await fanout.runOnce();
    deliveryId = (await deliveries())[0].id;
  });

  const settle = (s: Omit<AttemptSettle, 'deliveryId' | 'endpointId'>) =>
    t.ctx.store.transaction((tx) => settleAttempt(t.ctx, tx, { deliveryId, endpointId: b1, ...s }));
  const attempt = (n: number, status: number | null, error: string | null = null) => ({
    attemptNo: n,
    status,
    durationMs: 12,
    snippet: status === null ? null : 'answer',
    error,
  });

  it('loads what an attempt needs: the delivery, its endpoint and the body, for a batch at once', async () => {
    const loaded = await loadForAttempts(t.ctx, t.ctx.store, [deliveryId, 'dlv_gone']);
    expect([...loaded.keys()]).toEqual([deliveryId]);
    const a = loaded.get(deliveryId)!;
    expect(a.delivery).toEqual(await getDelivery(t.ctx, deliveryId));
    expect(a.endpoint).toEqual(await getEndpoint(t.ctx, 'prt_b', b1));
    expect(a.eventType).toBe('message.sent');
    expect(JSON.parse(a.body)).toMatchObject({ event: 'message.sent', message_id: 'msg_0' });
    // One delivery alone (a statement of its own) reads the same.
    expect(await loadForAttempts(t.ctx, t.ctx.store, [deliveryId])).toEqual(loaded);
    expect(await loadForAttempts(t.ctx, t.ctx.store, [])).toEqual(new Map());
  });

  it('a failure is logged and retried on the schedule; the success after it ends the failure clock', async () => {
    const at = t.clock.now;
    const delay = nextDelayMs(DEFAULT_SCHEDULE_MS, 1, { random: () => 0.5 })!;
    expect(delay).toBe(5_000);
    const health = { kind: 'failing', at, disableAfterMs: 120 * HOUR } as const;
    expect(
      await settle({
        record: attempt(1, 500, 'HTTP 500'),
        next: { status: 'pending', nextAttemptAt: at + delay },
        health,
      }),
    ).toBeNull();
    expect(await getDelivery(t.ctx, deliveryId)).toMatchObject({
      status: 'pending',
      attempts: 1,
      next_attempt_at: at + 5_000,
      last_status_code: 500,
      last_error: 'HTTP 500',
    });
    expect((await getEndpoint(t.ctx, 'prt_b', b1))!.failing_since).toBe(at);
    // A second failure leaves the clock where it started.
    t.clock.now += 5_000;
    await settle({
      record: attempt(2, null, 'timeout'),
      next: { status: 'pending', nextAttemptAt: t.clock.now + 300_000 },
      health: { ...health, at: t.clock.now },
    });
    expect((await getEndpoint(t.ctx, 'prt_b', b1))!.failing_since).toBe(at);
    await settle({
      record: attempt(3, 200),
      next: { status: 'succeeded', nextAttemptAt: null },
      health: { kind: 'ok', clear: true },
    });
    expect(await getDelivery(t.ctx, deliveryId)).toMatchObject({
      status: 'succeeded',
      attempts: 3,
      next_attempt_at: null,
      last_status_code: 200,
      last_error: null,
    });
    expect((await getEndpoint(t.ctx, 'prt_b', b1))!.failing_since).toBeNull();
    expect((await listAttempts(t.ctx, deliveryId)).map((a) => [a.attempt_no, a.status_code, a.error])).toEqual([
      [1, 500, 'HTTP 500'],
      [2, null, 'timeout'],
      [3, 200, null],
    ]);
  });

  it('the schedule: each delay after a failure, within its jitter, then none (dead)', () => {
    const delays = DEFAULT_SCHEDULE_MS.map((_, i) => nextDelayMs(DEFAULT_SCHEDULE_MS, i, { random: () => 1 }));
    expect(delays).toEqual(DEFAULT_SCHEDULE_MS.map((ms) => Math.round(ms * 1.1)));
    expect(nextDelayMs(DEFAULT_SCHEDULE_MS, DEFAULT_SCHEDULE_MS.length)).toBeNull();
    // A Retry-After only ever lengthens the wait.
    expect(nextDelayMs(DEFAULT_SCHEDULE_MS, 1, { retryAfterMs: 60_000, random: () => 0.5 })).toBe(60_000);
    expect(nextDelayMs(DEFAULT_SCHEDULE_MS, 2, { retryAfterMs: 1_000, random: () => 0.5 })).toBe(300_000);
  });

  it('410 Gone fails the delivery and disables the endpoint at once, audited', async () => {
    const reason = 'the endpoint answered 410 Gone on 2026-01-01T00:00:00.000Z';
    expect(
      await settle({
        record: attempt(1, 410),
        next: { status: 'failed', nextAttemptAt: null },
        health: { kind: 'gone', reason },
      }),
    ).toEqual({ reason });
    expect(await getDelivery(t.ctx, deliveryId)).toMatchObject({ status: 'failed', attempts: 1 });
    expect(await getEndpoint(t.ctx, 'prt_b', b1)).toMatchObject({ status: 'disabled', disabled_reason: reason });
    expect((await listAudit(t.ctx))[0]).toMatchObject({ actor: 'system', action: 'webhook.disable', target_id: b1 });
  });

  it('an endpoint failing continuously for disableAfterHours is disabled by the failure that passes it', async () => {
    const start = t.clock.now;
    await t.ctx.store.run(sql`UPDATE webhook_endpoints SET failing_since = ${start} WHERE id = ${b1}`);
    const failing = (at: number) => ({ kind: 'failing', at, disableAfterMs: 120 * HOUR }) as const;
    t.clock.now = start + 120 * HOUR - 1;
    expect(
      await settle({
        record: attempt(1, 503, 'HTTP 503'),
        next: { status: 'pending', nextAttemptAt: t.clock.now + 5_000 },
        health: failing(t.clock.now),
      }),
    ).toBeNull();
    expect((await getEndpoint(t.ctx, 'prt_b', b1))!.status).toBe('enabled');
    t.clock.now = start + 120 * HOUR;
    const disabled = await settle({
      record: attempt(2, 503, 'HTTP 503'),
      next: { status: 'dead', nextAttemptAt: null },
      health: failing(t.clock.now),
    });
    const reason = `failing continuously since ${new Date(start).toISOString()} (120 h); last error: HTTP 503`;
    expect(disabled).toEqual({ reason });
    expect(await getEndpoint(t.ctx, 'prt_b', b1)).toMatchObject({ status: 'disabled', disabled_reason: reason });
    expect(await getDelivery(t.ctx, deliveryId)).toMatchObject({ status: 'dead', attempts: 2 });
  });
});

describe('test events and replay', () => {
  it('sends a test event to its endpoint only, already fanned out', async () => {
    const ep = (await getEndpoint(t.ctx, 'prt_a', a2))!;
    const { eventId, deliveryId } = await sendTestEvent(t.ctx, queue, ep);
    expect(await getEventFannedOut(eventId)).toBe(1);
    expect(await deliveries()).toEqual([{ id: deliveryId, event_id: eventId, endpoint_id: a2, status: 'pending' }]);
    expect(await jobs()).toEqual([{ d: deliveryId, b: 0 }]);
    expect(await fanout.runOnce()).toBe(0);
    // Replayed, it goes to that endpoint again, not to the partner's others.
    await settleDone(deliveryId, 1);
    expect((await replayEvent(t.ctx, queue, eventId)).queued).toEqual([
      { event_id: eventId, endpoint_id: a2, delivery_id: deliveryId, kind: 'restarted' },
    ]);
  });

  async function settleDone(id: string, attempts: number) {
    await t.ctx.store.run(
      sql`UPDATE webhook_deliveries SET status = 'succeeded', attempts = ${attempts}, next_attempt_at = NULL WHERE id = ${id}`,
    );
  }

  it('replays an event: finished deliveries restart, pending ones are left, new subscribers get one', async () => {
    const ev = await emit('prt_a', 'message.sent');
    await fanout.runOnce();
    const [toA1, toA2] = await deliveries();
    expect([toA1.endpoint_id, toA2.endpoint_id].sort()).toEqual([a1, a2].sort());
    await settleDone(toA1.id, 3);
    const a3 = (await createEndpoint(t.ctx, 'prt_a', { url: 'https://a.example/late' })).endpoint.id;
    const before = await jobs();
    const report = await replayEvent(t.ctx, queue, ev.id);
    expect(report.events).toBe(1);
    expect(report.pending).toEqual([{ event_id: ev.id, endpoint_id: toA2.endpoint_id, delivery_id: toA2.id }]);
    const made = (await deliveries()).find((d) => d.endpoint_id === a3)!;
    expect(report.queued).toEqual(
      expect.arrayContaining([
        { event_id: ev.id, endpoint_id: toA1.endpoint_id, delivery_id: toA1.id, kind: 'restarted' },
        { event_id: ev.id, endpoint_id: a3, delivery_id: made.id, kind: 'new' },
      ]),
    );
    expect(report.queued).toHaveLength(2);
    expect(await getDelivery(t.ctx, toA1.id)).toMatchObject({ status: 'pending', attempts: 3 });
    // The restarted run counts its schedule from the attempts already made.
    expect((await jobs()).slice(before.length)).toEqual(
      expect.arrayContaining([
        { d: toA1.id, b: 3 },
        { d: made.id, b: 0 },
      ]),
    );
    expect(await jobs()).toHaveLength(before.length + 2);
    // Only to one endpoint; an unknown event is refused.
    await settleDone(toA1.id, 4);
    const one = await replayEvent(t.ctx, queue, ev.id, { endpointId: a2 });
    expect(one).toMatchObject({ queued: [], pending: [{ endpoint_id: a2 }] });
    await expect(replayEvent(t.ctx, queue, 'evt_nope')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('replays events since a time, of one partner', async () => {
    // Event ids carry the real time they were made: the clock follows it here.
    t.clock.now = Date.now();
    const old = await emit('prt_a', 'message.sent', 1);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const since = Date.now();
    t.clock.now = since;
    const a = await emit('prt_a', 'message.failed', 2);
    const b = await emit('prt_b', 'message.sent', 3);
    await fanout.runOnce();
    for (const d of await deliveries()) await settleDone(d.id, 1);
    const all = await replaySince(t.ctx, queue, since);
    expect(all.events).toBe(2);
    expect(all.queued.map((q) => `${q.event_id} ${q.endpoint_id}`).sort()).toEqual(
      [`${a.id} ${a1}`, `${b.id} ${b1}`].sort(),
    );
    const onlyB = await replaySince(t.ctx, queue, since, { partnerId: 'prt_b' });
    expect(onlyB).toMatchObject({ events: 1, queued: [], pending: [{ event_id: b.id }] });
    expect(all.queued.some((q) => q.event_id === old.id)).toBe(false);
    expect(MAX_REPLAY_EVENTS).toBe(100_000);
  });

  it('two replays at once restart a finished delivery once: one job, the event sent once more', async () => {
    const ev = await emit('prt_b', 'message.sent');
    await fanout.runOnce();
    const [d] = await deliveries();
    await settleDone(d.id, 2);
    const before = (await jobs()).length;
    const outcomes = await raceOnRow(t, sql`SELECT id FROM webhook_deliveries WHERE id = ${d.id} FOR UPDATE`, [
      () => replayEvent(t.ctx, queue, ev.id),
      () => replayEvent(t.ctx, queue, ev.id),
    ]);
    const reports = outcomes.map((o) => {
      expect(o.status).toBe('fulfilled');
      return (o as PromiseFulfilledResult<Awaited<ReturnType<typeof replayEvent>>>).value;
    });
    expect(reports.map((r) => [r.queued.length, r.pending.length]).sort()).toEqual([
      [0, 1],
      [1, 0],
    ]);
    expect((await jobs()).slice(before)).toEqual([{ d: d.id, b: 2 }]);
  });
});
