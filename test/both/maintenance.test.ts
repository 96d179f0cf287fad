import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  builtinTasks,
  MAINTENANCE_ATTEMPTS,
  type Maintenance,
  type MaintenanceDeps,
  maintenanceKind,
  startMaintenance,
} from '../../src/jobs/maintenance.js';
import { sql } from '../../src/db/sql.js';
import type { MaintenanceTask } from '../../src/queue/maintenance-task.js';
import { JobQueue } from '../../src/queue/queue.js';
import { Worker } from '../../src/queue/worker.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The upkeep tasks msgd's cron runs, on both stores: idempotency keys past their TTL and
// provider event keys past a provider's retry window go; younger ones stay. And the engine
// that runs them: every msgd on one store schedules every task, each slot's job is enqueued
// once whichever msgd claims it, and a task that fails is retried as the queue retries jobs.

const HOUR = 3_600_000;
const NOW = Date.UTC(2026, 0, 10);

let t: StoreCtx;
let rt: MaintenanceDeps;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  t.clock.now = NOW;
  rt = { ctx: t.ctx, config: t.ctx.config, logger: pino({ level: 'silent' }) };
  await insertPartner(t, { id: 'p1', slug: 'one' });
});
afterEach(() => t.close());

const task = (name: string) => {
  const found = builtinTasks(t.dialect).find((x) => x.name === name);
  if (!found) throw new Error(`no task ${name}`);
  return found;
};

describe('maintenance tasks', () => {
  it('expires idempotency keys older than idempotency.ttlHours', async () => {
    const ttl = t.ctx.config.idempotency.ttlHours;
    const key = (k: string, at: number) => `('p1', '${k}', 'h', 'accepted', '{}', ${at})`;
    await t.exec(`INSERT INTO idempotency_keys (partner_id, key, request_hash, outcome, response_body, created_at) VALUES
      ${key('old', NOW - ttl * HOUR - 1)}, ${key('edge', NOW - ttl * HOUR)}, ${key('new', NOW - HOUR)}`);
    expect(await task('idempotency-expire').run(rt)).toEqual({ deleted: 1 });
    const left = await t.ctx.store.all<{ key: string }>(sql`SELECT key FROM idempotency_keys ORDER BY key`);
    expect(left.map((r) => r.key)).toEqual(['edge', 'new']);
    expect(await task('idempotency-expire').run(rt)).toEqual({ deleted: 0 });
  });

  it('expires provider event keys older than eight days', async () => {
    await t.exec(`INSERT INTO provider_event_keys (key, created_at) VALUES
      ('old', ${NOW - 8 * 24 * HOUR - 1}), ('week', ${NOW - 7 * 24 * HOUR}), ('new', ${NOW})`);
    expect(await task('provider-event-keys-expire').run(rt)).toEqual({ deleted: 1 });
    const left = await t.ctx.store.all<{ key: string }>(sql`SELECT key FROM provider_event_keys ORDER BY key`);
    expect(left.map((r) => r.key)).toEqual(['new', 'week']);
  });

  it('optimizes SQLite nightly; PostgreSQL has no such task', () => {
    expect(builtinTasks(t.dialect).some((x) => x.name === 'sqlite-optimize')).toBe(t.dialect === 'sqlite');
  });
});

describe('cron and the maintenance jobs', () => {
  const running: { maintenance: Maintenance; worker: Worker }[] = [];
  afterEach(async () => {
    for (const r of running.splice(0)) {
      r.maintenance.stop();
      await r.worker.stop({ timeoutMs: 1_000 });
    }
  });

  /** What one msgd builds over the store: its own queue, worker and cron, scheduling `tasks`. */
  function msgd(tasks: MaintenanceTask<MaintenanceDeps>[], logger = rt.logger) {
    const queue = new JobQueue(t.dialect === 'sqlite' ? t.ctx.db : t.ctx.store, { leaseMs: 30_000 });
    const worker = new Worker({
      queue,
      concurrency: 4,
      leaseMs: 30_000,
      backoff: { baseMs: 10, capMs: 10, jitter: 'none' },
    });
    const maintenance = startMaintenance({ ...rt, logger, queue, worker, maintenanceTasks: tasks });
    running.push({ maintenance, worker });
    return { queue, worker, cron: maintenance.cron };
  }

  // Once a year: these tests fire the slots themselves.
  const YEARLY = '0 0 1 1 *';
  const thisMinute = () => new Date(Math.floor(Date.now() / 60_000) * 60_000);
  const runs = async () =>
    (await t.ctx.store.all<{ task: string }>(sql`SELECT task FROM runs ORDER BY task`)).map((r) => r.task);
  const tally: MaintenanceTask<MaintenanceDeps> = {
    name: 'tally',
    cron: YEARLY,
    run: async (d) => {
      await d.ctx.store.run(sql`INSERT INTO runs (task) VALUES ('tally')`);
      return { counted: 1 };
    },
  };

  it('registers every task as a maintenance job kind, the SQLite-only ones on SQLite alone', () => {
    const kinds = msgd([tally]).worker.registeredKinds();
    expect(kinds).toEqual(
      expect.arrayContaining(
        ['idempotency-expire', 'provider-event-keys-expire', 'retention', 'tally'].map(maintenanceKind),
      ),
    );
    expect(kinds.includes(maintenanceKind('sqlite-optimize'))).toBe(t.dialect === 'sqlite');
  });

  it('a slot fired by two msgd at once is enqueued once and runs once', async () => {
    await t.exec('CREATE TABLE runs (task TEXT NOT NULL)');
    const a = msgd([tally]);
    const b = msgd([tally]);
    const slot = thisMinute();
    const fired = await Promise.all([a.cron, b.cron, a.cron, b.cron].map((c) => c.fire('tally', slot)));
    expect(fired.filter((f) => f.created)).toHaveLength(1);
    const job = fired.find((f) => f.created)!;
    for (const f of fired) expect(f).toEqual({ key: `tally:${slot.toISOString()}`, id: job.id, created: f.created });
    // Both workers run: whichever claims the job runs it, the other finds nothing.
    await Promise.all([a.worker.drain({ untilEmpty: true }), b.worker.drain({ untilEmpty: true })]);
    expect(await runs()).toEqual(['tally']);
    expect(a.worker.counters.completed + b.worker.counters.completed).toBe(1);
    // Its job is done and gone; the slot stays claimed (a restart in the same minute, a late timer).
    expect(await a.queue.get(job.id!)).toBeNull();
    expect((await b.cron.fire('tally', slot)).created).toBe(false);
    await b.worker.drain({ untilEmpty: true });
    expect(await runs()).toEqual(['tally']);
    // The next slot runs again.
    expect((await b.cron.fire('tally', new Date(slot.getTime() + 60_000))).created).toBe(true);
    await b.worker.drain({ untilEmpty: true });
    expect(await runs()).toEqual(['tally', 'tally']);
  });

  it('a task that fails is retried by the queue, and dead once out of attempts', async () => {
    const lines: { msg: string; task?: string; attempt?: number }[] = [];
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk, _enc, cb) {
          lines.push(JSON.parse(chunk.toString()));
          cb();
        },
      }),
    );
    let flakyRuns = 0;
    const a = msgd(
      [
        {
          name: 'flaky',
          cron: YEARLY,
          run: () => {
            if (++flakyRuns === 1) throw new Error('the database was busy');
            return { ok: true };
          },
        },
        {
          name: 'broken',
          cron: YEARLY,
          run: async () => {
            throw new Error('always broken');
          },
        },
      ],
      logger,
    );
    const slot = thisMinute();
    const flaky = await a.cron.fire('flaky', slot);
    const broken = await a.cron.fire('broken', slot);
    await a.worker.drain({ untilEmpty: true, maxWaitMs: 10_000 });
    expect(flakyRuns).toBe(2);
    expect(await a.queue.get(flaky.id!)).toBeNull();
    expect(await a.queue.get(broken.id!)).toMatchObject({
      kind: maintenanceKind('broken'),
      state: 'dead',
      attempts: MAINTENANCE_ATTEMPTS,
      lastError: expect.stringContaining('always broken'),
    });
    const failed = lines.filter((l) => l.msg === 'maintenance task failed');
    expect(failed.map((l) => `${l.task} ${l.attempt}`).sort()).toEqual(['broken 1', 'broken 2', 'broken 3', 'flaky 1']);
    expect(lines.filter((l) => l.msg === 'maintenance task done').map((l) => l.task)).toEqual(['flaky']);
  });
});
