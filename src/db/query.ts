import type { Database, Statement } from 'better-sqlite3';
import type { Db } from './open.js';
import { isRetryable, StorageUnavailableError } from './pg/errors.js';
import { render, sql, type Dialect, type Sql } from './sql.js';
import { rawStmt, stmt } from './stmt.js';
import {
  type Batcher,
  type BatcherOptions,
  type BatchFn,
  BatchQueue,
  type BatchResult,
  type PendingItem,
} from './batch.js';

export type { Batcher, BatcherOptions, BatchFn, BatchResult, BatchStats } from './batch.js';

// The one query interface of core, for every store: a query is written once with the sql`` tag
// (src/db/sql.ts) and run through get/all/run, each returning a promise; a transaction is a
// function given its own Tx. SQLite implements it here over the connection msgd already has;
// PostgreSQL's store (src/db/pg/store.ts) implements the same interface over its pool.
//
// On SQLite the statements still run synchronously inside better-sqlite3: a promise here is
// already settled when it is returned. What the interface adds is the write lock. A
// transaction spans awaits, so while one is open, other code must not write on, or read from,
// the connection: it would join or see the open transaction. Transactions therefore take turns
// behind an async lock, and a statement outside one waits for the lock when it is held.
// Code still written against the connection itself (stmt(), db.transaction()) does not take
// the lock, so a transaction must never be open while such code can run. A transaction therefore
// begins at the start of an event-loop turn (after setImmediate), when no other promise
// continuation is waiting, and its function awaits nothing but its Tx, whose promises are
// already settled: it runs to COMMIT before anything else in the process runs. A function that
// awaits anything else (network, timers) would let other code in: the transaction notices that
// it outlived its turn and says so in a process warning (TxOutlivedTurn), a defect to fix.

/** Rows as the columns name them; `changes` as the store counts them for INSERT, UPDATE, DELETE. */
export interface Queryable {
  /** The first row, or undefined. */
  get<R>(q: Sql): Promise<R | undefined>;
  all<R>(q: Sql): Promise<R[]>;
  /**
   * Rows as arrays, the columns in the SELECT's order: for long lists where building a named
   * row per row costs more than the query (`npm run bench`, the /v1 lists; docs/architecture.md
   * "Queries"). The caller names the tuple's types.
   */
  values<T extends unknown[]>(q: Sql): Promise<T[]>;
  run(q: Sql): Promise<{ changes: number }>;
}

/** A transaction's own queries: valid until its function's promise settles, refused after. */
export type Tx = Queryable;

// After COMMIT: what must happen only once a transaction's writes are visible to others (the
// queue waking its workers for the jobs it enqueued). A transaction that spans turns
// (PostgreSQL's: each statement is a round trip) keeps such functions and runs them after its
// COMMIT, or drops them when it rolls back; SQLite's transaction runs within one turn, so what a
// function defers to a later turn already comes after its COMMIT.
const commitHooks = new WeakMap<Queryable, (() => void)[]>();

/** A store's transaction that spans turns: from now on, `whenCommitted(tx, …)` keeps its functions. */
export function holdCommitHooks(tx: Queryable): void {
  commitHooks.set(tx, []);
}

/** The end of such a transaction: its kept functions run when it committed, and are dropped when not. */
export function endCommitHooks(tx: Queryable, committed: boolean): void {
  const fns = commitHooks.get(tx);
  commitHooks.delete(tx);
  if (committed && fns) for (const fn of fns) fn();
}

/**
 * fn runs once the transaction `q` runs in has committed (never if it rolls back), on a store
 * whose transactions span turns; anywhere else (a SQLite transaction, a statement outside any
 * transaction) it runs now, and what it defers to the next turn comes after the commit.
 */
export function whenCommitted(q: Queryable, fn: () => void): void {
  const fns = commitHooks.get(q);
  if (fns) fns.push(fn);
  else fn();
}

/** What fn in a savepoint came to: its value, or the error it alone failed with (its writes rolled back). */
export type SavepointResult<T> = { ok: true; value: T } | { ok: false; error: unknown };

const SAVEPOINT = sql`SAVEPOINT tx_part`;
const ROLLBACK_TO = sql`ROLLBACK TO SAVEPOINT tx_part`;
const RELEASE = sql`RELEASE SAVEPOINT tx_part`;

/**
 * fn in a savepoint of the caller's transaction `tx` (nested in any the caller holds), on either
 * store: when fn throws, what it wrote is rolled back and the transaction goes on without it.
 * An error that is the whole transaction's is passed on instead: the server gone, a
 * serialization failure or deadlock (PostgreSQL's transaction() runs it again whole), or a
 * transaction the store rolled back under the savepoint (SQLite on a full disk).
 */
export async function inSavepoint<T>(tx: Tx, fn: () => Promise<T>): Promise<SavepointResult<T>> {
  await tx.run(SAVEPOINT);
  let value: T;
  try {
    value = await fn();
  } catch (error) {
    if (error instanceof StorageUnavailableError || isRetryable(error)) throw error;
    try {
      await tx.run(ROLLBACK_TO);
      await tx.run(RELEASE);
    } catch {
      throw error;
    }
    return { ok: false, error };
  }
  await tx.run(RELEASE);
  return { ok: true, value };
}

/** A store: SQLite's below, PostgreSQL's in src/db/pg/store.ts (PgStore). */
export interface Store extends Queryable {
  readonly dialect: Dialect;
  /**
   * One transaction: committed when `fn`'s promise resolves, rolled back when it rejects (the
   * rejection is passed on). `fn` awaits only its Tx: a call out of the process inside it holds
   * every other writer back (SQLite) or a pooled connection and its row locks (PostgreSQL).
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Group commit: items handed to the batcher's run() while no batch of it is running go into
   * ONE transaction together, `apply(tx, items)`, and each caller's promise settles after the
   * shared COMMIT with its own result. See "Group commit" below.
   */
  batcher<I, O>(name: string, apply: BatchFn<I, O>, opts?: BatcherOptions): Batcher<I, O>;
}

export class TxEndedError extends Error {
  constructor() {
    super('a statement ran after its transaction ended: await every query inside the transaction');
    this.name = 'TxEndedError';
  }
}

/**
 * Warned of by a SQLite transaction whose function awaited something other than its Tx: code
 * outside the store could have written inside it (see above).
 */
export class TxOutlivedTurnError extends Error {
  constructor() {
    super('a SQLite transaction awaited something other than its own queries: other code could run inside it');
    this.name = 'TxOutlivedTurn';
  }
}

/** A promise chain: acquire() resolves with the release function when every earlier holder has released. */
class AsyncLock {
  private tail: Promise<void> = Promise.resolve();
  held = 0;

  acquire(): Promise<() => void> {
    this.held++;
    let release!: () => void;
    const next = new Promise<void>((r) => (release = r));
    const prev = this.tail;
    this.tail = prev.then(() => next);
    return prev.then(() => () => {
      this.held--;
      release();
    });
  }
}

const stores = new WeakMap<Database, SqliteStore>();
const connections = new WeakMap<Store, Database>();

/** The store over msgd's SQLite connection: one per connection, so its transactions share one lock. */
export function store(db: Db): Store {
  let s = stores.get(db.sqlite);
  if (s === undefined) {
    s = new SqliteStore(db.sqlite);
    stores.set(db.sqlite, s);
    connections.set(s, db.sqlite);
  }
  return s;
}

/** The connection under SQLite's store, for statements a batch runs synchronously inside its transaction. */
export function sqliteConnection(s: Store): Database {
  if (!(s instanceof SqliteStore)) throw new Error(`a ${s.dialect} store has no SQLite connection`);
  return s.connection;
}

/**
 * The SQLite connection under a store made by store(), else undefined: for what src/db keeps
 * per connection (the settings version, src/db/settings-version.ts), never for queries.
 */
export function sqliteConnectionOf(s: Store): Database | undefined {
  return connections.get(s);
}

class SqliteStore implements Store {
  readonly dialect = 'sqlite' as const;
  private readonly lock = new AsyncLock();
  // The statement of a query by its literal parts: a tagged template's strings array is one
  // object per call site, so after the first call a query costs one lookup. Statements come
  // from stmt(), prepared once per text and kept for the connection's life (src/db/pin.ts).
  private readonly byStrings = new WeakMap<readonly string[], Statement>();
  // Raw-mode statements (rows as arrays) apart, from rawStmt(): raw is a mode of the statement.
  private readonly rawByStrings = new WeakMap<readonly string[], Statement>();

  constructor(private readonly db: Database) {}

  statement(q: Sql): Statement {
    return this.cached(this.byStrings, stmt, q);
  }

  rawStatement(q: Sql): Statement {
    return this.cached(this.rawByStrings, rawStmt, q);
  }

  private cached(
    cache: WeakMap<readonly string[], Statement>,
    prepare: (db: Database, text: string) => Statement,
    q: Sql,
  ): Statement {
    let s = cache.get(q.strings);
    if (s === undefined) {
      s = prepare(this.db, render(q, 'sqlite').text);
      cache.set(q.strings, s);
    }
    return s;
  }

  async get<R>(q: Sql): Promise<R | undefined> {
    if (this.lock.held) await this.turn();
    return this.statement(q).get(...q.values) as R | undefined;
  }

  async all<R>(q: Sql): Promise<R[]> {
    if (this.lock.held) await this.turn();
    return this.statement(q).all(...q.values) as R[];
  }

  async values<T extends unknown[]>(q: Sql): Promise<T[]> {
    if (this.lock.held) await this.turn();
    return this.rawStatement(q).all(...q.values) as T[];
  }

  async run(q: Sql): Promise<{ changes: number }> {
    if (this.lock.held) await this.turn();
    return { changes: this.statement(q).run(...q.values).changes };
  }

  batcher<I, O>(name: string, apply: BatchFn<I, O>, opts?: BatcherOptions): Batcher<I, O> {
    return new SqliteBatcher(this, name, apply, opts);
  }

  /** The connection, for statements a batch's apply runs synchronously (src/db/accept-statements.ts). */
  get connection(): Database {
    return this.db;
  }

  /**
   * Runs one batch of `b` under the write lock, in a turn of its own: what was submitted until
   * then (up to its max) shares the transaction. Its callers are settled after the lock is
   * released, so no continuation of theirs runs while a transaction is open.
   */
  async drain<I, O>(b: SqliteBatcher<I, O>): Promise<void> {
    const release = await this.lock.acquire();
    let outcome: (() => void) | undefined;
    try {
      await new Promise<void>((resolve) => setImmediate(resolve));
      const batch = b.begin();
      if (batch.length === 0) return;
      let outlived = false;
      const turnEnd = setImmediate(() => {
        outlived = true;
      });
      try {
        outcome = await this.commitBatch(b, batch);
      } finally {
        clearImmediate(turnEnd);
      }
      if (outlived) process.emitWarning(new TxOutlivedTurnError());
    } finally {
      release();
      outcome?.();
      b.next();
    }
  }

  /** The batch in one transaction, or its items again one by one; returns how to settle its callers. */
  private async commitBatch<I, O>(b: SqliteBatcher<I, O>, batch: PendingItem<I, O>[]): Promise<() => void> {
    const items = batch.map((p) => p.item);
    let results: BatchResult<O>[];
    try {
      results = await this.inTransaction((tx) => b.applyBatch(tx, items));
    } catch (e) {
      if (e instanceof BatchLost) return () => b.lose(batch, e.cause);
      b.stats.reruns++;
      try {
        results = await this.rerun(b, items);
      } catch (e2) {
        return () => b.lose(batch, e2 instanceof BatchLost ? e2.cause : e2);
      }
    }
    return () => b.done(batch, results);
  }

  /**
   * BEGIN IMMEDIATE, fn, COMMIT. When fn throws, the transaction is rolled back and the error
   * passed on; when SQLite rolled it back itself (disk full, I/O), or the COMMIT failed, the
   * error comes as a BatchLost: running the items again could not help.
   */
  private async inTransaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const tx = new SqliteTx(this);
    stmt(this.db, 'BEGIN IMMEDIATE').run();
    try {
      let value: T;
      try {
        value = await fn(tx);
      } catch (e) {
        if (!this.db.inTransaction) throw new BatchLost(e);
        stmt(this.db, 'ROLLBACK').run();
        throw e;
      }
      try {
        stmt(this.db, 'COMMIT').run();
      } catch (e) {
        if (this.db.inTransaction) stmt(this.db, 'ROLLBACK').run();
        throw new BatchLost(e);
      }
      return value;
    } finally {
      tx.ended = true;
    }
  }

  /** The items one by one: without savepoints first, then (after an item failed midway) each in its own. */
  private async rerun<I, O>(b: SqliteBatcher<I, O>, items: readonly I[]): Promise<BatchResult<O>[]> {
    const changes = stmt<[], { n: number }>(this.db, 'SELECT total_changes() AS n');
    try {
      return await this.inTransaction(async (tx) => {
        const results: BatchResult<O>[] = [];
        for (const item of items) {
          const before = changes.get()!.n;
          try {
            results.push((await b.applyBatch(tx, [item]))[0]);
          } catch (e) {
            if (!this.db.inTransaction) throw e;
            if (changes.get()!.n !== before) throw new PartialItem();
            results.push({ ok: false, error: e });
          }
        }
        return results;
      });
    } catch (e) {
      if (!(e instanceof PartialItem)) throw e;
    }
    return this.inTransaction(async (tx) => {
      const results: BatchResult<O>[] = [];
      for (const item of items) {
        stmt(this.db, 'SAVEPOINT batch_item').run();
        try {
          results.push((await b.applyBatch(tx, [item]))[0]);
          stmt(this.db, 'RELEASE batch_item').run();
        } catch (e) {
          if (!this.db.inTransaction) throw e;
          stmt(this.db, 'ROLLBACK TO batch_item').run();
          stmt(this.db, 'RELEASE batch_item').run();
          results.push({ ok: false, error: e });
        }
      }
      return results;
    });
  }

  /** Wait until no transaction is open (a statement outside one, while one is). */
  private async turn(): Promise<void> {
    (await this.lock.acquire())();
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const release = await this.lock.acquire();
    const tx = new SqliteTx(this);
    try {
      // A turn of its own: nothing else is waiting to run while the transaction is open.
      await new Promise<void>((resolve) => setImmediate(resolve));
      let outlived = false;
      const turnEnd = setImmediate(() => {
        outlived = true;
      });
      stmt(this.db, 'BEGIN IMMEDIATE').run();
      try {
        const value = await fn(tx);
        stmt(this.db, 'COMMIT').run();
        if (outlived) process.emitWarning(new TxOutlivedTurnError());
        return value;
      } catch (e) {
        if (this.db.inTransaction) stmt(this.db, 'ROLLBACK').run();
        throw e;
      } finally {
        clearImmediate(turnEnd);
      }
    } finally {
      tx.ended = true;
      release();
    }
  }
}

class SqliteTx implements Tx {
  ended = false;

  constructor(private readonly store: SqliteStore) {}

  private statement(q: Sql): Statement {
    if (this.ended) throw new TxEndedError();
    return this.store.statement(q);
  }

  async get<R>(q: Sql): Promise<R | undefined> {
    return this.statement(q).get(...q.values) as R | undefined;
  }

  async all<R>(q: Sql): Promise<R[]> {
    return this.statement(q).all(...q.values) as R[];
  }

  async values<T extends unknown[]>(q: Sql): Promise<T[]> {
    if (this.ended) throw new TxEndedError();
    return this.store.rawStatement(q).all(...q.values) as T[];
  }

  async run(q: Sql): Promise<{ changes: number }> {
    return { changes: this.statement(q).run(...q.values).changes };
  }
}

/** Thrown out of a rerun without savepoints: an item failed after writing, so it is run again with them. */
class PartialItem extends Error {}

/** The transaction was lost whole (SQLite rolled it back itself, or the COMMIT failed): `cause` is why. */
class BatchLost extends Error {
  constructor(override readonly cause: unknown) {
    super('the batch was lost');
  }
}

/** SQLite's batcher: a batch per turn, under the store's write lock. */
class SqliteBatcher<I, O> extends BatchQueue<I, O> {
  private scheduled = false;

  constructor(
    private readonly store: SqliteStore,
    name: string,
    apply: BatchFn<I, O>,
    opts?: BatcherOptions,
  ) {
    super(name, apply, opts);
  }

  protected submitted(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    void this.store.drain(this);
  }

  /** The batch that starts now: what is queued (up to max). */
  begin(): PendingItem<I, O>[] {
    this.scheduled = false;
    return this.take();
  }

  /** After a batch: the next, if items are waiting and none is scheduled. */
  next(): void {
    if (this.queue.length > 0) this.submitted();
  }

  applyBatch(tx: Tx, items: readonly I[]): Promise<BatchResult<O>[]> {
    return this.applyAll(tx, items);
  }

  done(batch: PendingItem<I, O>[], results: BatchResult<O>[]): void {
    this.settle(batch, results);
  }

  lose(batch: PendingItem<I, O>[], e: unknown): void {
    this.fail(batch, e);
  }
}
