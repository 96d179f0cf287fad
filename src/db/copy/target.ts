import type { PgExecutor } from '../pg/store.js';
import { sql, type Sql } from '../sql.js';
import type { CopyTable } from './plan.js';
import type { MoneyFigures } from './source.js';

// The PostgreSQL side of `msgctl store copy`: every statement runs on the copy's one
// transaction (`tx`), so what it inserted disappears with a ROLLBACK.

const ident = (name: string) => sql.raw(`"${name.replace(/"/g, '""')}"`);

/**
 * Rows a freshly migrated database holds already: the settings_version counter
 * (migrations/pg/0001_settings_version_autovacuum.sql). A copy overwrites them with the
 * source's; any other row means the database is in use.
 */
export const SEEDED: Record<string, { column: string; values: string[] }> = {
  meta: { column: 'key', values: ['settings_version'] },
};

/** The first table of `tables` that exists in `db` and holds a row msgd wrote, or null. */
export async function firstNonEmpty(db: PgExecutor, tables: CopyTable[]): Promise<string | null> {
  for (const t of tables) {
    const exists = await db.get<{ r: string | null }>(sql`SELECT to_regclass(${`public."${t.name}"`})::text AS r`);
    if (!exists?.r) continue;
    const seed = SEEDED[t.name];
    const where = seed
      ? sql` WHERE ${ident(seed.column)} NOT IN (${sql.join(seed.values.map((v) => sql`${v}`))})`
      : sql``;
    const row = await db.get<{ one: number }>(sql`SELECT 1 AS one FROM ${ident(t.name)}${where} LIMIT 1`);
    if (row) return t.name;
  }
  return null;
}

/**
 * One batch as one statement: a column's values are one array parameter, unnested into rows
 * (`INSERT … SELECT * FROM unnest($1::bigint[], $2::text[], …)`), so a batch of any size is
 * as many parameters as the table has columns. A table with rows the migrations seed takes
 * the source's values for them.
 */
export function insertBatch(table: CopyTable, columns: unknown[][]): Sql {
  const names = sql.join(table.columns.map((c) => ident(c.name)));
  const arrays = sql.join(table.columns.map((c, i) => sql`${columns[i]}::${sql.raw(c.arrayType)}`));
  const seed = SEEDED[table.name];
  const conflict = seed
    ? sql` ON CONFLICT (${sql.join(table.key.map(ident))}) DO UPDATE SET ${sql.join(
        table.columns
          .filter((c) => !table.key.includes(c.name))
          .map((c) => sql`${ident(c.name)} = EXCLUDED.${ident(c.name)}`),
      )}`
    : sql``;
  return sql`INSERT INTO ${ident(table.name)} (${names}) SELECT * FROM unnest(${arrays})${conflict}`;
}

/** Moves the table's identity sequence so that the next id is `last` + 1. */
export async function moveSequence(tx: PgExecutor, table: CopyTable, last: bigint): Promise<void> {
  if (!table.identity || last < 1n) return;
  await tx.get(
    sql`SELECT setval(pg_get_serial_sequence(${`public."${table.name}"`}, ${table.identity}), ${last.toString()}::bigint, true)`,
  );
}

export async function countRows(tx: PgExecutor, table: CopyTable): Promise<number> {
  const row = await tx.get<{ n: string }>(sql`SELECT count(*)::text AS n FROM ${ident(table.name)}`);
  return Number(row?.n ?? 0);
}

/** The same figures as SqliteSource.money(), summed in SQL and read as text: never a float. */
export async function targetMoney(tx: PgExecutor): Promise<MoneyFigures> {
  const ledgerRows = await tx.all<{ p: string; s: string }>(
    sql`SELECT partner_id AS p, sum(amount)::text AS s FROM ledger_entries GROUP BY partner_id`,
  );
  const balanceRows = await tx.all<{ id: string; b: string }>(sql`SELECT id, balance::text AS b FROM partners`);
  const total = await tx.get<{ s: string | null }>(sql`SELECT sum(amount)::text AS s FROM ledger_entries`);
  return {
    ledger: new Map(ledgerRows.map((r) => [r.p, BigInt(r.s)])),
    ledgerTotal: BigInt(total?.s ?? '0'),
    balances: new Map(balanceRows.map((r) => [r.id, BigInt(r.b)])),
  };
}
