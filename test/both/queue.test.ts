import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Store } from '../../src/db/query.js';
import { pgQueueStatements } from '../../src/db/queue-statements.js';
import { type Sql, sql } from '../../src/db/sql.js';
import { Cron } from '../../src/queue/cron.js';
import { type EnqueueSpec, JobQueue } from '../../src/queue/queue.js';
import { openStoreCtx, type StoreCtx, testStore } from './helpers.js';

// The durable queue on both stores: enqueue in the caller's transaction, the claim (on
// PostgreSQL FOR UPDATE SKIP LOCKED over the partial jobs_claim index, leases on the
// database's clock), settles, the lifeline, cron's slot claim and the operator's views, as a
// user of the queue sees them.

let t: StoreCtx;
let store: Store;
let queue: JobQueue;

/** A queue over the context's store (on SQLite, its data directory's database). */
const queueOf = (c: StoreCtx) =>
  new JobQueue(c.dialect === 'sqlite' ? c.ctx.db : c.ctx.store, { maxAttempts: 3, leaseMs: 60_000 });

beforeEach(async () => {
  t = await openStoreCtx();
  store = t.ctx.store;
  queue = queueOf(t);
});
afterEach(() => t.close());

const enqueue = (spec: EnqueueSpec) => store.transaction((tx) => queue.enqueue(tx, spec));
const row = (id: number) =>
  store.get<{ state: string; attempts: number; run_at: number; locked_by: string | null; last_error: string | null }>(
    sql`SELECT state, attempts, run_at, locked_by, last_error FROM jobs WHERE id = ${id}`,
  );

describe('JobQueue', () => {
  it('enqueues in the caller transaction: rolled back with it, and idempotent by unique key', async () => {
    await expect(
      store.transaction(async (tx) => {
        await queue.enqueue(tx, { kind: 'k', uniqueKey: 'u1' });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await queue.hasPending()).toBe(false);
    const a = await enqueue({ kind: 'k', payload: { n: 1 }, uniqueKey: 'u1' });
    const b = await enqueue({ kind: 'k', payload: { n: 2 }, uniqueKey: 'u1' });
    expect(a.created).toBe(true);
    expect(b).toEqual({ id: a.id, created: false });
    expect((await queue.get(a.id))?.payload).toEqual({ n: 1 });
  });

  it('claims in priority, run_at, id order, skips future jobs and other kinds', async () => {
    const now = Date.now();
    const later = (await enqueue({ kind: 'a', runAt: now - 10 })).id;
    const urgent = (await enqueue({ kind: 'b', runAt: now - 5, priority: -1 })).id;
    const early = (await enqueue({ kind: 'b', runAt: now - 20 })).id;
    await enqueue({ kind: 'a', runAt: now + 600_000 }); // not due
    const other = (await enqueue({ kind: 'c', runAt: now - 100 })).id;
    const got = await queue.claim('w', 3, undefined, { kinds: ['a', 'b'] });
    expect(got.map((j) => j.id)).toEqual([urgent, early, later]);
    expect(got[0]).toMatchObject({ state: 'running', attempts: 1, lockedBy: 'w' });
    expect(await queue.claim('w', 10, undefined, { kinds: ['a'] })).toEqual([]);
    expect((await queue.claim('w', 10, undefined, { kinds: ['c'] })).map((j) => j.id)).toEqual([other]);
    expect(await queue.nextRunAt(['a'])).toBe(now + 600_000);
    expect(await queue.hasRunnable(Date.now(), ['a'])).toBe(false);
  });

  it.runIf(testStore === 'postgres')(
    'leases run on the database clock, whatever the process passes as now',
    async () => {
      const { id } = await enqueue({ kind: 'k', runAt: Date.now() - 1 });
      const db0 = (await store.get<{ ms: number }>(
        sql`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms`,
      ))!.ms;
      // A process clock an hour behind: its claim still sees the job due, and leases from the database's time.
      const [job] = await queue.claim('w', 1, Date.now() - 3_600_000, { leaseMs: 30_000 });
      expect(job.id).toBe(id);
      expect(job.lockedUntil! - db0).toBeGreaterThanOrEqual(30_000 - 5);
      expect(job.lockedUntil! - db0).toBeLessThan(30_000 + 5_000);
    },
  );

  it('completes, retries with its backoff, dead-letters at max_attempts', async () => {
    const { id } = await enqueue({ kind: 'k', runAt: Date.now() - 1 });
    const [job] = await queue.claim('w', 1);
    const lease = { workerId: 'w', attempts: job.attempts };
    const now = Date.now();
    expect(await queue.retry(id, { afterMs: 5_000, error: 'timeout' }, { lease, now })).toBe('retry');
    expect(await row(id)).toMatchObject({ state: 'retry', last_error: 'timeout', locked_by: null });
    expect((await row(id))!.run_at).toBe(now + 5_000);
    expect(await queue.claim('w', 1)).toEqual([]); // not due for 5 s
    await store.run(sql`UPDATE jobs SET run_at = 0 WHERE id = ${id}`);
    const [second] = await queue.claim('w', 1);
    expect(second.attempts).toBe(2);
    expect(await queue.complete(id, { lease })).toBe(false); // the first claim's lease no longer stands
    expect(await queue.complete(id, { lease: { workerId: 'w', attempts: 2 } })).toBe(true);
    expect(await queue.get(id)).toBeNull();

    const { id: doomed } = await enqueue({ kind: 'k', maxAttempts: 1, runAt: Date.now() - 1 });
    await queue.claim('w', 1);
    expect(await queue.retry(doomed, { afterMs: 0, error: 'no' })).toBe('dead');
    expect((await queue.listDead()).map((j) => [j.id, j.lastError])).toEqual([[doomed, 'no']]);
    expect(await queue.stats()).toEqual([{ kind: 'k', state: 'dead', count: 1 }]);
    expect(await queue.retryDead(doomed)).toBe(1);
    expect((await queue.listPending()).map((j) => j.id)).toEqual([doomed]);
  });

  it('an expired lease is taken back by the lifeline and claimed by another worker', async () => {
    const { id } = await enqueue({ kind: 'k', runAt: Date.now() - 1 });
    const [job] = await queue.claim('dying', 1, undefined, { leaseMs: 1 });
    await new Promise((r) => setTimeout(r, 20));
    expect(await queue.lifeline()).toBe(1);
    const [again] = await queue.claim('alive', 1);
    expect(again).toMatchObject({ id, attempts: 2, reclaims: 1, lockedBy: 'alive' });
    expect(await queue.complete(id, { lease: { workerId: 'dying', attempts: job.attempts } })).toBe(false);
  });

  it("a holder's result still lands after the lifeline took its job back, until another claim takes it", async () => {
    const { id } = await enqueue({ kind: 'k', runAt: Date.now() - 1 });
    const [job] = await queue.claim('slow', 1, undefined, { leaseMs: 1 });
    await new Promise((r) => setTimeout(r, 20));
    expect(await queue.lifeline()).toBe(1);
    // Nobody has claimed it since: the result of the one run there was is kept, not run again.
    expect(await queue.complete(id, { lease: { workerId: 'slow', attempts: job.attempts } })).toBe(true);
    expect(await queue.get(id)).toBeNull();

    const other = await enqueue({ kind: 'k', runAt: Date.now() - 1 });
    const [first] = await queue.claim('slow', 1, undefined, { leaseMs: 1 });
    await new Promise((r) => setTimeout(r, 20));
    expect(await queue.lifeline()).toBe(1);
    expect(
      await queue.retry(
        other.id,
        { afterMs: 0, error: 'late' },
        { lease: { workerId: 'slow', attempts: first.attempts } },
      ),
    ).toBe('retry');
    expect(await queue.get(other.id)).toMatchObject({ state: 'retry', lastError: 'late', lockedBy: null });
  });

  it('two concurrent claimers get disjoint sets, and together every job once', async () => {
    const now = Date.now();
    await store.transaction(async (tx) => {
      for (let i = 0; i < 300; i++) await queue.enqueue(tx, { kind: i % 2 ? 'a' : 'b', runAt: now - 1000 + i });
    });
    // Three connections open before the race: one made while another claimer runs (slow on a
    // loaded machine) would let that one take every job before it was up.
    await Promise.all([1, 2, 3].map(() => store.transaction((tx) => tx.get(sql`SELECT 1 AS one`))));
    const taken = new Map<number, string>();
    const claimer = async (w: string) => {
      for (;;) {
        const jobs = await queue.claim(w, 16, undefined, { kinds: ['a', 'b'] });
        if (jobs.length === 0) return;
        for (const j of jobs) {
          expect(taken.has(j.id), `job ${j.id} claimed twice`).toBe(false);
          taken.set(j.id, w);
        }
      }
    };
    await Promise.all([claimer('w1'), claimer('w2'), claimer('w3')]);
    expect(taken.size).toBe(300);
    // Every claimer took part: on PostgreSQL the claims ran at once, SKIP LOCKED stepping over
    // each other's rows; on SQLite they took turns behind the store's write lock.
    expect(new Set(taken.values()).size).toBeGreaterThan(1);
    const running = await store.get<{ n: number }>(
      sql`SELECT CAST(count(*) AS INTEGER) AS n FROM jobs WHERE state = 'running'`,
    );
    expect(running!.n).toBe(300);
  });

  it('hold and release keep a kind out of every claim', async () => {
    await enqueue({ kind: 'message.dispatch', payload: { message_id: 'msg_1' }, runAt: Date.now() - 1 });
    expect(await queue.hold('message.dispatch')).toEqual([{ message_id: 'msg_1' }]);
    expect(await queue.countHeld('message.dispatch')).toBe(1);
    expect(await queue.claim('w', 5)).toEqual([]);
    expect(await queue.releaseHeld('message.dispatch')).toEqual([{ message_id: 'msg_1' }]);
    expect(await queue.claim('w', 5)).toHaveLength(1);
  });

  it('cron claims each slot once, however many fire it at once', async () => {
    const crons = [new Cron({ queue }), new Cron({ queue: queueOf(t) })];
    for (const c of crons) c.schedule('purge', '0 * * * *', { kind: 'purge' });
    const slot = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
    const results = await Promise.all([...crons, ...crons].map((c) => c.fire('purge', slot)));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const first = results.find((r) => r.created)!;
    for (const r of results) expect(r).toMatchObject({ key: `purge:${slot.toISOString()}`, id: first.id });
    const jobs = await store.all<{ unique_key: string }>(sql`SELECT unique_key FROM jobs WHERE kind = 'purge'`);
    expect(jobs).toEqual([{ unique_key: `cron:purge:${slot.toISOString()}` }]);
  });

  it.runIf(testStore === 'postgres')(
    "the claim reads the partial jobs_claim index in claim order, by kind or not (the planner's view)",
    async () => {
      await t.exec(
        `INSERT INTO jobs (kind, payload, state, priority, run_at, max_attempts, created_at, updated_at)
         SELECT CASE WHEN g % 2 = 0 THEN 'dispatch' ELSE 'webhook' END, '{}',
                CASE WHEN g % 10 = 0 THEN 'dead' WHEN g % 7 = 0 THEN 'retry' ELSE 'available' END, g % 3, g, 5, g, g
           FROM generate_series(1, 20000) g`,
      );
      await t.exec('ANALYZE jobs');
      const plan = async (kinds: string[]) => {
        const seen: Sql[] = [];
        const recorder = {
          get: async () => undefined,
          all: async <R>(q: Sql) => (seen.push(q), [] as R[]),
          run: async () => ({ changes: 0 }),
          values: async <T extends unknown[]>() => [] as T[],
        };
        await pgQueueStatements.claim(recorder, { workerId: 'w', limit: 64, now: 0, leaseMs: 30_000, kinds });
        const { strings } = seen[0];
        const explain: Sql = { strings: [`EXPLAIN ${strings[0]}`, ...strings.slice(1)], values: seen[0].values };
        const r = await store.all<{ 'QUERY PLAN': string }>(explain);
        return r.map((x) => x['QUERY PLAN']).join('\n');
      };
      const any = await plan([]);
      expect(any).toMatch(/Index Scan using jobs_claim on jobs/);
      expect(any).toMatch(/LockRows/);
      expect(any).not.toMatch(/Sort/);
      const one = await plan(['dispatch']);
      expect(one).toMatch(/Index Scan using jobs_kind_claim on jobs/);
      expect(one).not.toMatch(/Sort/);
    },
  );
});
