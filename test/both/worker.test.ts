import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Tx } from '../../src/db/query.js';
import { sql } from '../../src/db/sql.js';
import { JobQueue } from '../../src/queue/queue.js';
import { Worker } from '../../src/queue/worker.js';
import type { Store } from '../../src/db/query.js';
import { openStoreCtx, type StoreCtx, testStore } from './helpers.js';

// The worker's batch on both stores: what a job's result writes (apply, onDead, onClaim, a
// running job's own durable write) commits with its settle, and a throw rolls back that job's
// writes alone. User code writes through the batch's Tx.

let t: StoreCtx;
let queue: JobQueue;
let worker: Worker;
beforeEach(async () => {
  t = await openStoreCtx();
  await t.exec('CREATE TABLE effects (job_id BIGINT NOT NULL, note TEXT NOT NULL)');
  queue = new JobQueue(t.dialect === 'sqlite' ? t.ctx.db : t.ctx.store, { maxAttempts: 2 });
  worker = new Worker({
    queue,
    concurrency: 8,
    leaseMs: 30_000,
    backoff: { baseMs: 10, capMs: 10, jitter: 'none' },
  });
});
afterEach(async () => {
  await worker.stop({ timeoutMs: 1_000 });
  await t.close();
});

const note = async (tx: Tx, jobId: number, text: string) => {
  await tx.run(sql`INSERT INTO effects (job_id, note) VALUES (${jobId}, ${text})`);
};
const effects = async () =>
  (
    await t.ctx.store.all<{ job_id: number; note: string }>(sql`SELECT job_id, note FROM effects ORDER BY job_id, note`)
  ).map((e) => `${e.job_id}: ${e.note}`);
const enqueue = (payload: unknown) => t.ctx.store.transaction((tx) => queue.enqueue(tx, { kind: 'k', payload }));

describe('Worker on the store', () => {
  it('commits each result with its apply; a throwing apply is undone alone and its job retried', async () => {
    const ids: number[] = [];
    for (let n = 0; n < 4; n++) ids.push((await enqueue({ n })).id);
    const bad = ids[1];
    worker.register('k', async (job) => ({
      type: 'ok',
      apply: async (tx) => {
        await note(tx, job.id, `attempt ${job.attempts}`);
        if (job.id === bad && job.attempts === 1) throw new Error('bad apply');
      },
    }));
    await worker.drain({ untilEmpty: true, maxWaitMs: 10_000 });
    expect(await effects()).toEqual(ids.map((id) => `${id}: attempt ${id === bad ? 2 : 1}`));
    expect(worker.counters).toMatchObject({ completed: 4, retried: 1, dead: 0 });
    for (const id of ids) expect(await queue.get(id)).toBeNull();
  });

  it('dead-letters a job out of attempts with its onDead; a throwing onDead is undone and the job still dies', async () => {
    const a = (await enqueue({ a: 1 })).id;
    worker.register('k', async () => ({ type: 'retry', error: 'provider down' }), {
      onDead: async (job, error, tx) => {
        await note(tx, job.id, `dead: ${error}`);
        if ((job.payload as { b?: number }).b) throw new Error('refund broke');
      },
    });
    const b = (await enqueue({ b: 1 })).id;
    await worker.drain({ untilEmpty: true, maxWaitMs: 10_000 });
    expect(await effects()).toEqual([`${a}: dead: provider down`]);
    expect(await queue.get(a)).toMatchObject({ state: 'dead', lastError: 'provider down' });
    const deadB = await queue.get(b);
    expect(deadB?.state).toBe('dead');
    expect(deadB?.lastError).toMatch(/refund broke/);
  });

  it("settles what onClaim decides in the claim's own transaction, and commits a durable write before the job goes on", async () => {
    const held = (await enqueue({ hold: true })).id;
    const go = (await enqueue({ hold: false })).id;
    const seen: number[] = [];
    worker.register(
      'k',
      async (job) => {
        await worker.durably((tx) => note(tx, job.id, 'marked'));
        const row = await t.ctx.store.get<{ n: number }>(
          sql`SELECT CAST(count(*) AS BIGINT) AS n FROM effects WHERE job_id = ${job.id} AND note = 'marked'`,
        );
        seen.push(row!.n);
        return { type: 'ok' };
      },
      {
        onClaim: async (jobs, tx) => {
          const settled = new Map();
          for (const j of jobs) {
            await note(tx, j.id, 'claimed');
            if ((j.payload as { hold: boolean }).hold)
              settled.set(j, { type: 'snooze', afterMs: 60_000, apply: (x: Tx) => note(x, j.id, 'held') });
          }
          return settled;
        },
      },
    );
    await worker.drain({ maxWaitMs: 10_000 });
    expect(seen).toEqual([1]);
    expect(await effects()).toEqual([`${held}: claimed`, `${held}: held`, `${go}: claimed`, `${go}: marked`]);
    expect(await queue.get(held)).toMatchObject({ state: 'available', attempts: 0 });
    expect(await queue.get(go)).toBeNull();
  });

  // PostgreSQL rolls a transaction back on a deadlock or a serialization failure and its store
  // runs the function again (src/db/pg/store.ts): a turn run twice must settle what its first
  // run had taken. SQLite's store never runs a transaction twice.
  it.skipIf(testStore === 'sqlite')(
    'a turn its store runs again after a rollback still settles the results and durable writes it took',
    async () => {
      const real = t.ctx.store;
      const again = new Error('serialization failure, as PostgreSQL would roll back');
      let replays = 0;
      let armed = false;
      // The store as PostgreSQL's behaves on a 40001: the whole transaction undone, fn run again.
      const replaying: Store = {
        ...real,
        dialect: real.dialect,
        get: real.get.bind(real),
        all: real.all.bind(real),
        run: real.run.bind(real),
        batcher: real.batcher.bind(real),
        async transaction(fn) {
          if (armed) {
            armed = false;
            replays++;
            await real
              .transaction(async (tx) => {
                await fn(tx);
                throw again;
              })
              .catch((e: unknown) => {
                if (e !== again) throw e;
              });
          }
          return real.transaction(fn);
        },
      };
      await worker.stop();
      queue = new JobQueue(replaying, { maxAttempts: 2 });
      worker = new Worker({
        queue,
        concurrency: 8,
        leaseMs: 30_000,
        backoff: { baseMs: 10, capMs: 10, jitter: 'none' },
      });
      const id = (await enqueue({ n: 1 })).id;
      worker.register('k', async (job) => {
        armed = true;
        await worker.durably((tx) => note(tx, job.id, 'durable'));
        armed = true;
        return { type: 'ok', apply: (tx) => note(tx, job.id, 'applied') };
      });
      await worker.drain({ untilEmpty: true, maxWaitMs: 10_000 });
      expect(replays).toBe(2);
      expect(await effects()).toEqual([`${id}: applied`, `${id}: durable`]);
      expect(await queue.get(id)).toBeNull();
      expect(worker.counters).toMatchObject({ completed: 1, retried: 0 });
    },
  );
});
