import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  bucketOf,
  CounterWriter,
  KEEP_BUCKETS_MS,
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
        version: '9.9.9',
        pid: process.pid,
        startedAt: NOW,
        beatAt: NOW,
        running: true,
        gauges: { waiting: 2, inFlight: 0, retrying: 1, dead: 1, cap: 100_000 },
      });
      expect(serverState(row, NOW + STALE_AFTER_MS).state).toBe('running');
      expect(serverState(row, NOW + STALE_AFTER_MS + 1).state).toBe('silent');
      t.clock.now = NOW + 2_000;
      await hb.beat();
      expect((await readHeartbeat(t.ctx))!.beatAt).toBe(NOW + 2_000);
    } finally {
      await hb.stop();
    }
    const last = (await readHeartbeat(t.ctx))!;
    expect(last.running).toBe(false);
    expect(serverState(last, NOW + 2_000).state).toBe('stopped');
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
