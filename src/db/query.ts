import type { Database, Statement } from 'better-sqlite3';
import type { Db } from './open.js';
import { render, type Dialect, type Sql } from './sql.js';
import { rawStmt, stmt } from './stmt.js';

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

/** A store: SQLite's below, PostgreSQL's in src/db/pg/store.ts (PgStore). */
export interface Store extends Queryable {
  readonly dialect: Dialect;
  /**
   * One transaction: committed when `fn`'s promise resolves, rolled back when it rejects (the
   * rejection is passed on). `fn` awaits only its Tx: a call out of the process inside it holds
   * every other writer back (SQLite) or a pooled connection and its row locks (PostgreSQL).
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
}

/** Thrown by a Tx used after its transaction ended: a statement that was not awaited inside it. */
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

/** The store over msgd's SQLite connection: one per connection, so its transactions share one lock. */
export function store(db: Db): Store {
  let s = stores.get(db.sqlite);
  if (s === undefined) {
    s = new SqliteStore(db.sqlite);
    stores.set(db.sqlite, s);
  }
  return s;
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
