import { describe, expect, it } from 'vitest';
import type { Tx } from '../../src/db/query.js';
import { sql } from '../../src/db/sql.js';
import { type EnqueueSpec, JobQueue, LEASE_EXPIRED, type Job } from '../../src/queue/queue.js';
import { Worker, type WorkerOptions } from '../../src/queue/worker.js';
import { MAX_HINT_MS } from '../../src/queue/settle.js';
import { effects, jobRow, onCleanup, type QueueDb, storeOf, tempDb, type TempDb } from './helpers.js';
import { nextTurn, sleep, waitFor } from '../helpers/wait.js';

// The worker on the run's store (test/queue/helpers.ts): SQLite's file, or PostgreSQL's
// database, where its claims and lifeline read the database's clock.

function makeWorker(t: TempDb, opts: Partial<WorkerOptions> = {}, db: QueueDb = t.db, maxAttempts = 5) {
  const queue = new JobQueue(db, { maxAttempts });
  const worker = new Worker({
    queue,
    concurrency: 16,
    leaseMs: 30_000,
    backoff: { baseMs: 5, capMs: 20 },
    ...opts,
  });
  onCleanup(() => worker.stop({ timeoutMs: 200 }));
  return { queue, worker };
}

/** A job written by another connection, as msgctl does: no in-process notification. */
async function insertElsewhere(t: TempDb, kind: string, runAt: number) {
  const now = Date.now();
  await storeOf(t.open()).run(
    sql`INSERT INTO jobs (kind, payload, run_at, max_attempts, created_at, updated_at) VALUES (${kind}, 'null', ${runAt}, 3, ${now}, ${now})`,
  );
}

/** A job's effect, written through the batch's Tx. */
async function note(q: Tx, jobId: number, text: string): Promise<void> {
  await q.run(sql`INSERT INTO effects (job_id, note) VALUES (${jobId}, ${text})`);
}

/** Enqueues in a transaction of its own. */
const enqueue = (queue: JobQueue, spec: EnqueueSpec) => queue.store.transaction((tx) => queue.enqueue(tx, spec));

/** Enqueues `n` jobs of a kind in one transaction; their ids. */
const enqueueMany = (queue: JobQueue, n: number, spec: (i: number) => EnqueueSpec) =>
  queue.store.transaction(async (tx) => {
    const ids: number[] = [];
    for (let i = 0; i < n; i++) ids.push((await queue.enqueue(tx, spec(i))).id);
    return ids;
  });

/** How many effects a job has, as another connection sees them. */
const effectsSeenBy = async (other: QueueDb, jobId: number) =>
  Number(
    (await storeOf(other).get<{ n: number }>(
      sql`SELECT CAST(count(*) AS BIGINT) AS n FROM effects WHERE job_id = ${jobId}`,
    ))!.n,
  );

describe('Worker.durably', () => {
  it("commits a running job's own writes in the next batch, one commit for many, before the job goes on", async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    const other = t.open();
    const seenByOther: number[] = [];
    worker.register('mark', async (job) => {
      await worker.durably((tx) => note(tx, job.id, 'marked'));
      // Committed: another connection sees it before the job does anything else.
      seenByOther.push(await effectsSeenBy(other, job.id));
      return { type: 'ok' };
    });
    await enqueueMany(queue, 10, () => ({ kind: 'mark' }));
    worker.start();
    await waitFor(() => worker.counters.completed === 10, '10 jobs done');
    expect(seenByOther).toEqual(Array(10).fill(1));
    // 10 jobs claimed together: their marks share a commit, their completions another (at most a few).
    expect(worker.counters.batches).toBeLessThanOrEqual(6);
  });

  it('rejects with what the write threw, keeping the rest of the batch, and once the worker has stopped', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    const outcomes: string[] = [];
    worker.register('mark', async (job) => {
      try {
        await worker.durably(async (tx) => {
          await note(tx, job.id, 'partly');
          if ((job.payload as { bad: boolean }).bad) throw new Error('no room');
        });
        outcomes.push(`ok ${job.id}`);
      } catch (e) {
        outcomes.push(`threw ${job.id}: ${(e as Error).message}`);
      }
      return { type: 'ok' };
    });
    const good = await enqueue(queue, { kind: 'mark', payload: { bad: false } });
    const bad = await enqueue(queue, { kind: 'mark', payload: { bad: true } });
    await worker.drain({ untilEmpty: true, maxWaitMs: 5000 });
    expect(outcomes.sort()).toEqual([`ok ${good.id}`, `threw ${bad.id}: no room`].sort());
    // The throwing write rolled back to its savepoint: nothing of it is kept.
    expect(await effects(t)).toEqual([{ job_id: good.id, note: 'partly' }]);
    await worker.stop();
    await expect(worker.durably(() => {})).rejects.toThrow('the worker has stopped');
  });
});

describe('Worker results', () => {
  it('retries a throwing handler with backoff, then succeeds', async () => {
    const t = await tempDb();
    // no jitter, so the schedule is exact: 30 ms after the first failure, 60 ms after the second
    const { queue, worker } = makeWorker(t, { backoff: { baseMs: 30, capMs: 1000, jitter: 'none' } });
    const seen: { attempts: number; runAt: number; lastError: string | null; at: number }[] = [];
    worker.register('flaky', async (job) => {
      seen.push({ attempts: job.attempts, runAt: job.runAt, lastError: job.lastError, at: Date.now() });
      if (job.attempts < 3) throw new Error('provider 503');
      return { type: 'ok' };
    });
    const { id } = await enqueue(queue, { kind: 'flaky' });
    await worker.drain({ untilEmpty: true, maxWaitMs: 5000 });
    expect(seen.map((s) => s.attempts)).toEqual([1, 2, 3]);
    for (const [i, delay] of [
      [1, 30],
      [2, 60],
    ]) {
      expect(seen[i].lastError).toBe('provider 503');
      expect(seen[i].runAt - seen[i - 1].at).toBeGreaterThanOrEqual(delay);
      expect(seen[i].runAt - seen[i - 1].at).toBeLessThan(delay + 100); // + settle slack
      expect(seen[i].at).toBeGreaterThanOrEqual(seen[i].runAt);
    }
    expect(await jobRow(t, id)).toBeUndefined();
    expect(worker.counters).toMatchObject({ retried: 2, completed: 1, dead: 0 });
  });

  it('uses the handler afterMs over backoff', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, { backoff: { baseMs: 1, capMs: 1 } });
    const at: number[] = [];
    worker.register('k', async (job) => {
      at.push(Date.now());
      return job.attempts === 1 ? { type: 'retry', afterMs: 150, error: 'rate limited' } : { type: 'ok' };
    });
    await enqueue(queue, { kind: 'k' });
    await worker.drain({ untilEmpty: true, maxWaitMs: 3000 });
    expect(at).toHaveLength(2);
    expect(at[1] - at[0]).toBeGreaterThanOrEqual(148);
    expect(at[1] - at[0]).toBeLessThan(1500);
  });

  it('minAfterMs is a floor under the backoff: the hint when it is longer, the backoff when that has grown past it', async () => {
    const t = await tempDb();
    // no jitter: backoff 40, 80, 160 ms after the 1st, 2nd, 3rd failure
    const { queue, worker } = makeWorker(t, { backoff: { baseMs: 40, capMs: 1000, jitter: 'none' } });
    const seen: { runAt: number; at: number }[] = [];
    worker.register('k', async (job) => {
      seen.push({ runAt: job.runAt, at: Date.now() });
      return job.attempts <= 3 ? { type: 'retry', minAfterMs: 100, error: 'rate limited' } : { type: 'ok' };
    });
    await enqueue(queue, { kind: 'k' });
    await worker.drain({ untilEmpty: true, maxWaitMs: 5000 });
    expect(seen).toHaveLength(4);
    for (const [i, delay] of [
      [1, 100],
      [2, 100],
      [3, 160],
    ]) {
      expect(seen[i].runAt - seen[i - 1].at).toBeGreaterThanOrEqual(delay);
      expect(seen[i].runAt - seen[i - 1].at).toBeLessThan(delay + 150); // + settle slack
    }
  });

  it('minAfterMs is honoured up to an hour: a bogus hint of a day does not hold a job a day', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, { backoff: { baseMs: 10, capMs: 200, jitter: 'none' } });
    let at = 0;
    worker.register('k', async () => {
      at = Date.now();
      return { type: 'retry', minAfterMs: 86_400_000, error: 'Retry-After: 86400' };
    });
    const { id } = await enqueue(queue, { kind: 'k' });
    await worker.drain({ maxWaitMs: 3000 }); // returns once nothing is due: the job waits its hint
    expect((await jobRow(t, id))!.state).toBe('retry');
    const wait = (await jobRow(t, id))!.run_at - at;
    expect(wait).toBeGreaterThanOrEqual(MAX_HINT_MS - 50);
    expect(wait).toBeLessThan(MAX_HINT_MS + 1000);
  });

  it('dead-letters after max attempts and runs onDead in that transaction', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, {}, t.db, 3);
    let calls = 0;
    worker.register(
      'doomed',
      async () => {
        calls++;
        return { type: 'retry', afterMs: 0, error: 'nope' };
      },
      { onDead: (job, error, db) => note(db, job.id, `dead after ${job.attempts}: ${error}`) },
    );
    const { id } = await enqueue(queue, { kind: 'doomed' });
    await worker.drain({ untilEmpty: true, maxWaitMs: 5000 });
    expect(calls).toBe(3);
    expect(await jobRow(t, id)).toMatchObject({ state: 'dead', attempts: 3, last_error: 'nope' });
    expect(await effects(t)).toEqual([{ job_id: id, note: 'dead after 3: nope' }]);
    expect(worker.counters).toMatchObject({ retried: 2, dead: 1 });
  });

  it('rolls back a throwing onDead with its writes, and still dead-letters the job', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    worker.register('k', async () => ({ type: 'fail', error: 'refused' }), {
      onDead: async (job, _e, db) => {
        await note(db, job.id, 'half-done refund');
        throw new Error('refund broke');
      },
    });
    const { id } = await enqueue(queue, { kind: 'k', maxAttempts: 1 });
    await worker.drain({ maxWaitMs: 3000 });
    expect(await effects(t)).toEqual([]);
    expect(await jobRow(t, id)).toMatchObject({ state: 'dead' });
    expect((await jobRow(t, id))!.last_error).toMatch(/refund broke/);
  });

  it('snooze does not consume attempts', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, {}, t.db, 2);
    const attempts: number[] = [];
    worker.register('shaped', async (job) => {
      attempts.push(job.attempts);
      return attempts.length <= 4 ? { type: 'snooze', afterMs: 5 } : { type: 'ok' };
    });
    const { id } = await enqueue(queue, { kind: 'shaped' });
    await worker.drain({ untilEmpty: true, maxWaitMs: 3000 });
    expect(attempts).toEqual([1, 1, 1, 1, 1]);
    expect(await jobRow(t, id)).toBeUndefined();
    expect(worker.counters).toMatchObject({ snoozed: 4, completed: 1, dead: 0 });
  });

  it('commits apply together with the completion', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    worker.register('send', async (job: Job<{ to: string }>) => ({
      type: 'ok',
      apply: (db) => note(db, job.id, `sent to ${job.payload.to}`),
    }));
    worker.register('refuse', async (job) => ({
      type: 'fail',
      error: 'invalid number',
      apply: (db) => note(db, job.id, 'marked failed'),
    }));
    const a = (await enqueue(queue, { kind: 'send', payload: { to: '+15550001' } })).id;
    const b = (await enqueue(queue, { kind: 'refuse' })).id;
    await worker.drain({ maxWaitMs: 3000 });
    expect(await effects(t)).toEqual(
      expect.arrayContaining([
        { job_id: a, note: 'sent to +15550001' },
        { job_id: b, note: 'marked failed' },
      ]),
    );
    expect(await jobRow(t, a)).toBeUndefined();
    expect(await jobRow(t, b)).toMatchObject({ state: 'dead', last_error: 'invalid number' });
  });

  it('a throwing apply rolls back only its own job in the batch', async () => {
    const t = await tempDb();
    // A fixed 300 ms retry delay: the retried job cannot complete (making 5) before the
    // checks of the first batch below.
    const { queue, worker } = makeWorker(t, { concurrency: 10, backoff: { baseMs: 300, capMs: 300, jitter: 'none' } });
    const ids = await enqueueMany(queue, 5, (i) => ({ kind: 'k', payload: { n: i + 1 } }));
    const bad = ids[2];
    worker.register('k', (job) => ({
      type: 'ok',
      apply: async (db) => {
        await note(db, job.id, `attempt ${job.attempts}`);
        if (job.id === bad && job.attempts === 1) throw new Error('bad apply');
      },
    }));
    worker.start();
    await waitFor(() => worker.counters.completed === 4, '4 completions');
    // the first batch: four committed, the bad one's write undone and the job retried
    expect(worker.counters.batches).toBe(2); // one claim, one settle
    expect((await effects(t)).map((e) => e.job_id).sort()).toEqual(ids.filter((i) => i !== bad).sort());
    expect((await jobRow(t, bad))!.last_error).toBe('apply failed: bad apply');
    await worker.drain({ untilEmpty: true, maxWaitMs: 3000 });
    expect((await effects(t)).filter((e) => e.job_id === bad)).toEqual([{ job_id: bad, note: 'attempt 2' }]);
  });

  it('group-commits: many fast jobs settle in far fewer transactions than jobs', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, { concurrency: 64 });
    worker.register('fast', () => ({ type: 'ok' }));
    await enqueueMany(queue, 1000, () => ({ kind: 'fast' }));
    await worker.drain({ maxWaitMs: 10_000 });
    expect(worker.counters.completed).toBe(1000);
    expect(worker.counters.batches).toBeLessThan(1000 / 20);
  });

  it('treats a malformed result as a failed try', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    worker.register('k', async () => ({ type: 'maybe' }) as never);
    const { id } = await enqueue(queue, { kind: 'k', maxAttempts: 1 });
    await worker.drain({ maxWaitMs: 3000 });
    expect(await jobRow(t, id)).toMatchObject({ state: 'dead' });
    expect((await jobRow(t, id))!.last_error).toMatch(/invalid result/);
  });
});

describe('Worker hooks', () => {
  it('runs onClaim in the claim transaction, before any handler starts', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    const other = t.open();
    const visible: number[] = [];
    worker.register(
      'k',
      async (job) => {
        // committed before the handler runs: another connection can see it
        visible.push(await effectsSeenBy(other, job.id));
        return { type: 'ok' };
      },
      {
        onClaim: async (jobs, db) => {
          for (const j of jobs) await note(db, j.id, 'sending');
        },
      },
    );
    for (let i = 0; i < 3; i++) await enqueue(queue, { kind: 'k' });
    await worker.drain({ maxWaitMs: 3000 });
    expect(visible).toEqual([1, 1, 1]);
  });

  it('onClaim may settle jobs in the claim itself: never seen running, not run, no attempt spent', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    const other = t.open();
    const handled: number[] = [];
    const seen: { id: number; state: string }[] = [];
    const held = new Set<number>();
    worker.register(
      'k',
      async (job) => {
        handled.push(job.id);
        // What another connection sees of every job while one runs: the held ones never run.
        seen.push(...(await storeOf(other).all<{ id: number; state: string }>(sql`SELECT id, state FROM jobs`)));
        return { type: 'ok' };
      },
      {
        onClaim: (jobs, db) => {
          const settled = new Map();
          for (const j of jobs) {
            if (!held.has(j.id)) continue;
            settled.set(j, { type: 'snooze', afterMs: 60_000, apply: (d: Tx) => note(d, j.id, 'held') });
          }
          return settled;
        },
      },
    );
    const ids = await enqueueMany(queue, 4, () => ({ kind: 'k' }));
    held.add(ids[1]).add(ids[3]);
    const before = Date.now();
    await worker.drain({ maxWaitMs: 3000 });
    expect(handled.sort()).toEqual([ids[0], ids[2]]);
    expect(seen.filter((r) => held.has(r.id)).map((r) => r.state)).toEqual(expect.arrayContaining(['available']));
    expect(seen.filter((r) => held.has(r.id) && r.state !== 'available')).toEqual([]);
    for (const id of [ids[1], ids[3]]) {
      const row = (await jobRow(t, id))!;
      expect(row).toMatchObject({ state: 'available', attempts: 0, locked_by: null });
      expect(row.run_at).toBeGreaterThanOrEqual(before + 60_000);
    }
    expect(
      (await effects(t))
        .filter((e) => e.note === 'held')
        .map((e) => e.job_id)
        .sort(),
    ).toEqual([ids[1], ids[3]].sort());
    expect(worker.counters).toMatchObject({ completed: 2, snoozed: 2 });
  });

  it('a job put back far ahead does not hide one that falls due sooner', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, { concurrency: 1 });
    const ran: string[] = [];
    worker.register('k', async (job: Job<{ name: string }>) => {
      ran.push(job.payload.name);
      // 'far' waits a minute; the worker's timer is then armed for it.
      return job.payload.name === 'far' ? { type: 'snooze', afterMs: 60_000 } : { type: 'ok' };
    });
    await enqueue(queue, { kind: 'k', payload: { name: 'far' } });
    await enqueue(queue, { kind: 'k', payload: { name: 'now' } });
    await enqueue(queue, { kind: 'k', payload: { name: 'soon' }, runAt: Date.now() + 300 });
    worker.start();
    await waitFor(() => ran.includes('soon'), "'soon' to run", 3000);
    expect(ran).toEqual(['far', 'now', 'soon']);
  });

  it('beforeClaim runs before claims, outside their transaction, also when idle; a throw does not stop the claim', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, { maxSleepMs: 50 });
    const inTx: boolean[] = [];
    let calls = 0;
    worker.beforeClaim(() => {
      // SQLite's one connection says whether a transaction is open on it; on PostgreSQL each
      // transaction has a pooled connection of its own, so the hook could not be inside one.
      inTx.push('sqlite' in t.db ? t.db.sqlite.inTransaction : false);
      if (++calls === 1) throw new Error('first look fails');
    });
    let handled = 0;
    worker.register('k', async () => (handled++, { type: 'ok' }));
    await enqueue(queue, { kind: 'k' });
    worker.start();
    await waitFor(() => handled === 1, 'the job to run despite the throw');
    const before = calls;
    // Idle: the worker still looks every maxSleepMs.
    await waitFor(() => calls > before + 2, 'the idle worker to look again', 2000);
    expect(inTx.every((x) => x === false)).toBe(true);
  });

  it('a throwing onClaim fails that try without running the handler or spinning', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    let handled = 0;
    let claims = 0;
    worker.register('k', async () => (handled++, { type: 'ok' }), {
      onClaim: () => {
        claims++;
        throw new Error('db says no');
      },
    });
    const { id } = await enqueue(queue, { kind: 'k', maxAttempts: 2 });
    await worker.drain({ untilEmpty: true, maxWaitMs: 3000 });
    expect(handled).toBe(0);
    expect(claims).toBe(2);
    expect(await jobRow(t, id)).toMatchObject({ state: 'dead', attempts: 2, last_error: 'onClaim failed: db says no' });
  });

  it('dead-letters a reclaimed job with no attempts left, with onDead, without running it', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    // Claimed a second ago with a 1 ms lease: long expired now (on PostgreSQL the claim's lease
    // starts at the database's clock: it runs out over the sleep).
    const { id } = await enqueue(queue, { kind: 'k', maxAttempts: 1, runAt: Date.now() - 1000 });
    expect(await queue.claim('crashed-worker', 1, Date.now() - 1000, { leaseMs: 1 })).toHaveLength(1);
    await sleep(20);
    let handled = 0;
    worker.register('k', async () => (handled++, { type: 'ok' }), {
      onDead: (job, error, db) => note(db, job.id, error),
    });
    await worker.drain({ maxWaitMs: 3000 });
    expect(handled).toBe(0);
    expect(await jobRow(t, id)).toMatchObject({ state: 'dead', reclaims: 1 });
    expect(await effects(t)).toEqual([{ job_id: id, note: `${LEASE_EXPIRED} (no attempts left)` }]);
  });
});

describe('Worker loop timing', () => {
  it('wakes on enqueue: an idle worker runs a new job within milliseconds, not at its next poll', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, { maxSleepMs: 1000 });
    let ranAt = 0;
    worker.register('k', async () => ((ranAt = performance.now()), { type: 'ok' }));
    worker.start();
    const latencies: number[] = [];
    for (let i = 0; i < 5; i++) {
      // Idle, asleep on its 1 s poll timer: it has settled every job and found nothing more.
      await waitFor(() => worker.counters.batches > i && worker.counters.completed === i, 'the worker to be idle');
      ranAt = 0;
      const t0 = performance.now();
      // The outbox shape: the job, then the change that causes it, in one transaction (on
      // PostgreSQL it spans turns: the wake must not come before its COMMIT).
      await queue.store.transaction(async (tx) => {
        const { id } = await queue.enqueue(tx, { kind: 'k' });
        for (let n = 0; n < 3; n++) await note(tx, id, `change ${n}`);
      });
      await waitFor(() => ranAt > 0, 'job run', 2000);
      latencies.push(ranAt - t0);
    }
    // typically ~1 ms; the bound only has to separate a wake-up from the 1 s poll
    expect(Math.max(...latencies)).toBeLessThan(200);
  });

  it('sleeps exactly until a future run_at it was told about', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, { maxSleepMs: 5000 });
    let ranAt = 0;
    worker.register('k', async () => ((ranAt = Date.now()), { type: 'ok' }));
    worker.start();
    await waitFor(() => worker.counters.batches > 0, 'the worker to look and find nothing');
    const runAt = Date.now() + 150;
    await enqueue(queue, { kind: 'k', runAt });
    await waitFor(() => ranAt > 0, 'job run', 3000);
    expect(ranAt).toBeGreaterThanOrEqual(runAt);
    expect(ranAt - runAt).toBeLessThan(250);
  });

  it('sees jobs written by another process within maxSleepMs', async () => {
    const t = await tempDb();
    const { worker } = makeWorker(t, { maxSleepMs: 150 });
    let ranAt = 0;
    worker.register('k', async () => ((ranAt = Date.now()), { type: 'ok' }));
    worker.start();
    await waitFor(() => worker.counters.batches > 0, 'the worker to look and find nothing');
    const t0 = Date.now();
    await insertElsewhere(t, 'k', t0);
    await waitFor(() => ranAt > 0, 'job run', 2000);
    expect(ranAt - t0).toBeLessThan(800);
  });

  // A worker kept busy by one kind claims from that kind only between looks at every kind
  // (src/queue/worker.ts, claimJobs): these two check that the looks happen. Without them, the
  // b below would wait for all 300 a's.
  async function busyWithA(t: TempDb) {
    const { queue, worker } = makeWorker(t, { concurrency: 2, maxSleepMs: 5000 });
    const log: string[] = [];
    worker.register('a', async () => (log.push('a'), await sleep(10), { type: 'ok' }));
    worker.register('b', async () => (log.push('b'), { type: 'ok' }));
    await enqueueMany(queue, 300, () => ({ kind: 'a' })); // ~1.5 s of work at 2 in flight
    return { queue, worker, log };
  }

  it('busy with one kind, still runs a job of another kind written by another process', async () => {
    const t = await tempDb();
    const { worker, log } = await busyWithA(t);
    worker.start();
    await waitFor(() => log.length >= 10, 'the worker to be busy with a');
    const t0 = Date.now();
    // Due before every waiting a, so first in line (claims are first-due, first-claimed).
    await insertElsewhere(t, 'b', t0 - 60_000);
    await waitFor(() => log.includes('b'), 'job b run', 3000);
    const ranAfter = Date.now() - t0;
    // Within the 100 ms between looks at every kind, not after the 300 a's.
    expect(log.filter((k) => k === 'a').length).toBeLessThan(250);
    expect(ranAfter).toBeLessThan(600);
  });

  it('busy with one kind, runs a job of another kind enqueued in this process at its next turn', async () => {
    const t = await tempDb();
    const { queue, worker, log } = await busyWithA(t);
    worker.start();
    await waitFor(() => log.length >= 10, 'the worker to be busy with a');
    const before = log.length;
    await enqueue(queue, { kind: 'b', runAt: Date.now() - 60_000 }); // first in line, as above
    await waitFor(() => log.includes('b'), 'job b run', 3000);
    // A slot frees every ~5 ms; waiting for the next look at every kind (100 ms) would let ~20
    // more a's start first.
    expect(log.indexOf('b') - before).toBeLessThanOrEqual(4);
  });

  it('renews the lease of a slow handler so no lifeline takes it', async () => {
    const t = await tempDb();
    const a = makeWorker(t, { leaseMs: 400, workerId: 'slow' });
    const other = t.open();
    const b = makeWorker(t, { leaseMs: 400, lifelineIntervalMs: 20, workerId: 'watcher' }, other);
    const runs: string[] = [];
    a.worker.register('k', async () => (runs.push('slow'), await sleep(1200), { type: 'ok' }));
    b.worker.register('k', async () => (runs.push('watcher'), { type: 'ok' }));
    const { id } = await enqueue(a.queue, { kind: 'k' });
    a.worker.start();
    await waitFor(() => runs.length === 1, 'slow start');
    b.worker.start();
    await waitFor(() => a.worker.counters.completed === 1, 'slow completion', 5000);
    expect(runs).toEqual(['slow']);
    expect(b.worker.counters.reclaimed).toBe(0);
    expect(await jobRow(t, id)).toBeUndefined();
  });

  it('never takes back a job its own handler still runs, after a pause longer than the lease', async () => {
    const t = await tempDb();
    let pausedMs = 0;
    const { queue, worker } = makeWorker(t, {
      leaseMs: 60_000,
      lifelineIntervalMs: 20,
      now: () => Date.now() + pausedMs,
    });
    let runs = 0;
    let finish!: () => void;
    const gate = new Promise<void>((resolve) => (finish = resolve));
    worker.register('slow', async () => {
      runs++;
      await gate;
      return { type: 'ok' };
    });
    const { id } = await enqueue(queue, { kind: 'slow' });
    worker.start();
    await waitFor(() => runs === 1, 'the job to start');
    // The process was paused past the lease (a VM suspended, the event loop stalled): the
    // lifeline's timer fires before the heartbeat's (every 15 s with this lease).
    pausedMs = 120_000;
    await sleep(100);
    // The lease has run out as the store sees it though this process renewed it a moment ago
    // (PostgreSQL's lifeline reads its own clock, which may run ahead of this one's).
    await t.store.run(sql`UPDATE jobs SET locked_until = ${Date.now() - 1} WHERE id = ${id}`);
    await sleep(200);
    expect(worker.counters.reclaimed).toBe(0);
    expect(runs).toBe(1);
    finish();
    await waitFor(() => worker.counters.completed === 1, 'the job to finish');
    expect(runs).toBe(1);
    expect(await jobRow(t, id)).toBeUndefined();
  });
});

describe('Worker stop and drain', () => {
  it('graceful stop lets in-flight jobs finish and commit, and claims nothing more', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t, { concurrency: 5 });
    worker.register('k', async (job) => (await sleep(150), { type: 'ok', apply: (db) => note(db, job.id, 'done') }));
    const ids = await enqueueMany(queue, 8, () => ({ kind: 'k' }));
    worker.start();
    await waitFor(() => worker.inFlight === 5, '5 in flight');
    await worker.stop({ timeoutMs: 5000 });
    expect(worker.counters).toMatchObject({ completed: 5, released: 0 });
    expect(await effects(t)).toHaveLength(5);
    const left = (await Promise.all(ids.map((id) => jobRow(t, id)))).filter(Boolean);
    expect(left).toHaveLength(3);
    for (const r of left) expect(r).toMatchObject({ state: 'available', attempts: 0 });
  });

  it('stop with a timeout hands stuck jobs back and drops their late results', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    const release: (() => void)[] = [];
    worker.register(
      'k',
      (job) => new Promise((r) => release.push(() => r({ type: 'ok', apply: (db) => note(db, job.id, 'late') }))),
    );
    const ids = await enqueueMany(queue, 3, () => ({ kind: 'k' }));
    worker.start();
    await waitFor(() => worker.inFlight === 3, '3 in flight');
    const t0 = Date.now();
    await worker.stop({ timeoutMs: 100 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(95);
    expect(worker.counters.released).toBe(3);
    for (const id of ids)
      expect(await jobRow(t, id)).toMatchObject({
        state: 'available',
        attempts: 0,
        locked_by: null,
        locked_until: null,
      });
    release.forEach((r) => r());
    // The handlers' results are in hand once every promise continuation has run.
    await nextTurn();
    expect(await effects(t)).toEqual([]);
    for (const id of ids) expect(await jobRow(t, id)).toMatchObject({ state: 'available' });
  });

  it('drain waits for runnable jobs only; untilEmpty also for future ones, bounded by maxWaitMs', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    const ran: string[] = [];
    worker.register('k', async (job: Job<string>) => (ran.push(job.payload), { type: 'ok' }));
    await enqueue(queue, { kind: 'k', payload: 'now' });
    await enqueue(queue, { kind: 'k', payload: 'soon', runAt: Date.now() + 100 });
    await enqueue(queue, { kind: 'k', payload: 'later', runAt: Date.now() + 60_000 });
    await worker.drain();
    expect(ran).toEqual(['now']);
    await expect(worker.drain({ untilEmpty: true, maxWaitMs: 800 })).rejects.toThrow(/still pending/);
    expect(ran).toEqual(['now', 'soon']);
  });
});

describe('Worker poison jobs', () => {
  it('dead-letters a hand-written row whose payload is not JSON instead of stalling the queue', async () => {
    const t = await tempDb();
    const { queue, worker } = makeWorker(t);
    const ran: number[] = [];
    worker.register('k', async (job) => (ran.push(job.id), { type: 'ok' }));
    const now = Date.now();
    const bad = Number(
      (await t.store.get<{ id: number }>(
        sql`INSERT INTO jobs (kind, payload, run_at, max_attempts, created_at, updated_at)
            VALUES ('k', '{oops', ${now}, 3, ${now}, ${now}) RETURNING id`,
      ))!.id,
    );
    const good = (await enqueue(queue, { kind: 'k' })).id;
    await worker.drain({ maxWaitMs: 3000 });
    expect(ran).toEqual([good]);
    expect(await jobRow(t, bad)).toMatchObject({ state: 'dead' });
    expect((await jobRow(t, bad))!.last_error).toMatch(/payload is not valid JSON/);
  });
});
