import type Database from 'better-sqlite3';
import type { Db } from '../open.js';
import { prepareOwn } from '../pin.js';
import type { CopyTable } from './plan.js';

// The SQLite side of `msgctl store copy`: one read transaction over the whole copy and its
// checks, so the counts, the rows and the sums are all the database as it stood when the copy
// began, even if an msgctl command writes meanwhile. Integers are read as BigInt
// (safeIntegers): nothing passes through a float on the way.

const q = (name: string) => `"${name.replace(/"/g, '""')}"`;

// Statements of their own (iterated, and in raw, pluck and safe-integer modes), kept for the
// process's life as every statement is (src/db/pin.ts): one per connection and SQL text.
const kept = new Map<Database.Database, Map<string, Database.Statement>>();

function own(db: Database.Database, source: string): Database.Statement {
  let byText = kept.get(db);
  if (!byText) {
    byText = new Map();
    kept.set(db, byText);
  }
  let s = byText.get(source);
  if (!s) {
    s = prepareOwn(db, source).safeIntegers(true);
    byText.set(source, s);
  }
  return s;
}

export interface MoneyFigures {
  /** Sum of ledger amounts per partner id, and over all. */
  ledger: Map<string, bigint>;
  ledgerTotal: bigint;
  /** Each partner's balance. */
  balances: Map<string, bigint>;
}

export class SqliteSource {
  private open = false;

  constructor(private readonly db: Db) {}

  /** Starts the read transaction the copy and its checks read in. */
  begin(): void {
    this.db.sqlite.exec('BEGIN');
    // A deferred transaction takes its snapshot at its first read.
    this.db.sqlite.prepare('SELECT count(*) FROM sqlite_master').get();
    this.open = true;
  }

  end(): void {
    if (!this.open) return;
    this.open = false;
    this.db.sqlite.exec('COMMIT');
  }

  count(table: CopyTable): number {
    const row = this.db.sqlite.prepare(`SELECT count(*) AS n FROM ${q(table.name)}`).get() as { n: number };
    return row.n;
  }

  /** The table's rows in rowid order (SQLite's insertion order for msgd's keys), as arrays in column order. */
  rows(table: CopyTable): IterableIterator<unknown[]> {
    const cols = table.columns.map((c) => q(c.name)).join(', ');
    const stmt = own(this.db.sqlite, `SELECT ${cols} FROM ${q(table.name)} ORDER BY rowid`);
    return stmt.raw(true).iterate() as IterableIterator<unknown[]>;
  }

  /**
   * The number the table's identity sequence must be past: the highest id SQLite handed out,
   * which AUTOINCREMENT keeps in sqlite_sequence even when that row was deleted since, so an
   * id is never used twice.
   */
  lastId(table: CopyTable): bigint {
    if (!table.identity) return 0n;
    const max = own(this.db.sqlite, `SELECT max(${q(table.identity)}) FROM ${q(table.name)}`)
      .pluck(true)
      .get() as bigint | null;
    let seq: bigint | null = null;
    const hasSequence = this.db.sqlite
      .prepare(`SELECT count(*) AS n FROM sqlite_master WHERE name = 'sqlite_sequence'`)
      .get() as { n: number };
    if (hasSequence.n > 0) {
      seq = (own(this.db.sqlite, 'SELECT seq FROM sqlite_sequence WHERE name = ?').pluck(true).get(table.name) ??
        null) as bigint | null;
    }
    const a = max ?? 0n;
    const b = seq ?? 0n;
    return a > b ? a : b;
  }

  money(): MoneyFigures {
    const ledgerRows = own(this.db.sqlite, 'SELECT partner_id, sum(amount) FROM ledger_entries GROUP BY partner_id')
      .raw(true)
      .all() as [string, bigint][];
    const balanceRows = own(this.db.sqlite, 'SELECT id, balance FROM partners').raw(true).all() as [string, bigint][];
    const ledger = new Map(ledgerRows);
    let ledgerTotal = 0n;
    for (const v of ledger.values()) ledgerTotal += v;
    return { ledger, ledgerTotal, balances: new Map(balanceRows) };
  }
}
