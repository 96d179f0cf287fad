import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { JobQueue } from '../../src/queue/queue.js';
import { Worker } from '../../src/queue/worker.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// A turn of the job loop that throws outside its batch transaction is tried again every 250 ms,
// and a beforeClaim hook that throws (one reading through a store that is down) does so on every
// turn. While either keeps failing, the log reads as a spell (src/lib/failure-log.ts): its first
// failure with the error, then a count per interval, then one line when it runs through again.
//
// Nothing in a turn outside its transaction fails on its own (the storage's faults are the
// transaction's, logged as job batch failures): the fault is put in the worker by hand, by
// shadowing the method the turn begins with.

interface Line {
  level: 'info' | 'warn' | 'error';
  msg: string;
  obj: Record<string, unknown>;
}

let t: StoreCtx;
let queue: JobQueue;
let worker: Worker;
let lines: Line[];
beforeEach(async () => {
  t = await openStoreCtx();
  queue = new JobQueue(t.dialect === 'sqlite' ? t.ctx.db : t.ctx.store);
  lines = [];
  const at =
    (level: Line['level']) =>
    (obj: object, msg = '') =>
      lines.push({ level, msg, obj: obj as Record<string, unknown> });
  worker = new Worker({
    queue,
    concurrency: 2,
    leaseMs: 30_000,
    maxSleepMs: 50,
    failureLogIntervalMs: 500,
    logger: { info: at('info'), warn: at('warn'), error: at('error') },
  });
  worker.register('k', async () => ({ type: 'ok' }));
});
afterEach(async () => {
  await worker.stop({ timeoutMs: 1_000 });
  await t.close();
});

const turnLines = () => lines.filter((l) => /worker turn/.test(l.msg));

describe('a failing worker turn in the log', () => {
  it('logs its first failure, then a count per interval, then one line when a turn runs through', async () => {
    const faulty = worker as unknown as { wanted?: () => number };
    faulty.wanted = () => {
      throw new Error('the turn broke');
    };
    worker.start();
    // About six tries, 250 ms apart, over two and a half summary intervals.
    await sleep(1_500);
    delete faulty.wanted;
    const back = await waitFor(
      () => turnLines().find((l) => l.msg.startsWith('worker turns succeed again')),
      'the line saying turns succeed again',
      5_000,
    );

    const failed = turnLines().filter((l) => l.msg === 'worker turn failed; retrying');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.level).toBe('error');
    expect(failed[0]!.obj).toMatchObject({
      code: 'Error',
      err: expect.objectContaining({ message: 'the turn broke' }),
    });
    const counts = turnLines().filter((l) => /^\d+ more worker turns failed in the last \d+ s$/.test(l.msg));
    expect(counts.length).toBeGreaterThanOrEqual(1);
    expect(counts.length).toBeLessThanOrEqual(4);
    for (const c of counts) expect(c.level).toBe('error');
    // Every failure is counted once: the first line, the counts, and what the last count had not summed yet.
    const counted = 1 + counts.reduce((n, c) => n + (c.obj.failures as number), 0);
    const total = back.obj.failures as number;
    expect(total).toBeGreaterThanOrEqual(counted);
    expect(total).toBeGreaterThanOrEqual(4);
    expect(back.level).toBe('info');
    expect(back.msg).toMatch(new RegExp(`^worker turns succeed again after ${total} failures in \\d+ s$`));
    // The last line of the spell: turns that run through log nothing more.
    expect(turnLines().at(-1)).toBe(back);

    // And the loop works again.
    const job = await t.ctx.store.transaction((tx) => queue.enqueue(tx, { kind: 'k', payload: {} }));
    await worker.drain({ untilEmpty: true, maxWaitMs: 10_000 });
    expect(await queue.get(job.id)).toBeNull();
    expect(turnLines().at(-1)).toBe(back);
  });

  it('a beforeClaim hook that keeps throwing: its first failure, a count per interval, its recovery; the claims go on', async () => {
    let broken = true;
    worker.beforeClaim(async () => {
      if (broken) throw new Error('the hook broke');
    });
    worker.start();
    const job = await t.ctx.store.transaction((tx) => queue.enqueue(tx, { kind: 'k', payload: {} }));
    // An idle worker claims every maxSleepMs (50 ms): some twenty failures in a second.
    await sleep(1_200);
    // The claims went on: the job ran while the hook failed.
    expect(await queue.get(job.id)).toBeNull();
    broken = false;
    const hookLines = () => lines.filter((l) => /beforeClaim hook/.test(l.msg));
    const back = await waitFor(
      () => hookLines().find((l) => l.msg.startsWith('beforeClaim hooks succeed again')),
      'the line saying the hooks succeed again',
      5_000,
    );

    const failed = hookLines().filter((l) => l.msg === 'beforeClaim hook threw');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.level).toBe('error');
    expect(failed[0]!.obj).toMatchObject({ err: expect.objectContaining({ message: 'the hook broke' }) });
    const counts = hookLines().filter((l) => /^\d+ more beforeClaim hooks failed in the last \d+ s$/.test(l.msg));
    expect(counts.length).toBeGreaterThanOrEqual(1);
    expect(counts.length).toBeLessThanOrEqual(4);
    expect(back.obj.failures as number).toBeGreaterThanOrEqual(5);
    expect(back.level).toBe('info');
    expect(hookLines().at(-1)).toBe(back);
    await sleep(200);
    expect(hookLines().at(-1)).toBe(back);
  });
});
