import { describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { type EnqueueSpec, JobQueue, LEASE_EXPIRED } from '../../src/queue/queue.js';
import { testStore } from '../both/helpers.js';
import { countOf, effects, jobRow, tempDb } from './helpers.js';
import { nextTurn, sleep, waitFor } from '../helpers/wait.js';

// The queue on the run's store (test/queue/helpers.ts). Its clock is T0, an hour ago: on
// SQLite the claims and the lifeline take it as `now`; on PostgreSQL they read the database's
// clock, an hour later, so a job due by T0 is due there too, and "the future" is hours ahead.
// A test that moves the claim's or the lifeline's clock by milliseconds runs on SQLite only;
// test/both/queue.test.ts checks the same on PostgreSQL's clock, in real time.

const T0 = Date.now() - 3_600_000;
const LATER = 7_200_000;
const ownClock = testStore === 'postgres';

async function setup(opts: { maxAttempts?: number } = {}) {
  const t = await tempDb();
  const queue = new JobQueue(t.db, { maxAttempts: opts.maxAttempts ?? 3, leaseMs: 60_000, now: () => T0 });
  /** Enqueues in a transaction of its own. */
  const enqueue = (spec: EnqueueSpec, q: JobQueue = queue) => q.store.transaction((tx) => q.enqueue(tx, spec));
  return { ...t, t, queue, enqueue };
}

describe('JobQueue.enqueue', () => {
  it('is idempotent by unique key: the second enqueue returns the first job', async () => {
    const { t, enqueue } = await setup();
    const a = await enqueue({ kind: 'k', payload: { n: 1 }, uniqueKey: 'msg_1' });
    const b = await enqueue({ kind: 'k', payload: { n: 2 }, uniqueKey: 'msg_1' });
    const c = await enqueue({ kind: 'k', payload: { n: 3 } });
    expect(a.created).toBe(true);
    expect(b).toEqual({ id: a.id, created: false });
    expect(c.created).toBe(true);
    expect(c.id).not.toBe(a.id);
    expect(await countOf(t, 'jobs')).toBe(2);
    expect(JSON.parse((await jobRow(t, a.id))!.payload)).toEqual({ n: 1 });
  });

  it('frees the unique key once the job is done (done jobs are deleted)', async () => {
    const { queue, enqueue } = await setup();
    const a = await enqueue({ kind: 'k', uniqueKey: 'u' });
    await queue.claim('w', 1);
    expect(await queue.complete(a.id)).toBe(true);
    const b = await enqueue({ kind: 'k', uniqueKey: 'u' });
    expect(b.created).toBe(true);
    expect(b.id).not.toBe(a.id);
  });

  // The synchronous enqueue, inside a transaction of the SQLite connection, is SQLite's only;
  // the store transaction's form below runs on both.
  it.skipIf(testStore === 'postgres')('commits or rolls back with the caller transaction (outbox rule)', async () => {
    const { t, queue } = await setup();
    const db = t.db as import('../../src/db/open.js').Db;
    const tx = db.sqlite.transaction((fail: boolean) => {
      db.sqlite.prepare(`INSERT INTO effects (job_id, note) VALUES (0, 'state change')`).run();
      queue.enqueue({ kind: 'k', payload: { fail } });
      if (fail) throw new Error('boom');
    });
    expect(() => tx(true)).toThrow('boom');
    expect(await effects(t)).toHaveLength(0);
    expect(await queue.hasPending()).toBe(false);
    tx(false);
    expect(await effects(t)).toHaveLength(1);
    expect(await queue.hasPending()).toBe(true);
  });

  it('commits or rolls back with the caller store transaction (outbox rule)', async () => {
    const { t, queue, store } = await setup();
    const change = (fail: boolean) =>
      store.transaction(async (tx) => {
        await tx.run(sql`INSERT INTO effects (job_id, note) VALUES (0, 'state change')`);
        await queue.enqueue(tx, { kind: 'k', payload: { fail } });
        if (fail) throw new Error('boom');
      });
    await expect(change(true)).rejects.toThrow('boom');
    expect(await effects(t)).toHaveLength(0);
    expect(await queue.hasPending()).toBe(false);
    await change(false);
    expect(await effects(t)).toHaveLength(1);
    expect(await queue.hasPending()).toBe(true);
  });

  // As above: the synchronous form inside a SQLite transaction; the store transaction's below.
  it.skipIf(testStore === 'postgres')(
    'notifies listeners after the transaction, never inside it, once per turn',
    async () => {
      const { t, queue } = await setup();
      const db = t.db as import('../../src/db/open.js').Db;
      const calls: { at: number; inTx: boolean }[] = [];
      const off = queue.onEnqueue((byKind) => calls.push({ at: byKind.get('k')!, inTx: db.sqlite.inTransaction }));
      db.sqlite.transaction(() => {
        queue.enqueue({ kind: 'k', runAt: T0 + 500 });
        queue.enqueue({ kind: 'k', runAt: T0 + 100 });
        expect(calls).toHaveLength(0);
      })();
      expect(calls).toHaveLength(0);
      await nextTurn();
      expect(calls).toEqual([{ at: T0 + 100, inTx: false }]);
      off();
      queue.enqueue({ kind: 'k' });
      await nextTurn();
      expect(calls).toHaveLength(1);
    },
  );

  it('notifies listeners once the store transaction has committed, never before, once per turn', async () => {
    const { queue, store, enqueue } = await setup();
    const calls: number[] = [];
    const off = queue.onEnqueue((byKind) => calls.push(byKind.get('k')!));
    await store.transaction(async (tx) => {
      await queue.enqueue(tx, { kind: 'k', runAt: T0 + 500 });
      await queue.enqueue(tx, { kind: 'k', runAt: T0 + 100 });
      // More of the transaction after the enqueues: on PostgreSQL each statement is a turn or more.
      for (let i = 0; i < 3; i++) await tx.run(sql`INSERT INTO effects (job_id, note) VALUES (${i}, 'change')`);
      expect(calls).toHaveLength(0);
    });
    await nextTurn();
    expect(calls).toEqual([T0 + 100]);
    off();
    await enqueue({ kind: 'k' });
    await nextTurn();
    expect(calls).toHaveLength(1);
  });

  it('wakes listeners of another queue object on another connection to the same database', async () => {
    const { t } = await setup();
    const q1 = new JobQueue(t.db);
    const other = t.open();
    // On PostgreSQL another queue object hears of an enqueue by the NOTIFY it LISTENs for.
    const q2 = 'sqlite' in other ? new JobQueue(other) : new JobQueue(other, { listen: other.listen });
    let woken = 0;
    q2.onEnqueue(() => woken++);
    await q2.listenForWakeups();
    await q1.store.transaction((tx) => q1.enqueue(tx, { kind: 'k' }));
    await waitFor(() => woken === 1, 'the other queue to be woken', 2000);
  });

  it('rejects a missing kind and a bad maxAttempts', async () => {
    const { enqueue } = await setup();
    await expect(enqueue({ kind: '' })).rejects.toThrow(/kind/);
    await expect(enqueue({ kind: 'k', maxAttempts: 0 })).rejects.toThrow(/maxAttempts/);
  });
});

describe('JobQueue.claim', () => {
  it.skipIf(ownClock)(
    'claims in priority (lower first), then run_at, then id order, and skips future jobs',
    async () => {
      const { queue, enqueue } = await setup();
      const ids = {
        late: (await enqueue({ kind: 'k', runAt: T0 - 10 })).id,
        early: (await enqueue({ kind: 'k', runAt: T0 - 20 })).id,
        urgent: (await enqueue({ kind: 'k', runAt: T0, priority: -5 })).id,
        lazy: (await enqueue({ kind: 'k', runAt: T0 - 1000, priority: 5 })).id,
        sameA: (await enqueue({ kind: 'k', runAt: T0 - 10 })).id,
        future: (await enqueue({ kind: 'k', runAt: T0 + 1 })).id,
      };
      const first = await queue.claim('w', 3, T0);
      expect(first.map((j) => j.id)).toEqual([ids.urgent, ids.early, ids.late]);
      const rest = await queue.claim('w', 10, T0);
      expect(rest.map((j) => j.id)).toEqual([ids.sameA, ids.lazy]);
      expect(await queue.claim('w', 10, T0)).toEqual([]);
      expect((await queue.claim('w', 10, T0 + 1)).map((j) => j.id)).toEqual([ids.future]);
    },
  );

  it.skipIf(ownClock)('marks claimed jobs running with an attempt, a lease and an owner', async () => {
    const { queue, enqueue } = await setup();
    const { id } = await enqueue({ kind: 'k', payload: { a: [1, 'x'] } });
    const [job] = await queue.claim('w1', 5, T0, { leaseMs: 1000 });
    expect(job).toMatchObject({ id, kind: 'k', state: 'running', attempts: 1, lockedBy: 'w1', lockedUntil: T0 + 1000 });
    expect(job.payload).toEqual({ a: [1, 'x'] });
    expect(await queue.claim('w2', 5, T0)).toEqual([]);
  });

  it('claims only the kinds asked for', async () => {
    const { queue, enqueue } = await setup();
    await enqueue({ kind: 'a' });
    const b = (await enqueue({ kind: 'b' })).id;
    expect((await queue.claim('w', 10, T0, { kinds: ['b', 'c'] })).map((j) => j.id)).toEqual([b]);
    expect(await queue.hasRunnable(T0, ['b'])).toBe(false);
    expect(await queue.hasRunnable(T0, ['a'])).toBe(true);
  });

  it('merges several kinds (available and retry) in priority, run_at, id order, up to the limit', async () => {
    const { queue, enqueue } = await setup();
    const late = (await enqueue({ kind: 'a', runAt: T0 - 10 })).id;
    const urgent = (await enqueue({ kind: 'b', runAt: T0 - 5, priority: -1 })).id;
    const early = (await enqueue({ kind: 'b', runAt: T0 - 20 })).id;
    await enqueue({ kind: 'a', runAt: T0 + LATER }); // not due
    await enqueue({ kind: 'other', runAt: T0 - 100 }); // not asked for
    const retried = (await enqueue({ kind: 'a', runAt: T0 - 50 })).id;
    await queue.claim('w0', 1, T0 - 50, { kinds: ['a'] });
    await queue.retry(retried, { afterMs: 35, error: 'once' }, { now: T0 - 50 }); // retry state, due at T0 - 15
    const got = (await queue.claim('w', 3, T0, { kinds: ['a', 'b'] })).map((j) => j.id);
    expect(got).toEqual([urgent, early, retried]);
    expect((await queue.claim('w', 10, T0, { kinds: ['a', 'b'] })).map((j) => j.id)).toEqual([late]);
    expect(await queue.nextRunAt(['a', 'b'])).toBe(T0 + LATER);
    expect(await queue.nextRunAt(['other'])).toBe(T0 - 100);
  });

  it('a kind named twice is claimed once, up to the limit', async () => {
    const { queue, enqueue } = await setup();
    const ids: number[] = [];
    for (const i of [0, 1, 2, 3]) ids.push((await enqueue({ kind: 'a', runAt: T0 - 10 + i })).id);
    expect((await queue.claim('w', 3, T0, { kinds: ['a', 'a', 'a'] })).map((j) => j.id)).toEqual(ids.slice(0, 3));
    expect((await queue.claim('w', 3, T0, { kinds: ['a', 'a'] })).map((j) => j.id)).toEqual([ids[3]]);
  });

  it('a claim by kind inside a caller transaction rolls back with it', async () => {
    const { t, queue, enqueue } = await setup();
    const id = (await enqueue({ kind: 'a' })).id;
    const tx = queue.store.transaction(async (x) => {
      expect((await queue.claimIn(x, 'w', 5, T0, { kinds: ['a'] })).map((j) => j.id)).toEqual([id]);
      throw new Error('boom');
    });
    await expect(tx).rejects.toThrow('boom');
    expect(await jobRow(t, id)).toMatchObject({ state: 'available', attempts: 0, locked_by: null });
    expect((await queue.claim('w', 5, T0, { kinds: ['a'] })).map((j) => j.id)).toEqual([id]);
  });

  it('two connections claiming by kind, interleaved, never take the same job', async () => {
    const { t, queue, store } = await setup();
    const other = new JobQueue(t.open(), { leaseMs: 60_000, now: () => T0 });
    const ids = await store.transaction(async (tx) => {
      const out: number[] = [];
      for (let i = 0; i < 50; i++)
        out.push((await queue.enqueue(tx, { kind: i % 2 ? 'a' : 'b', runAt: T0 - 100 + i })).id);
      return out;
    });
    const taken: number[] = [];
    for (let round = 0; round < 20; round++) {
      for (const [q, w] of [
        [queue, 'w1'],
        [other, 'w2'],
      ] as const) {
        for (const j of await q.claim(w, 3, T0, { kinds: ['a', 'b'] })) {
          expect(await jobRow(t, j.id)).toMatchObject({ state: 'running', locked_by: w, attempts: 1 });
          taken.push(j.id);
        }
      }
    }
    expect(taken).toHaveLength(50);
    expect([...taken].sort((x, y) => x - y)).toEqual(ids);
  });

  it('tells listeners which kinds were enqueued, with the earliest run_at of each', async () => {
    const { queue, store } = await setup();
    const seen: [string, number][][] = [];
    queue.onEnqueue((byKind) => seen.push([...byKind].sort()));
    await store.transaction(async (tx) => {
      await queue.enqueue(tx, { kind: 'x', runAt: T0 + 30 });
      await queue.enqueue(tx, { kind: 'y', runAt: T0 + 10 });
      await queue.enqueue(tx, { kind: 'x', runAt: T0 + 20 });
    });
    await nextTurn();
    expect(seen).toEqual([
      [
        ['x', T0 + 20],
        ['y', T0 + 10],
      ],
    ]);
  });
});

describe('JobQueue completions', () => {
  it('retry reschedules, and a retry at max_attempts goes dead instead', async () => {
    const { t, queue, enqueue } = await setup({ maxAttempts: 2 });
    const { id } = await enqueue({ kind: 'k' });
    await queue.claim('w', 1, T0);
    expect(await queue.retry(id, { afterMs: 5000, error: 'timeout' }, { now: T0 })).toBe('retry');
    expect(await jobRow(t, id)).toMatchObject({
      state: 'retry',
      run_at: T0 + 5000,
      last_error: 'timeout',
      locked_by: null,
    });
    await queue.claim('w', 1, T0 + 5000);
    expect(await queue.retry(id, { afterMs: 5000, error: 'again' }, { now: T0 + 5000 })).toBe('dead');
    expect(await jobRow(t, id)).toMatchObject({ state: 'dead', attempts: 2, last_error: 'again' });
  });

  it('snooze gives the attempt back', async () => {
    const { t, queue, enqueue } = await setup({ maxAttempts: 1 });
    const { id } = await enqueue({ kind: 'k' });
    for (let i = 0; i < 5; i++) {
      const [job] = await queue.claim('w', 1, T0 + i * 10);
      expect(job.attempts).toBe(1);
      expect(await queue.snooze(id, 10, { now: T0 + i * 10 })).toBe(true);
    }
    expect(await jobRow(t, id)).toMatchObject({ state: 'available', attempts: 0, run_at: T0 + 50 });
  });

  it('a completion under a lease only lands while that claim still holds', async () => {
    const { t, queue, enqueue } = await setup();
    const { id } = await enqueue({ kind: 'k' });
    const [job] = await queue.claim('w1', 1, T0, { leaseMs: 100 });
    const lease = { workerId: 'w1', attempts: job.attempts };
    // The lease runs out: at T0 + 101 on SQLite's clock, in real time on PostgreSQL's.
    if (ownClock) await sleep(150);
    expect(await queue.lifeline(T0 + 101)).toBe(1);
    const [again] = await queue.claim('w2', 1, T0 + 101);
    expect(again.id).toBe(id);
    // the stalled first holder comes back: its result is dropped
    expect(await queue.complete(id, { lease })).toBe(false);
    expect(await queue.fail(id, 'x', { lease })).toBe(false);
    expect(await queue.retry(id, { afterMs: 0, error: 'x' }, { lease })).toBe(null);
    expect(await jobRow(t, id)).toMatchObject({ state: 'running', locked_by: 'w2' });
    expect(await queue.complete(id, { lease: { workerId: 'w2', attempts: again.attempts } })).toBe(true);
    expect(await jobRow(t, id)).toBeUndefined();
  });

  it('release hands a running job back without spending its attempt', async () => {
    const { t, queue, enqueue } = await setup();
    const { id } = await enqueue({ kind: 'k' });
    await queue.claim('w', 1, T0);
    expect(await queue.release(id)).toBe(true);
    expect(await jobRow(t, id)).toMatchObject({ state: 'available', attempts: 0, locked_by: null, locked_until: null });
  });
});

describe('JobQueue.lifeline', () => {
  it.skipIf(ownClock)('puts expired leases back to retry, counts the reclaim and says why', async () => {
    const { t, queue, enqueue } = await setup();
    const a = (await enqueue({ kind: 'k' })).id;
    const b = (await enqueue({ kind: 'k' })).id;
    await queue.claim('w', 1, T0, { leaseMs: 100 });
    await queue.claim('w', 1, T0, { leaseMs: 10_000 });
    expect(await queue.lifeline(T0 + 100)).toBe(0); // not yet expired: locked_until < now
    expect(await queue.lifeline(T0 + 101)).toBe(1);
    expect(await jobRow(t, a)).toMatchObject({
      state: 'retry',
      run_at: T0 + 101,
      reclaims: 1,
      last_error: LEASE_EXPIRED,
      locked_by: null,
    });
    expect(await jobRow(t, b)).toMatchObject({ state: 'running', reclaims: 0 });
  });
});

describe('JobQueue operator views', () => {
  it('counts per kind and state, lists, retries and deletes dead jobs', async () => {
    const { t, queue, enqueue } = await setup({ maxAttempts: 1 });
    const ids: number[] = [];
    for (const n of [1, 2, 3]) ids.push((await enqueue({ kind: n === 3 ? 'other' : 'send', payload: { n } })).id);
    await enqueue({ kind: 'send' });
    for (const j of await queue.claim('w', 3, T0)) await queue.fail(j.id, `bad ${j.payload && (j.payload as any).n}`);
    expect(await queue.stats()).toEqual([
      { kind: 'other', state: 'dead', count: 1 },
      { kind: 'send', state: 'available', count: 1 },
      { kind: 'send', state: 'dead', count: 2 },
    ]);
    expect((await queue.listDead({ kind: 'send' })).map((j) => [j.id, j.lastError])).toEqual([
      [ids[0], 'bad 1'],
      [ids[1], 'bad 2'],
    ]);
    expect((await queue.listDead({ limit: 1, afterId: ids[0] })).map((j) => j.id)).toEqual([ids[1]]);
    expect(await queue.retryDead(ids[0], T0 + 5)).toBe(1);
    expect(await jobRow(t, ids[0])).toMatchObject({ state: 'available', attempts: 0, run_at: T0 + 5 });
    expect(await queue.deleteDead({ kind: 'other' })).toBe(1);
    expect(await queue.retryDead('all')).toBe(1);
    expect(await queue.listDead()).toEqual([]);
    expect(await queue.deleteDead('all')).toBe(0);
  });

  it('nextRunAt gives the earliest waiting run_at across priorities, states and kinds', async () => {
    const { queue, enqueue } = await setup();
    expect(await queue.nextRunAt()).toBeNull();
    await enqueue({ kind: 'a', runAt: T0 + LATER + 900, priority: -1 });
    await enqueue({ kind: 'a', runAt: T0 + LATER + 500, priority: 3 });
    const r = (await enqueue({ kind: 'b', runAt: T0 })).id;
    await enqueue({ kind: 'b', runAt: T0 + LATER + 700, priority: 7 });
    await queue.claim('w', 1, T0);
    await queue.retry(r, { afterMs: 300, error: 'x' }, { now: T0 });
    expect(await queue.nextRunAt()).toBe(T0 + 300);
    expect(await queue.nextRunAt(['a'])).toBe(T0 + LATER + 500);
    expect(await queue.nextRunAt(['b'])).toBe(T0 + 300);
    expect(await queue.nextRunAt(['zzz'])).toBeNull();
  });
});
