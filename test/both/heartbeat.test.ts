import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  bucketOf,
  CounterWriter,
  INSTANCE_DEAD_AFTER_MS,
  KEEP_BUCKETS_MS,
  KEEP_INSTANCES_MS,
  readInstances,
  upkeepInstances,
  pruneCounterBuckets,
  readCounterWindows,
  readHeartbeat,
  readServerConfigFile,
  serverState,
  STALE_AFTER_MS,
  writeServerConfigFile,
} from '../../src/core/counter-store.js';
import { COUNTER_NAMES, Counters } from '../../src/core/counters.js';
import { sql } from '../../src/db/sql.js';
import { DISPATCH_JOB } from '../../src/jobs/dispatch.js';
import { startHeartbeat } from '../../src/jobs/heartbeat.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// msgd's beat on both stores: the heartbeat row msgctl and the console read to tell whether msgd
// runs, the queue's depths, and the counters' windows over the last minute and hour.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
});
afterEach(() => t.close());

const NOW = Date.UTC(2026, 10, 20, 12, 0, 5);
const silentLogger = { warn: () => {} } as never;
/** Within a second: PostgreSQL's times are the server's clock, read back shifted to the reader's. */
const near = (a: number, b: number) => Math.abs(a - b) < 1_000;

describe('heartbeat', () => {
  it('is written on start and each beat, read back with the queue depths, and marked stopped at the end', async () => {
    t.clock.now = NOW;
    expect(await readHeartbeat(t.ctx)).toBeNull();
    expect(serverState(null, NOW).state).toBe('stopped');
    await t.exec(
      `INSERT INTO jobs (kind, payload, state, priority, run_at, attempts, max_attempts, created_at, updated_at)
       VALUES ('${DISPATCH_JOB}', '{}', 'available', 0, 0, 0, 5, 0, 0), ('${DISPATCH_JOB}', '{}', 'available', 0, 0, 0, 5, 0, 0),
              ('${DISPATCH_JOB}', '{}', 'retry', 0, 0, 1, 5, 0, 0), ('other', '{}', 'dead', 0, 0, 5, 5, 0, 0)`,
    );
    const hb = await startHeartbeat({ ctx: t.ctx, counters: new Counters(), version: '9.9.9', logger: silentLogger });
    try {
      // Written once before it resolves: msgd says it started only after its first beat.
      const row = (await readHeartbeat(t.ctx))!;
      expect(row).toMatchObject({
        id: hb.id,
        version: '9.9.9',
        pid: process.pid,
        running: true,
        leader: true,
        gauges: { waiting: 2, inFlight: 0, retrying: 1, dead: 1, cap: 100_000 },
      });
      // Times read back on the reader's clock (PostgreSQL writes the server's: shifted by the gap).
      expect(near(row.startedAt, NOW)).toBe(true);
      expect(near(row.beatAt, NOW)).toBe(true);
      expect(serverState(row, row.beatAt + STALE_AFTER_MS).state).toBe('running');
      expect(serverState(row, row.beatAt + STALE_AFTER_MS + 1).state).toBe('silent');
      t.clock.now = NOW + 2_000;
      await hb.beat();
      expect(near((await readHeartbeat(t.ctx))!.beatAt, NOW + 2_000)).toBe(true);
    } finally {
      await hb.stop();
    }
    const last = (await readHeartbeat(t.ctx))!;
    expect(last.running).toBe(false);
    expect(last.leader).toBe(false);
    // The queue as msgd last saw it stays for the console.
    expect(last.gauges.waiting).toBe(2);
    expect(serverState(last, NOW + 2_000).state).toBe('stopped');
  });

  it('keeps one row per instance: the leader reads the queue, each its counters, and the windows sum them', async () => {
    t.clock.now = NOW;
    await t.exec(
      `INSERT INTO jobs (kind, payload, state, priority, run_at, attempts, max_attempts, created_at, updated_at)
       VALUES ('${DISPATCH_JOB}', '{}', 'available', 0, 0, 0, 5, 0, 0)`,
    );
    let aLeads = true;
    const ka = new Counters();
    const kb = new Counters();
    const a = await startHeartbeat({
      ctx: t.ctx,
      counters: ka,
      version: '1.0.0',
      logger: silentLogger,
      leader: { isLeader: () => aLeads },
    });
    const b = await startHeartbeat({
      ctx: t.ctx,
      counters: kb,
      version: '1.0.1',
      logger: silentLogger,
      leader: { isLeader: () => !aLeads },
    });
    try {
      for (let i = 0; i < 3; i++) ka.dispatch('gw_a', 'sent');
      kb.dispatch('gw_a', 'sent');
      kb.dispatch('gw_a', 'failed', 'E1');
      kb.webhookIn('sandbox', 'verified');
      await a.beat();
      await b.beat();
      let all = await readInstances(t.ctx);
      expect(all.alive).toBe(2);
      expect(all.dead).toBe(0);
      const byId = (id: string) => all.instances.find((i) => i.id === id)!;
      expect(byId(a.id)).toMatchObject({ state: 'running', leader: true, version: '1.0.0', gauges: { waiting: 1 } });
      expect(byId(a.id).counters).toMatchObject({ sent: 3, failed: 0 });
      // A follower does not read the queue: the cluster's depths are counted once per beat.
      expect(byId(b.id)).toMatchObject({ state: 'running', leader: false, version: '1.0.1', gauges: {} });
      expect(byId(b.id).counters).toMatchObject({ sent: 1, failed: 1, webhooks_in: 1 });
      expect(all.current).toMatchObject({ id: a.id, gauges: { waiting: 1 } });
      // The console's windows are the sum of the instances' counts.
      const windows = await readCounterWindows(t.ctx, NOW);
      const sent = windows.find((w) => w.name === COUNTER_NAMES.dispatch && w.labels.outcome === 'sent');
      expect(sent?.lastMinute).toBe(4);

      // The leadership moves: the next beats say so.
      aLeads = false;
      await a.beat();
      await b.beat();
      all = await readInstances(t.ctx);
      expect(byId(a.id).leader).toBe(false);
      expect(byId(b.id)).toMatchObject({ leader: true, gauges: { waiting: 1 } });

      // An instance stopping cleanly marks its row stopped; the other runs on.
      await a.stop();
      all = await readInstances(t.ctx);
      expect(byId(a.id).state).toBe('stopped');
      expect(all).toMatchObject({ alive: 1, dead: 0, current: { id: b.id } });
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it('calls an instance dead once it misses its beats, has the leader mark it, and prunes old rows', async () => {
    const lead = await startHeartbeat({ ctx: t.ctx, counters: new Counters(), version: '1', logger: silentLogger });
    const gone = await startHeartbeat({
      ctx: t.ctx,
      counters: new Counters(),
      version: '1',
      logger: silentLogger,
      leader: { isLeader: () => false },
    });
    try {
      // Its beats stop (a kill -9): its last one ages past the bound.
      await gone.stop();
      await t.ctx.store.run(
        sql`UPDATE heartbeat SET running = 1, beat_at = beat_at - ${INSTANCE_DEAD_AFTER_MS + 1_000} WHERE id = ${gone.id}`,
      );
      let all = await readInstances(t.ctx);
      const row = () => all.instances.find((i) => i.id === gone.id)!;
      // Dead to readers at once, before anyone marks it.
      expect(row()).toMatchObject({ state: 'dead', deadAt: null, leader: false });
      expect(all).toMatchObject({ alive: 1, dead: 1 });
      await lead.beat();
      all = await readInstances(t.ctx);
      expect(row().state).toBe('dead');
      expect(row().running).toBe(false);
      expect(row().deadAt).not.toBeNull();
      // Stopped and dead rows go a day after their last beat; the running one stays.
      await t.ctx.store.run(sql`UPDATE heartbeat SET beat_at = beat_at - ${KEEP_INSTANCES_MS} WHERE id = ${gone.id}`);
      await upkeepInstances(t.ctx, t.ctx.store, t.ctx.now(), true);
      all = await readInstances(t.ctx);
      expect(all.instances.map((i) => i.id)).toEqual([lead.id]);
    } finally {
      await lead.stop();
    }
  });

  it("alone on the store (SQLite's data directory lock), an instance removes the rows of the gone ones at start", async () => {
    const before = await startHeartbeat({ ctx: t.ctx, counters: new Counters(), version: '1', logger: silentLogger });
    // Killed: its row says running.
    const now = await startHeartbeat({
      ctx: t.ctx,
      counters: new Counters(),
      version: '2',
      logger: silentLogger,
      alone: true,
    });
    try {
      const all = await readInstances(t.ctx);
      expect(all.instances.map((i) => i.id)).toEqual([now.id]);
      expect(before.id).not.toBe(now.id);
    } finally {
      await now.stop();
    }
  });

  it('keeps the config file msgd read, for msgctl doctor', async () => {
    expect(await readServerConfigFile(t.ctx)).toBeUndefined();
    await writeServerConfigFile(t.ctx, '/etc/msgd/msgd.json');
    expect(await readServerConfigFile(t.ctx)).toEqual({ path: '/etc/msgd/msgd.json' });
    await writeServerConfigFile(t.ctx, null);
    expect(await readServerConfigFile(t.ctx)).toEqual({ path: null });
  });
});

describe('counter windows', () => {
  it('adds what moved since the last write, and sums the last minute and hour', async () => {
    const k = new Counters();
    const w = new CounterWriter();
    const sent = () =>
      readCounterWindows(t.ctx, NOW).then((ws) =>
        ws.find((x) => x.name === COUNTER_NAMES.dispatch && x.labels.gateway === 'gw_a' && x.labels.outcome === 'sent'),
      );
    for (let i = 0; i < 5; i++) k.dispatch('gw_a', 'sent');
    expect(await w.write(t.ctx.store, k.snapshot(), NOW - 30 * 60_000)).toBe(1);
    for (let i = 0; i < 3; i++) k.dispatch('gw_a', 'sent');
    k.webhookIn('sandbox', 'verified');
    expect(await w.write(t.ctx.store, k.snapshot(), NOW - 5_000)).toBe(2);
    // Nothing moved: nothing written, and nothing counted twice.
    expect(await w.write(t.ctx.store, k.snapshot(), NOW)).toBe(0);
    expect(await sent()).toEqual({
      name: COUNTER_NAMES.dispatch,
      labels: { gateway: 'gw_a', outcome: 'sent' },
      lastMinute: 3,
      lastHour: 8,
    });
    // A second msgd lifetime in the same bucket adds to it.
    const again = new Counters();
    again.dispatch('gw_a', 'sent');
    await new CounterWriter().write(t.ctx.store, again.snapshot(), NOW);
    expect((await sent())?.lastMinute).toBe(4);
    // Buckets older than a day are pruned.
    expect(await pruneCounterBuckets(t.ctx.store, NOW + KEEP_BUCKETS_MS - 10 * 60_000)).toBe(1);
    const left = await t.ctx.store.all<{ bucket: number }>(
      sql`SELECT DISTINCT bucket FROM counter_buckets ORDER BY bucket`,
    );
    expect(left.map((r) => r.bucket)).toEqual([bucketOf(NOW)]);
  });
});
