import { describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { Cron } from '../../src/queue/cron.js';
import { JobQueue } from '../../src/queue/queue.js';
import { countOf, onCleanup, type QueueDb, type TempDb, tempDb } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

// Cron on the run's store (test/queue/helpers.ts): each slot's job enqueued once, however many
// processes fire it.

function makeCron(db: QueueDb, now?: () => number) {
  const queue = new JobQueue(db);
  const cron = new Cron({ queue, timezone: 'UTC', now });
  onCleanup(() => cron.stop());
  return { queue, cron };
}

const jobs = (t: TempDb) =>
  t.store.all<{ kind: string; payload: string; unique_key: string }>(
    sql`SELECT kind, payload, unique_key FROM jobs ORDER BY id`,
  );

describe('Cron', () => {
  it('rejects a bad expression with a clear error, and bad or duplicate names', async () => {
    const t = await tempDb();
    const { cron } = makeCron(t.db);
    expect(() => cron.schedule('sweep', '61 * * * *', { kind: 'sweep' })).toThrow(
      /invalid cron expression "61 \* \* \* \*" for task "sweep": .*minute/,
    );
    expect(() => cron.schedule('sweep', 'every day', { kind: 'sweep' })).toThrow(/invalid cron expression/);
    expect(() => cron.schedule('has:colon', '* * * * *', { kind: 'x' })).toThrow(/name/);
    cron.schedule('sweep', '*/5 * * * *', { kind: 'sweep' });
    expect(() => cron.schedule('sweep', '* * * * *', { kind: 'sweep' })).toThrow(/already scheduled/);
  });

  it('enqueues one job per slot even when two processes fire the same slot', async () => {
    const t = await tempDb();
    // The slots' own hour, not today's: slot records older than two days are pruned.
    const clock = () => Date.parse('2026-11-22T11:00:01.000Z');
    const a = makeCron(t.db, clock);
    const b = makeCron(t.open(), clock);
    for (const c of [a.cron, b.cron]) {
      c.schedule('purge', '0 * * * *', (slot) => ({ kind: 'purge', payload: { slot: slot.toISOString() } }));
    }
    const slot = new Date('2026-11-22T10:00:00.000Z');
    const first = await a.cron.fire('purge', slot);
    const second = await b.cron.fire('purge', new Date(slot.getTime() + 250)); // same slot, a late timer
    const again = await a.cron.fire('purge', slot);
    expect(first).toMatchObject({ created: true, key: 'purge:2026-11-22T10:00:00.000Z' });
    expect(second).toEqual({ created: false, key: first.key, id: first.id });
    expect(again.created).toBe(false);
    expect(await jobs(t)).toEqual([
      {
        kind: 'purge',
        payload: '{"slot":"2026-11-22T10:00:00.000Z"}',
        unique_key: 'cron:purge:2026-11-22T10:00:00.000Z',
      },
    ]);
    // the slot stays taken after its job is done and deleted: a restart cannot run it again
    await t.store.run(sql`DELETE FROM jobs`);
    expect((await b.cron.fire('purge', slot)).created).toBe(false);
    expect((await a.cron.fire('purge', new Date('2026-11-22T11:00:00.000Z'))).created).toBe(true);
  });

  it("prunes its own old slot records, not other tasks' ones", async () => {
    const t = await tempDb();
    const now = Date.parse('2026-11-22T10:00:00.000Z');
    const queue = new JobQueue(t.db);
    const cron = new Cron({ queue, now: () => now, keepRunsMs: 3_600_000 });
    cron.schedule('a', '* * * * *', { kind: 'a' }).schedule('a-b', '* * * * *', { kind: 'ab' });
    await cron.fire('a', new Date('2026-11-22T07:00:00.000Z'));
    await cron.fire('a-b', new Date('2026-11-22T07:00:00.000Z'));
    await cron.fire('a', new Date('2026-11-22T10:00:00.000Z'));
    const keys = (await t.store.all<{ key: string }>(sql`SELECT key FROM cron_runs ORDER BY key`)).map((r) => r.key);
    expect(keys).toEqual(['a-b:2026-11-22T07:00:00.000Z', 'a:2026-11-22T10:00:00.000Z']);
  });

  it('with real timers, two Cron instances on two connections enqueue each slot exactly once', async () => {
    const t = await tempDb();
    const a = makeCron(t.db);
    const b = makeCron(t.open());
    a.cron.schedule('tick', '* * * * * *', { kind: 'tick' });
    b.cron.schedule('tick', '* * * * * *', { kind: 'tick' });
    a.cron.start();
    b.cron.start();
    await waitFor(async () => (await jobs(t)).length >= 2, 'two slots to fire', 5000);
    a.cron.stop();
    b.cron.stop();
    const rows = await jobs(t);
    const keys = rows.map((r) => r.unique_key);
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(rows.length).toBeLessThanOrEqual(3);
    expect(new Set(keys).size).toBe(keys.length);
    for (const k of keys) expect(k).toMatch(/^cron:tick:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/);
    expect(await countOf(t, 'cron_runs')).toBe(rows.length);
    // Stopped: a witness task started now fires at the next slot, and the stopped ones did not.
    const witness = makeCron(t.open());
    witness.cron.schedule('witness', '* * * * * *', { kind: 'witness' }).start();
    await waitFor(async () => (await jobs(t)).some((j) => j.kind === 'witness'), 'the next slot', 3000);
    expect((await jobs(t)).filter((j) => j.kind === 'tick')).toHaveLength(rows.length);
  });
});
