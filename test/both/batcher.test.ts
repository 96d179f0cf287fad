import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BatchResult, Queryable } from '../../src/db/query.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// Group commit on the store (src/db/batch.ts): items submitted together share one transaction,
// each caller gets its own result after the shared COMMIT, and an item that fails takes back
// only its own writes.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
  await t.exec('CREATE TABLE bt (k TEXT PRIMARY KEY, v INTEGER NOT NULL)');
});
afterEach(() => t.close());

interface Item {
  keys: string[];
  /** Refused with nothing written. */
  refuse?: boolean;
}

const keys = async () => (await t.ctx.store.all<{ k: string }>(sql`SELECT k FROM bt ORDER BY k`)).map((r) => r.k);

function batcher(opts: { max?: number } = {}) {
  const sizes: number[] = [];
  let applied = 0;
  const b = t.ctx.store.batcher<Item, string>(
    'test',
    async (tx: Queryable, items) => {
      sizes.push(items.length);
      const out: BatchResult<string>[] = [];
      for (const item of items) {
        applied++;
        if (item.refuse) {
          out.push({ ok: false, error: new Error(`refused ${item.keys.join()}`) });
          continue;
        }
        for (const k of item.keys) await tx.run(sql`INSERT INTO bt (k, v) VALUES (${k}, ${1})`);
        out.push({ ok: true, value: item.keys.join() });
      }
      return out;
    },
    opts,
  );
  return { b, sizes, applied: () => applied };
}

describe('the store batcher', () => {
  it('runs what is submitted together in one transaction, each caller getting its own result', async () => {
    const { b, sizes } = batcher();
    const results = await Promise.allSettled([
      b.run({ keys: ['a'] }),
      b.run({ keys: ['b'], refuse: true }),
      b.run({ keys: ['c', 'd'] }),
    ]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([
      'a',
      'refused b',
      'c,d',
    ]);
    expect(sizes).toEqual([3]);
    expect(b.stats).toEqual({ batches: 1, items: 3, reruns: 0 });
    expect(await keys()).toEqual(['a', 'c', 'd']);
  });

  it('settles a caller only after the COMMIT: what it was told is there is read back', async () => {
    const { b } = batcher();
    const seen = await Promise.all(
      ['x', 'y'].map((k) => b.run({ keys: [k] }).then(() => t.ctx.store.get(sql`SELECT k FROM bt WHERE k = ${k}`))),
    );
    expect(seen).toEqual([{ k: 'x' }, { k: 'y' }]);
  });

  it('an item that fails after some of its writes is taken back alone; the rest of its batch commits', async () => {
    const { b, applied } = batcher();
    const results = await Promise.allSettled([
      b.run({ keys: ['a'] }),
      // c-1 is written, then a fails on the primary key: the whole apply throws.
      b.run({ keys: ['c-1', 'a'] }),
      b.run({ keys: ['b'] }),
      b.run({ keys: ['d'], refuse: true }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/UNIQUE|unique|duplicate/);
    expect((results[3] as PromiseRejectedResult).reason.message).toBe('refused d');
    expect(await keys()).toEqual(['a', 'b']);
    expect(b.stats.reruns).toBe(1);
    // Once whole up to the failing item, then the four one by one (on SQLite first without
    // savepoints, then, since the failing item had written c-1, once more with them).
    expect(applied()).toBe(t.dialect === 'sqlite' ? 8 : 6);
    // The next batch goes the fast way again.
    await b.run({ keys: ['e'] });
    expect(b.stats.reruns).toBe(1);
    expect(await keys()).toEqual(['a', 'b', 'e']);
  });

  it('keeps to max items a batch and runs the rest in the next ones', async () => {
    const { b, sizes } = batcher({ max: 2 });
    await Promise.all(['a', 'b', 'c', 'd', 'e'].map((k) => b.run({ keys: [k] })));
    expect(sizes.reduce((x, y) => x + y, 0)).toBe(5);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(2);
    expect(await keys()).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('an apply answering another number of results than items fails its callers', async () => {
    const b = t.ctx.store.batcher<number, number>('short', async () => []);
    await expect(b.run(1)).rejects.toThrow(/apply returned 0 results for 1 items/);
  });
});
