import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';
import { openDb, type Db } from '../../src/db/open.js';
import { migrate } from '../../src/db/migrate.js';
import { openPg, type PgStore } from '../../src/db/pg/store.js';
import { type Store, store as sqliteStore } from '../../src/db/query.js';
import { type Dialect, sql } from '../../src/db/sql.js';
import { testStore } from '../both/helpers.js';
import { takeEmptyDatabase } from '../pg/reuse.js';

// The queue's tests run on the store of the run (test/both/helpers.ts `testStore`): on SQLite a
// real file per test in a temp dir, migrated like production; on PostgreSQL an empty database
// at msgd's current schema (test/pg/reuse.ts). Every connection opened through here is closed,
// and the file removed or the database given back, after the test.

const cleanups: (() => void | Promise<void>)[] = [];

afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

export function onCleanup(fn: () => void | Promise<void>) {
  cleanups.push(fn);
}

/** What a JobQueue goes over: SQLite's connection, or a PostgreSQL store (a pool). */
export type QueueDb = Db | PgStore;

export interface TempDb {
  dialect: Dialect;
  /** The first connection. */
  db: QueueDb;
  /** The store over the first connection: the test's reads and writes. */
  store: Store;
  /** Another connection to the same database (on PostgreSQL a pool of its own), as a second process has. */
  open(): QueueDb;
  /** What a child process opens: the SQLite file, or PostgreSQL's URL. */
  target: string;
}

const silent = { warn: () => {}, info: () => {} };

export async function tempDb(): Promise<TempDb> {
  const t = testStore === 'postgres' ? await pgDb() : sqliteDb();
  // A scratch table for side effects that must commit (or not) with a job's completion.
  await t.store.run(sql`CREATE TABLE effects (job_id BIGINT NOT NULL, note TEXT NOT NULL)`);
  return t;
}

function sqliteDb(): TempDb {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'msgd-jobs-'));
  const file = path.join(dir, 'msgd.db');
  const conns: Db[] = [];
  const open = () => {
    const db = openDb(file);
    conns.push(db);
    return db;
  };
  const db = open();
  migrate(db);
  cleanups.push(() => {
    for (const c of conns) c.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { dialect: 'sqlite', db, store: sqliteStore(db), open, target: file };
}

async function pgDb(): Promise<TempDb> {
  const database = await takeEmptyDatabase('queue');
  const stores: PgStore[] = [];
  const open = () => {
    const s = openPg(database.url, { logger: silent, poolSize: 4 });
    stores.push(s);
    return s;
  };
  const db = open();
  cleanups.push(async () => {
    for (const s of stores) await s.close();
    await database.release();
  });
  return { dialect: 'postgres', db, store: db, open, target: database.url };
}

/** The store of a queue's connection. */
export function storeOf(db: QueueDb): Store {
  return 'sqlite' in db ? sqliteStore(db) : db;
}

export async function effects(t: TempDb): Promise<{ job_id: number; note: string }[]> {
  return t.store.all<{ job_id: number; note: string }>(sql`SELECT job_id, note FROM effects ORDER BY job_id, note`);
}

export async function jobRow(t: TempDb, id: number): Promise<Record<string, any> | undefined> {
  return t.store.get<Record<string, any>>(sql`SELECT * FROM jobs WHERE id = ${id}`);
}

/** How many rows a table holds, as a number on both stores. */
export async function countOf(t: TempDb, table: 'jobs' | 'effects' | 'cron_runs'): Promise<number> {
  const r = await t.store.get<{ n: number }>(sql`SELECT CAST(count(*) AS BIGINT) AS n FROM ${sql.raw(table)}`);
  return Number(r!.n);
}
