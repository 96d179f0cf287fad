import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getTableName, is } from 'drizzle-orm';
import { PgTable } from 'drizzle-orm/pg-core';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate as migrateSqlite } from '../../src/db/migrate.js';
import { openDb } from '../../src/db/open.js';
import { migrate as migratePg } from '../../src/db/pg/migrate.js';
import * as pgSchema from '../../src/db/schema-pg.js';
import { freshDatabase, withClient } from './helpers.js';

// One schema, two stores: a SQLite file migrated by migrations/ and a PostgreSQL database
// migrated by migrations/pg/ must hold the same tables, columns (type class, nullability,
// default, key), indexes, foreign keys and triggers. The differences below are the only ones
// allowed; anything else (a column added to schema.ts without `npm run db:generate:pg`, a
// hand-written SQLite trigger not ported) fails here.

type Cls = 'integer' | 'text' | 'real' | 'blob';
interface Column {
  cls: Cls;
  notNull: boolean;
  default: string | null;
  /** Place in the primary key (1-based), 0 when not in it. */
  pk: number;
  /** An autoincrement (SQLite) or identity (PostgreSQL) key. */
  generated: boolean;
}
interface Index {
  unique: boolean;
  partial: boolean;
  columns: string[];
}
interface ForeignKey {
  columns: string[];
  table: string;
  to: string[];
  onDelete: string;
}
interface Table {
  columns: Record<string, Column>;
  indexes: Record<string, Index>;
  foreignKeys: ForeignKey[];
}
interface Schema {
  tables: Record<string, Table>;
  triggers: string[];
}

/** The tables the migrators keep for themselves. */
const BOOKKEEPING = ['__drizzle_migrations'];

/** The differences PostgreSQL has on purpose (src/db/schema-pg.ts says why). */
function expectedOnPostgres(sqlite: Schema): Schema {
  const want = structuredClone(sqlite);
  const jobs = want.tables.jobs.indexes;
  // The claim reads a partial index in claim order; the other states read jobs_state.
  jobs.jobs_claim = { unique: false, partial: true, columns: ['priority', 'run_at', 'id'] };
  jobs.jobs_kind_claim = { unique: false, partial: true, columns: ['kind', 'priority', 'run_at', 'id'] };
  jobs.jobs_state = { unique: false, partial: true, columns: ['state', 'priority', 'run_at', 'id'] };
  return want;
}

function sqlDefault(v: string | null): string | null {
  if (v === null) return null;
  // SQLite keeps a boolean-mode column's default as written (false); it is stored 0/1 on both.
  if (v === 'false') return '0';
  if (v === 'true') return '1';
  return v;
}

function classOf(declared: string): Cls {
  const t = declared.toLowerCase();
  if (t === 'integer' || t === 'bigint') return 'integer';
  if (t === 'text') return 'text';
  if (t === 'blob' || t === 'bytea') return 'blob';
  if (t === 'real' || t === 'double precision') return 'real';
  throw new Error(`no type class for ${declared}`);
}

function describeSqlite(path: string): Schema {
  const db = openDb(path);
  try {
    migrateSqlite(db);
    const q = <T>(sql: string, ...args: unknown[]) => db.sqlite.prepare(sql).all(...args) as T[];
    const tables: Record<string, Table> = {};
    const names = q<{ name: string; sql: string }>(
      `SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`,
    ).filter((t) => !BOOKKEEPING.includes(t.name));
    for (const { name, sql } of names) {
      const columns: Record<string, Column> = {};
      for (const c of q<{ name: string; type: string; notnull: number; dflt_value: string | null; pk: number }>(
        `SELECT * FROM pragma_table_info(?)`,
        name,
      )) {
        columns[c.name] = {
          cls: classOf(c.type),
          notNull: c.notnull === 1 || c.pk > 0,
          default: sqlDefault(c.dflt_value),
          pk: c.pk,
          generated: c.pk > 0 && new RegExp(`\`${c.name}\` integer PRIMARY KEY AUTOINCREMENT`, 'i').test(sql),
        };
      }
      const indexes: Record<string, Index> = {};
      for (const ix of q<{ name: string; unique: number; origin: string; partial: number }>(
        `SELECT * FROM pragma_index_list(?)`,
        name,
      )) {
        if (ix.origin === 'pk') continue; // the primary key, compared as columns' pk
        indexes[ix.name] = {
          unique: ix.unique === 1,
          partial: ix.partial === 1,
          columns: q<{ name: string }>(`SELECT name FROM pragma_index_info(?) ORDER BY seqno`, ix.name).map(
            (c) => c.name,
          ),
        };
      }
      const byId = new Map<number, ForeignKey>();
      for (const fk of q<{ id: number; seq: number; table: string; from: string; to: string; on_delete: string }>(
        `SELECT * FROM pragma_foreign_key_list(?) ORDER BY id, seq`,
        name,
      )) {
        const f = byId.get(fk.id) ?? { columns: [], table: fk.table, to: [], onDelete: fk.on_delete.toLowerCase() };
        f.columns.push(fk.from);
        f.to.push(fk.to);
        byId.set(fk.id, f);
      }
      tables[name] = { columns, indexes, foreignKeys: sortFks([...byId.values()]) };
    }
    const triggers = q<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name`).map(
      (t) => t.name,
    );
    return { tables, triggers };
  } finally {
    db.close();
  }
}

function sortFks(fks: ForeignKey[]): ForeignKey[] {
  return fks.sort((a, b) => a.columns.join().localeCompare(b.columns.join()));
}

async function describePostgres(url: string): Promise<Schema & { collations: string[] }> {
  return withClient(url, async (c) => {
    const tables: Record<string, Table> = {};
    const cols = await c.query<{
      table_name: string;
      column_name: string;
      data_type: string;
      is_nullable: string;
      column_default: string | null;
      is_identity: string;
      collation_name: string | null;
    }>(
      `SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity, collation_name
         FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
    );
    const pks = await c.query<{ table_name: string; column_name: string; pos: number }>(
      `SELECT t.relname AS table_name, a.attname AS column_name, k.pos::int AS pos
         FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
         CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, pos)
         JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
        WHERE i.indisprimary AND t.relnamespace = current_schema()::regnamespace`,
    );
    const pkPos = new Map(pks.rows.map((r) => [`${r.table_name}.${r.column_name}`, r.pos]));
    const collations = new Set<string>();
    for (const r of cols.rows) {
      if (BOOKKEEPING.includes(r.table_name)) continue;
      tables[r.table_name] ??= { columns: {}, indexes: {}, foreignKeys: [] };
      if (r.data_type === 'text') collations.add(r.collation_name ?? '(database default)');
      const pk = pkPos.get(`${r.table_name}.${r.column_name}`) ?? 0;
      tables[r.table_name].columns[r.column_name] = {
        cls: classOf(r.data_type),
        notNull: r.is_nullable === 'NO',
        // '{}'::text, 0: the literal as SQLite writes it.
        default: r.column_default === null ? null : r.column_default.replace(/::(text|bigint)$/, ''),
        pk,
        generated: r.is_identity === 'YES',
      };
    }
    const ixs = await c.query<{
      table_name: string;
      index_name: string;
      unique: boolean;
      partial: boolean;
      columns: string[];
    }>(
      `SELECT t.relname AS table_name, ic.relname AS index_name, i.indisunique AS unique,
              i.indpred IS NOT NULL AS partial,
              array(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, pos)
                      JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.pos)::text[] AS columns
         FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
        WHERE NOT i.indisprimary AND t.relnamespace = current_schema()::regnamespace`,
    );
    for (const r of ixs.rows) {
      if (BOOKKEEPING.includes(r.table_name)) continue;
      tables[r.table_name].indexes[r.index_name] = { unique: r.unique, partial: r.partial, columns: r.columns };
    }
    const fks = await c.query<{
      table_name: string;
      columns: string[];
      target: string;
      to: string[];
      on_delete: string;
    }>(
      `SELECT t.relname AS table_name, f.relname AS target,
              array(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY u(n, p)
                      JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n ORDER BY u.p)::text[] AS columns,
              array(SELECT a.attname FROM unnest(k.confkey) WITH ORDINALITY u(n, p)
                      JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n ORDER BY u.p)::text[] AS to,
              CASE k.confdeltype WHEN 'a' THEN 'no action' WHEN 'c' THEN 'cascade' WHEN 'n' THEN 'set null'
                WHEN 'r' THEN 'restrict' WHEN 'd' THEN 'set default' END AS on_delete
         FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid JOIN pg_class f ON f.oid = k.confrelid
        WHERE k.contype = 'f' AND t.relnamespace = current_schema()::regnamespace`,
    );
    for (const r of fks.rows) {
      tables[r.table_name].foreignKeys.push({ columns: r.columns, table: r.target, to: r.to, onDelete: r.on_delete });
    }
    for (const t of Object.values(tables)) sortFks(t.foreignKeys);
    const triggers = await c.query<{ tgname: string }>(
      `SELECT tgname FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid
        WHERE NOT g.tgisinternal AND t.relnamespace = current_schema()::regnamespace ORDER BY tgname`,
    );
    return { tables, triggers: triggers.rows.map((r) => r.tgname), collations: [...collations] };
  });
}

describe('the PostgreSQL schema', () => {
  const db = freshDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'msgd-parity-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has every table, column, key, index, foreign key and trigger of the SQLite schema', async () => {
    const sqlite = describeSqlite(join(dir, 'msgd.db'));
    await migratePg(db.url);
    const { collations, ...postgres } = await describePostgres(db.url);

    // Sanity: the SQLite side is the real schema, not an empty description.
    expect(Object.keys(sqlite.tables)).toContain('jobs');
    expect(sqlite.triggers).toContain('settings_version_prices_update');
    expect(sqlite.tables.messages.indexes.messages_provider).toEqual({
      unique: false,
      partial: true,
      columns: ['provider_message_id'],
    });

    expect(postgres).toEqual(expectedOnPostgres(sqlite));
    // Text compares byte by byte on both (SQLite's BINARY).
    expect(collations).toEqual(['C']);
  });

  it('exports a PostgreSQL table for every table of schema.ts', () => {
    const exported = Object.values(pgSchema)
      .filter((v) => is(v, PgTable))
      .map((t) => getTableName(t as PgTable));
    const declared = pgSchema.SQLITE_TABLES.map((t) => getTableConfig(t).name);
    expect(exported.sort()).toEqual([...declared].sort());
  });
});
