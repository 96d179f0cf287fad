import type { Database } from 'better-sqlite3';

// Group commit: work submitted in the same event-loop turn runs in ONE transaction, each
// piece inside its own savepoint (better-sqlite3 nests transactions as savepoints), and
// every caller's promise settles only after the shared COMMIT is durable. With
// synchronous=FULL this turns one fsync per request into one per batch.

interface Pending<T> {
  fn: () => T;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
}

export class GroupCommitter {
  private queue: Pending<any>[] = [];
  private scheduled = false;
  private readonly maxBatch: number;
  batches = 0;
  items = 0;

  // Built once: better-sqlite3's transaction() wrapper is costly to create per call.
  private readonly savepoint: (fn: () => unknown) => unknown;
  private readonly outer: (batch: Pending<any>[], results: { ok: boolean; value: unknown }[]) => void;

  constructor(private db: Database, opts: { maxBatch?: number } = {}) {
    this.maxBatch = opts.maxBatch ?? 512;
    this.savepoint = db.transaction((fn: () => unknown) => fn());
    this.outer = db.transaction((batch: Pending<any>[], results: { ok: boolean; value: unknown }[]) => {
      for (let i = 0; i < batch.length; i++) {
        try {
          results[i] = { ok: true, value: this.savepoint(batch[i].fn) };
        } catch (e) {
          // Some errors (disk full, I/O, out of memory) make SQLite roll back the whole
          // transaction, not just the savepoint: the rest must not run outside it, each
          // committing on its own. Abort the batch; nothing of it is durable.
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
    const results: { ok: boolean; value: unknown }[] = new Array(batch.length);
    try {
      this.outer(batch, results);
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
