import { getTableColumns, is } from 'drizzle-orm';
import { getTableConfig, type SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core';
import * as schema from '../schema.js';

// What `msgctl store copy` copies, read from the drizzle schema (src/db/schema.ts) rather than
// listed by hand: a table added there is copied without touching the copy. Tables come in an
// order where every table follows the tables its foreign keys name, so each row's parent is
// already in place when it is inserted (PostgreSQL checks a foreign key at each statement, and
// msgd's are not DEFERRABLE).

/** How a column's values are checked and sent: the SQLite type and its PostgreSQL one (src/db/schema-pg.ts). */
export type ColumnKind = 'integer' | 'text' | 'blob' | 'real';

export interface CopyColumn {
  name: string;
  kind: ColumnKind;
  /** The PostgreSQL array type the batch's values are sent as (`unnest($1::bigint[], …)`). */
  arrayType: string;
}

export interface CopyTable {
  name: string;
  columns: CopyColumn[];
  /** The primary key's columns: how a refused row is named. */
  key: string[];
  /** The identity (autoincrement) column whose sequence must be moved past the copied ids. */
  identity: string | null;
}

const KINDS: Record<string, ColumnKind> = {
  SQLiteInteger: 'integer',
  SQLiteBoolean: 'integer',
  SQLiteTimestamp: 'integer',
  SQLiteText: 'text',
  SQLiteBlobBuffer: 'blob',
  SQLiteReal: 'real',
};

const ARRAY_TYPES: Record<ColumnKind, string> = {
  integer: 'bigint[]',
  text: 'text[]',
  blob: 'bytea[]',
  real: 'double precision[]',
};

function describe(table: SQLiteTable): CopyTable & { parents: string[] } {
  const cfg = getTableConfig(table);
  const columns: CopyColumn[] = [];
  const key: string[] = [];
  let identity: string | null = null;
  for (const c of Object.values(getTableColumns(table)) as SQLiteColumn[]) {
    const kind = KINDS[c.columnType];
    if (!kind) throw new Error(`store copy: no way to copy ${cfg.name}.${c.name} (${c.columnType})`);
    columns.push({ name: c.name, kind, arrayType: ARRAY_TYPES[kind] });
    if (c.primary) key.push(c.name);
    if ((c as unknown as { autoIncrement?: boolean }).autoIncrement) identity = c.name;
  }
  if (key.length === 0 && cfg.primaryKeys[0]) key.push(...cfg.primaryKeys[0].columns.map((c) => c.name));
  const parents = cfg.foreignKeys
    .map((fk) => getTableConfig(fk.reference().foreignTable).name)
    .filter((p) => p !== cfg.name);
  return { name: cfg.name, columns, key, identity, parents };
}

/**
 * Every table of the schema, parents before children; among tables free to go, the order of
 * schema.ts's exports (a module namespace lists them by name). A table referring to itself would be copied in rowid order, parents first as SQLite
 * inserted them (no table does today).
 */
export function copyPlan(): CopyTable[] {
  const tables = (Object.values(schema) as unknown[]).filter((v): v is SQLiteTable => is(v, SQLiteTable)).map(describe);
  const done = new Set<string>();
  const out: CopyTable[] = [];
  while (out.length < tables.length) {
    const next = tables.find((t) => !done.has(t.name) && t.parents.every((p) => done.has(p)));
    if (!next) {
      const left = tables.filter((t) => !done.has(t.name)).map((t) => t.name);
      throw new Error(`store copy: the foreign keys of ${left.join(', ')} form a circle`);
    }
    done.add(next.name);
    const { parents: _, ...table } = next;
    out.push(table);
  }
  return out;
}
