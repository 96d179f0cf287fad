import type { Database } from 'better-sqlite3';
import { stmt } from './stmt.js';

// Group commit: work submitted in the same event-loop turn runs in ONE transaction, and every
// caller's promise settles only after the shared COMMIT is durable. With synchronous=FULL this
// turns one fsync per request into one per batch.
//
// A piece that throws must take back only its own writes. A savepoint per piece does that, but
// costs as much as a row write (SQLite copies each page the piece first touches into its
// statement journal). So a batch first runs without savepoints, reading SQLite's
// total_changes() before each piece: a piece that throws having changed no row (a 402 refused
// by the debit's WHERE, a replayed Idempotency-Key, a statement that failed as a whole) needs
// nothing taken back. Only when a piece throws after some of its writes is the batch rolled
// back and run again, each piece in its own savepoint (better-sqlite3 nests transactions as
// savepoints). Pieces must therefore be safe to run twice (their effects outside the database
// happen again on the second run), and write only through INSERT, UPDATE and DELETE, which
// total_changes() counts (not DDL or PRAGMA).

interface Pending<T> {
  fn: () => T;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
}

type Result = { ok: boolean; value: unknown };

/** Thrown out of the fast run to roll it back: a piece failed after writing. */
class PartialPiece extends Error {}

export class GroupCommitter {
  private queue: Pending<any>[] = [];
  private scheduled = false;
  private readonly maxBatch: number;
  batches = 0;
  items = 0;

  /** Batches run again piece by piece in savepoints, after a piece threw midway through its writes. */
  reruns = 0;

  // Built once: better-sqlite3's transaction() wrapper is costly to create per call.
  private readonly savepoint: (fn: () => unknown) => unknown;
  private readonly fast: (batch: Pending<any>[], results: Result[]) => void;
  private readonly careful: (batch: Pending<any>[], results: Result[]) => void;
  private readonly totalChanges: () => number;

  constructor(
    private db: Database,
    opts: { maxBatch?: number } = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 512;
    this.savepoint = db.transaction((fn: () => unknown) => fn());
    // A statement of its own: the connection's prepare() shares one per SQL text, and a mode
    // set on a shared one (pluck) is reset by the next caller of the same text.
    const changes = stmt<[], { n: number }>(db, 'SELECT total_changes() AS n');
    this.totalChanges = () => changes.get()!.n;
    this.fast = db.transaction((batch: Pending<any>[], results: Result[]) => {
      for (let i = 0; i < batch.length; i++) {
        const before = this.totalChanges();
        try {
          results[i] = { ok: true, value: batch[i].fn() };
        } catch (e) {
          // Some errors (disk full, I/O, out of memory) make SQLite roll back the whole
          // transaction: the rest must not run outside it, each committing on its own.
          if (!this.db.inTransaction) throw e;
          if (this.totalChanges() !== before) throw new PartialPiece();
          results[i] = { ok: false, value: e };
        }
      }
    }).immediate;
    this.careful = db.transaction((batch: Pending<any>[], results: Result[]) => {
      for (let i = 0; i < batch.length; i++) {
        try {
          results[i] = { ok: true, value: this.savepoint(batch[i].fn) };
        } catch (e) {
          if (!this.db.inTransaction) throw e;
          results[i] = { ok: false, value: e };
        }
      }
    }).immediate;
  }

  run<T>(fn: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush() {
    this.scheduled = false;
    while (this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.commit(batch);
    }
  }

  private commit(batch: Pending<any>[]) {
    let results: Result[] = new Array(batch.length);
    try {
      try {
        this.fast(batch, results);
      } catch (e) {
        if (!(e instanceof PartialPiece)) throw e;
        // Rolled back whole: run it again with a savepoint around each piece.
        this.reruns++;
        results = new Array(batch.length);
        this.careful(batch, results);
      }
    } catch (e) {
      // The batch was aborted or the COMMIT itself failed: nothing of it is durable.
      for (const p of batch) p.reject(e);
      return;
    }
    this.batches++;
    this.items += batch.length;
    for (let i = 0; i < batch.length; i++) {
      const r = results[i];
      if (r.ok) batch[i].resolve(r.value);
      else batch[i].reject(r.value);
    }
  }
}
