import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { JobQueue, LEASE_EXPIRED } from '../../src/queue/queue.js';
import { Worker } from '../../src/queue/worker.js';
import { jobRow, onCleanup, tempDb } from './helpers.js';
import { sleep, waitFor } from '../helpers/wait.js';

// Workers that die and workers that compete, on the run's store (test/queue/helpers.ts): on
// PostgreSQL, leases run on the database's clock and claims skip each other's locked rows.

const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'child-worker.mjs');

/** A worker process on `target`: the SQLite file, or PostgreSQL's URL. */
function child(target: string, mode: 'drain' | 'hang', leaseMs: number) {
  const p = spawn(process.execPath, [CHILD, target, mode, String(leaseMs)], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  p.stdout!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => p.on('exit', (code) => r(code)));
  onCleanup(() => {
    if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  });
  return { p, out: () => out, exited };
}

function enqueueMany(queue: JobQueue, n: number): Promise<number[]> {
  return queue.store.transaction(async (tx) => {
    const ids: number[] = [];
    for (let i = 0; i < n; i++) ids.push((await queue.enqueue(tx, { kind: 'work', payload: { i } })).id);
    return ids;
  });
}

describe('crash recovery', () => {
  it('reclaims jobs from an abandoned connection once the lease passes, and counts the reclaim', async () => {
    const t = await tempDb();
    const dying = t.open();
    const ids = await enqueueMany(new JobQueue(t.db), 20);
    // the dying process claims everything, then vanishes without settling
    const claimedAt = Date.now();
    expect(await new JobQueue(dying).claim('dead-worker', 50, claimedAt, { leaseMs: 1000 })).toHaveLength(20);
    await dying.close();

    const seen = new Map<number, { attempts: number; reclaims: number; lastError: string | null }>();
    const make = (offsetMs: number) => {
      const w = new Worker({
        queue: new JobQueue(t.db),
        concurrency: 8,
        leaseMs: 1000,
        now: () => Date.now() + offsetMs,
      });
      w.register('work', async (job) => (seen.set(job.id, job), { type: 'ok' }));
      onCleanup(() => w.stop({ timeoutMs: 100 }));
      return w;
    };
    // before the lease passes nothing can be taken
    const early = make(0);
    await early.drain({ maxWaitMs: 2000 });
    expect(seen.size).toBe(0);
    expect(early.counters.reclaimed).toBe(0);

    // The clock has moved past the lease: the process's (SQLite's lifeline reads it) and the
    // database's (PostgreSQL's lifeline reads its own).
    await sleep(claimedAt + 1100 - Date.now());
    const late = make(2000);
    await late.drain({ untilEmpty: true, maxWaitMs: 5000 });
    expect(late.counters.reclaimed).toBe(20);
    expect(late.counters.completed).toBe(20);
    expect([...seen.keys()].sort((a, b) => a - b)).toEqual(ids);
    for (const j of seen.values()) expect(j).toMatchObject({ attempts: 2, reclaims: 1, lastError: LEASE_EXPIRED });
    for (const id of ids) expect(await jobRow(t, id)).toBeUndefined();
  });

  it('survives a worker process killed mid-job (SIGKILL): its jobs run again elsewhere', async () => {
    const t = await tempDb();
    const ids = await enqueueMany(new JobQueue(t.db), 10);
    const c = child(t.target, 'hang', 1000);
    await waitFor(() => (c.out().match(/claimed/g) ?? []).length === 10, 'child claims', 10_000);
    c.p.kill('SIGKILL');
    await c.exited;
    for (const id of ids) expect(await jobRow(t, id)).toMatchObject({ state: 'running' });

    const done: number[] = [];
    const w = new Worker({ queue: new JobQueue(t.db), concurrency: 8, leaseMs: 1000, lifelineIntervalMs: 50 });
    w.register('work', async (job) => (done.push(job.id), { type: 'ok' }));
    onCleanup(() => w.stop({ timeoutMs: 100 }));
    w.start();
    await waitFor(() => done.length === 10, 'reclaimed jobs done', 5000);
    expect(done.sort((a, b) => a - b)).toEqual(ids);
    expect(w.counters.reclaimed).toBe(10);
  });
});

describe('concurrent workers', () => {
  it('two workers on two connections never run the same job', async () => {
    const t = await tempDb();
    const ids = await enqueueMany(new JobQueue(t.db), 2000);
    const calls = new Map<number, number>();
    const workers = [t.db, t.open()].map((db, n) => {
      const w = new Worker({ queue: new JobQueue(db), concurrency: 32, leaseMs: 30_000, workerId: `w${n}` });
      w.register('work', async (job) => {
        calls.set(job.id, (calls.get(job.id) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, Math.random() < 0.5 ? 0 : 1));
        return { type: 'ok' };
      });
      onCleanup(() => w.stop({ timeoutMs: 100 }));
      return w;
    });
    await Promise.all(workers.map((w) => w.drain({ maxWaitMs: 20_000 })));
    expect(calls.size).toBe(2000);
    expect([...calls.values()].every((n) => n === 1)).toBe(true);
    expect([...calls.keys()].sort((a, b) => a - b)).toEqual(ids);
    expect(workers[0].counters.completed + workers[1].counters.completed).toBe(2000);
    expect(workers[0].counters.completed).toBeGreaterThan(0);
    expect(workers[1].counters.completed).toBeGreaterThan(0);
  });

  it('a worker in another process and one here share 3000 jobs, each run exactly once', async () => {
    const t = await tempDb();
    const ids = await enqueueMany(new JobQueue(t.db), 3000);
    const c = child(t.target, 'drain', 30_000);
    await waitFor(() => c.out().includes('ready'), 'child ready', 10_000);
    const here: number[] = [];
    const w = new Worker({ queue: new JobQueue(t.db), concurrency: 32, leaseMs: 30_000 });
    w.register('work', async (job) => {
      here.push(job.id);
      await new Promise((r) => setTimeout(r, Math.random() < 0.5 ? 0 : 1));
      return { type: 'ok' };
    });
    onCleanup(() => w.stop({ timeoutMs: 100 }));
    c.p.stdin!.write('go\n');
    // start here only once the child is busy, so both really compete for the same rows
    await waitFor(() => c.out().includes('working'), 'child working', 10_000);
    await w.drain({ maxWaitMs: 30_000 });
    expect(await c.exited, 'child exit code').toBe(0);
    const there = JSON.parse(/seen (.*)\n/.exec(c.out())![1]) as number[];
    const all = [...here, ...there].sort((a, b) => a - b);
    expect(all.length, `here ${here.length} + there ${there.length}`).toBe(3000);
    expect(all).toEqual(ids);
    expect(here.length, 'jobs run here').toBeGreaterThan(0);
    expect(there.length, 'jobs run in the child').toBeGreaterThan(0);
  });
});
