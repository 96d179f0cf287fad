import type { Queryable } from './query.js';

// Group commit on a store: the batcher each store gives (src/db/query.ts for SQLite,
// src/db/pg/store.ts for PostgreSQL), over the queue and settling they share here.
//
// A batch operation takes every item waiting and answers one result per item, in order: a
// value, or an error for that item alone (a 402, say), which must have written nothing. Items
// waiting when a batch starts run in one transaction, so its COMMIT (and on SQLite with
// synchronous=FULL, its fsync) is shared by all of them. When `apply` throws as a whole, the
// transaction is rolled back and the items run again one by one, each taking back only its own
// writes when it fails: `apply` must therefore be safe to run twice, and do nothing outside the
// database that cannot happen twice. Every caller's promise settles only after the COMMIT (or
// with the error that lost the batch: a COMMIT that failed, a storage fault).
//
// SQLite: a batch takes the store's write lock and runs in an event-loop turn of its own, as a
// transaction does, so what was submitted in one turn shares a batch. The items' rerun goes
// without savepoints first, reading total_changes() around each item: one that threw having
// changed no row needs nothing taken back. Only when an item threw after writing is the rerun
// rolled back and run once more with a savepoint per item.
// PostgreSQL: one batch in flight per batcher takes the whole queue (up to `max`); a second
// starts beside it only while the queue holds more than that. A serialization failure or a
// deadlock runs the whole batch again (the store's transaction does); the rerun gives each
// item a savepoint.

/** One item's outcome: its value, or the error it alone is refused with. */
export type BatchResult<O> = { ok: true; value: O } | { ok: false; error: unknown };

/** Applies a batch in the transaction `tx`: one result per item, in the items' order. */
export type BatchFn<I, O> = (tx: Queryable, items: readonly I[]) => Promise<BatchResult<O>[]>;

export interface BatcherOptions {
  /** Items in one batch at most (default 256). */
  max?: number;
}

/** What a batcher did, for tests and the operator. */
export interface BatchStats {
  /** Batches committed. */
  batches: number;
  /** Items in them. */
  items: number;
  /** Batches whose apply threw as a whole and whose items ran again one by one. */
  reruns: number;
}

export interface Batcher<I, O> {
  readonly name: string;
  /** Submits an item: resolves with its value after the COMMIT of its batch, or rejects with its error. */
  run(item: I): Promise<O>;
  readonly stats: BatchStats;
}

export const DEFAULT_BATCH_MAX = 256;

export interface PendingItem<I, O> {
  item: I;
  resolve: (v: O) => void;
  reject: (e: unknown) => void;
}

/** The waiting items of a batcher, and how its batches settle them: shared by both stores. */
export abstract class BatchQueue<I, O> implements Batcher<I, O> {
  readonly stats: BatchStats = { batches: 0, items: 0, reruns: 0 };
  protected queue: PendingItem<I, O>[] = [];
  protected readonly max: number;

  constructor(
    readonly name: string,
    protected readonly apply: BatchFn<I, O>,
    opts: BatcherOptions = {},
  ) {
    this.max = opts.max ?? DEFAULT_BATCH_MAX;
    if (!Number.isInteger(this.max) || this.max < 1) throw new RangeError(`batcher ${name}: max must be ≥ 1`);
  }

  run(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.submitted();
    });
  }

  /** An item was queued: start a batch when the store's rule says so. */
  protected abstract submitted(): void;

  /** The next batch's items, taken off the queue. */
  protected take(): PendingItem<I, O>[] {
    return this.queue.splice(0, this.max);
  }

  /** apply's answer for the whole batch, checked to hold one result per item. */
  protected async applyAll(tx: Queryable, items: readonly I[]): Promise<BatchResult<O>[]> {
    const results = await this.apply(tx, items);
    if (!Array.isArray(results) || results.length !== items.length) {
      throw new Error(`batcher ${this.name}: apply returned ${results?.length} results for ${items.length} items`);
    }
    return results;
  }

  /** Settles every caller of a committed batch with its own result. */
  protected settle(batch: PendingItem<I, O>[], results: BatchResult<O>[]): void {
    this.stats.batches++;
    this.stats.items += batch.length;
    for (let i = 0; i < batch.length; i++) {
      const r = results[i];
      if (r.ok) batch[i].resolve(r.value);
      else batch[i].reject(r.error);
    }
  }

  /** The batch was lost as a whole (its COMMIT failed, the storage failed): nothing of it is durable. */
  protected fail(batch: PendingItem<I, O>[], e: unknown): void {
    for (const p of batch) p.reject(e);
  }
}

/** Thrown by a Tx used after its transaction ended: a statement that was not awaited inside it. */
