import { AppError } from '../../lib/errors.js';
import type { Db } from '../open.js';
import { migrate, migrationStatus } from '../pg/migrate.js';
import type { PgExecutor, PgStore } from '../pg/store.js';
import { sql } from '../sql.js';
import { type CopyTable, copyPlan } from './plan.js';
import { type MoneyFigures, SqliteSource } from './source.js';
import { countRows, firstNonEmpty, insertBatch, moveSequence, SEEDED, targetMoney } from './target.js';

// `msgctl store copy`: a stopped SQLite data directory into an empty PostgreSQL database, in
// ONE PostgreSQL transaction, checked before it commits. Any failure (a value PostgreSQL cannot
// hold, a constraint, a lost connection, a check that does not agree, the process killed)
// rolls the whole copy back, so the target is left as empty as it was found and the copy can
// simply be run again.

/** "msgdcopy" in ASCII: two copies into one database run one after the other, and the second refuses. */
export const COPY_LOCK_KEY = 0x6d736764636f7079n;

/** Rows per INSERT; a batch also ends past BATCH_BYTES of text and blobs. */
const BATCH_ROWS = 2_000;
const BATCH_BYTES = 4 * 1024 * 1024;

export interface CopyProgress {
  table: string;
  done: number;
  total: number;
  /** Rows of every table copied so far, and the rate since the copy began. */
  rowsDone: number;
  rowsPerSecond: number;
}

export interface TableCount {
  table: string;
  source: number;
  target: number;
}

export interface MoneyCheck {
  partners: number;
  ledgerTotalSource: string;
  ledgerTotalTarget: string;
  balanceTotalSource: string;
  balanceTotalTarget: string;
  /** Partners whose ledger sum or balance differs: empty when the copy is right. */
  mismatches: { partner: string; what: 'ledger' | 'balance'; source: string; target: string }[];
}

export interface CopyReport {
  tables: TableCount[];
  money: MoneyCheck;
  /** Migrations applied to the target first (it had no schema, or an older one). */
  migrated: string[];
  rows: number;
  durationMs: number;
  rowsPerSecond: number;
}

/** The copy's checks found a difference: nothing was committed. */
export class CopyMismatchError extends AppError {
  constructor(readonly report: CopyReport) {
    super('copy_mismatch', 'the copy does not match the source, and was rolled back: the target is empty again');
  }
}

/** A value PostgreSQL cannot hold as it is, named by table, column and row. */
function refuse(table: CopyTable, column: string, row: unknown[], why: string): never {
  const id = table.key.length
    ? table.key.map((k) => `${k} ${String(row[table.columns.findIndex((c) => c.name === k)])}`).join(', ')
    : 'without a key';
  throw new AppError(
    'unsupported_value',
    `cannot copy ${table.name}.${column} of the row with ${id}: ${why}; nothing was copied (fix the value in the SQLite database, or remove the row, and run the copy again)`,
  );
}

/** A SQLite value as PostgreSQL receives it in an array, checked against its column's type. */
function convert(table: CopyTable, i: number, row: unknown[]): { value: unknown; bytes: number } {
  const col = table.columns[i];
  const v = row[i];
  if (v === null) return { value: null, bytes: 0 };
  switch (col.kind) {
    case 'integer':
      if (typeof v === 'bigint') return { value: v.toString(), bytes: 8 };
      return refuse(
        table,
        col.name,
        row,
        `an integer column holds ${typeof v === 'number' ? `the real number ${v}` : `a ${kindOf(v)}`}`,
      );
    case 'real':
      if (typeof v === 'number' || typeof v === 'bigint') return { value: String(v), bytes: 8 };
      return refuse(table, col.name, row, `a real column holds a ${kindOf(v)}`);
    case 'text':
      if (typeof v !== 'string') return refuse(table, col.name, row, `a text column holds a ${kindOf(v)}`);
      // SQLite text may hold U+0000; PostgreSQL's text cannot, and dropping it would change the value.
      if (v.includes('\u0000')) {
        return refuse(
          table,
          col.name,
          row,
          `the text holds a NUL character (U+0000) at offset ${v.indexOf('\u0000')}, which PostgreSQL text cannot store`,
        );
      }
      return { value: v, bytes: v.length };
    case 'blob':
      if (Buffer.isBuffer(v)) return { value: v, bytes: v.length };
      return refuse(table, col.name, row, `a blob column holds a ${kindOf(v)}`);
  }
}

function kindOf(v: unknown): string {
  if (Buffer.isBuffer(v)) return 'blob';
  if (typeof v === 'bigint') return 'integer';
  if (typeof v === 'number') return 'real number';
  return typeof v === 'string' ? 'text value' : typeof v;
}

/** Tables whose rows the migrations seed go last: the rows copied before them move those values (triggers). */
function inOrder(): CopyTable[] {
  const plan = copyPlan();
  return [...plan.filter((t) => !SEEDED[t.name]), ...plan.filter((t) => SEEDED[t.name])];
}

export interface CopyOptions {
  onProgress?: (p: CopyProgress) => void;
  /** Rows per INSERT (default 2,000). */
  batchRows?: number;
}

/** Refuses a target that holds msgd's rows; migrates one without the schema, or with an older one. */
async function prepareTarget(target: PgStore, url: string, tables: CopyTable[]): Promise<string[]> {
  // msgd's text is Unicode; another encoding would refuse an emoji half-way, or (SQL_ASCII)
  // store bytes without checking them.
  const encoding = await target.get<{ e: string }>(
    sql`SELECT pg_encoding_to_char(encoding) AS e FROM pg_database WHERE datname = current_database()`,
  );
  if (encoding?.e !== 'UTF8') {
    throw new AppError(
      'target_encoding',
      `the target database's encoding is ${encoding?.e ?? 'unknown'}, not UTF8: create it with ENCODING 'UTF8' (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0)`,
    );
  }
  const status = await migrationStatus(url);
  if (status.tooNew) await migrate(url); // throws SchemaTooNewError, changing nothing
  await refuseNonEmpty(target, tables);
  return status.pending.length ? migrate(url) : [];
}

async function refuseNonEmpty(db: PgExecutor, tables: CopyTable[]): Promise<void> {
  const table = await firstNonEmpty(db, tables);
  if (table) {
    throw new AppError(
      'target_not_empty',
      `the target database is not empty (table ${table} has rows): store copy only copies into an empty database, so nothing is overwritten or merged`,
    );
  }
}

export async function copySqliteToPg(
  db: Db,
  target: PgStore,
  url: string,
  opts: CopyOptions = {},
): Promise<CopyReport> {
  const tables = inOrder();
  const batchRows = opts.batchRows ?? BATCH_ROWS;
  const migrated = await prepareTarget(target, url, tables);
  const source = new SqliteSource(db);
  source.begin();
  try {
    const totals = new Map(tables.map((t) => [t.name, source.count(t)]));
    const started = performance.now();
    let rowsDone = 0;
    const rate = () => rowsDone / Math.max((performance.now() - started) / 1000, 0.001);
    const report = await target.withAdvisoryXactLock(
      COPY_LOCK_KEY,
      async (tx) => {
        // Again under the lock: another copy may have filled it while this one waited.
        await refuseNonEmpty(tx, tables);
        for (const table of tables) {
          const total = totals.get(table.name) ?? 0;
          let done = 0;
          const progress = () => opts.onProgress?.({ table: table.name, done, total, rowsDone, rowsPerSecond: rate() });
          progress();
          let batch: unknown[][] = table.columns.map(() => []);
          let size = 0;
          let bytes = 0;
          const flush = async () => {
            if (size === 0) return;
            try {
              await tx.run(insertBatch(table, batch));
            } catch (err) {
              throw new AppError(
                'copy_failed',
                `copying ${table.name} (rows ${done + 1}-${done + size} of ${total}) failed, and nothing was copied: ${(err as Error).message}`,
              );
            }
            done += size;
            rowsDone += size;
            batch = table.columns.map(() => []);
            size = 0;
            bytes = 0;
            progress();
          };
          for (const row of source.rows(table)) {
            for (let i = 0; i < row.length; i++) {
              const c = convert(table, i, row);
              batch[i].push(c.value);
              bytes += c.bytes;
            }
            size++;
            if (size >= batchRows || bytes >= BATCH_BYTES) await flush();
          }
          await flush();
          await moveSequence(tx, table, source.lastId(table));
        }
        return check(tx, tables, totals, source.money(), migrated, rowsDone, performance.now() - started);
      },
      // The copy reads SQLite as it goes: it cannot simply run again on a serialization failure.
      { maxAttempts: 1 },
    );
    return report;
  } finally {
    source.end();
  }
}

/** Counts and money on both sides, inside the copy's transaction: a difference rolls it back. */
async function check(
  tx: PgExecutor,
  tables: CopyTable[],
  totals: Map<string, number>,
  src: MoneyFigures,
  migrated: string[],
  rows: number,
  ms: number,
): Promise<CopyReport> {
  const counts: TableCount[] = [];
  for (const t of tables)
    counts.push({ table: t.name, source: totals.get(t.name) ?? 0, target: await countRows(tx, t) });
  const dst = await targetMoney(tx);
  const mismatches: MoneyCheck['mismatches'] = [];
  const compare = (what: 'ledger' | 'balance', a: Map<string, bigint>, b: Map<string, bigint>) => {
    for (const p of new Set([...a.keys(), ...b.keys()])) {
      const s = a.get(p);
      const t = b.get(p);
      if (s !== t) mismatches.push({ partner: p, what, source: s?.toString() ?? '-', target: t?.toString() ?? '-' });
    }
  };
  compare('ledger', src.ledger, dst.ledger);
  compare('balance', src.balances, dst.balances);
  const sum = (m: Map<string, bigint>) => [...m.values()].reduce((x, y) => x + y, 0n);
  const money: MoneyCheck = {
    partners: src.balances.size,
    ledgerTotalSource: src.ledgerTotal.toString(),
    ledgerTotalTarget: dst.ledgerTotal.toString(),
    balanceTotalSource: sum(src.balances).toString(),
    balanceTotalTarget: sum(dst.balances).toString(),
    mismatches,
  };
  const report: CopyReport = {
    tables: counts,
    money,
    migrated,
    rows,
    durationMs: Math.round(ms),
    rowsPerSecond: Math.round(rows / Math.max(ms / 1000, 0.001)),
  };
  const ok =
    counts.every((c) => c.source === c.target) &&
    mismatches.length === 0 &&
    money.ledgerTotalSource === money.ledgerTotalTarget &&
    money.balanceTotalSource === money.balanceTotalTarget;
  if (!ok) throw new CopyMismatchError(report);
  return report;
}
