import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { eq } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/db/open.js';
import { pinnedStatements } from '../../src/db/pin.js';
import { partners } from '../../src/db/schema.js';
import { migrate } from '../../src/db/migrate.js';
import { rawStmt, stmt } from '../../src/db/stmt.js';

// On Node >= 24.19, better-sqlite3 12 aborts the process when the garbage collector frees one of
// its statements or connections outside JS (src/db/pin.ts). CI's Node 20 cannot show the abort,
// so these check what prevents it: msgd's connections make no garbage statements.
// SQLite's own: better-sqlite3's statements and connections; PostgreSQL is reached through pg.

let db: Db | undefined;
afterEach(() => db?.close());

function open(): Db {
  db = openDb(join(mkdtempSync(join(tmpdir(), 'msgd-pin-')), 'pin.db'));
  migrate(db);
  return db;
}

describe('connections keep their statements', () => {
  it('openDb pins the connection: prepare() hands out one statement per SQL text', () => {
    const { sqlite } = open();
    expect(pinnedStatements(sqlite)).not.toBeNull();
    const a = sqlite.prepare('SELECT 1 AS one');
    expect(sqlite.prepare('SELECT 1 AS one')).toBe(a);
    expect(sqlite.prepare('SELECT 2 AS two')).not.toBe(a);
    // An unpinned connection makes a new one each time, as better-sqlite3 does.
    const plain = new Database(':memory:');
    expect(plain.prepare('SELECT 1')).not.toBe(plain.prepare('SELECT 1'));
    expect(pinnedStatements(plain)).toBeNull();
    plain.close();
  });

  it('a drizzle query run again prepares nothing new', () => {
    const d = open();
    const query = () => d.orm.select().from(partners).where(eq(partners.slug, 'nobody')).all();
    query();
    const after = pinnedStatements(d.sqlite);
    for (let i = 0; i < 50; i++) expect(query()).toEqual([]);
    expect(pinnedStatements(d.sqlite)).toBe(after);
  });

  it('pragma() answers as better-sqlite3 does, from kept statements', () => {
    const { sqlite } = open();
    expect(sqlite.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(sqlite.pragma('foreign_keys = OFF')).toEqual([]);
    expect(sqlite.pragma('foreign_keys', { simple: true })).toBe(0);
    sqlite.pragma('foreign_keys = ON');
    expect(sqlite.pragma('foreign_keys')).toEqual([{ foreign_keys: 1 }]);
    const before = pinnedStatements(sqlite);
    for (let i = 0; i < 20; i++) sqlite.pragma('wal_checkpoint(PASSIVE)');
    expect(pinnedStatements(sqlite)).toBe(before! + 1);
  });

  it('a shared statement comes back from prepare() as prepare() made it, whatever a caller set', () => {
    const { sqlite } = open();
    sqlite.prepare('SELECT 1 AS one').raw(true);
    expect(sqlite.prepare('SELECT 1 AS one').get()).toEqual({ one: 1 });
    sqlite.prepare('SELECT 1 AS one').pluck(true);
    expect(sqlite.prepare('SELECT 1 AS one').get()).toEqual({ one: 1 });
  });

  it("stmt() and rawStmt() keep statements of their own, which prepare()'s callers cannot change", () => {
    const { sqlite } = open();
    const named = stmt(sqlite, 'SELECT 1 AS one');
    const raw = rawStmt(sqlite, 'SELECT 1 AS one');
    sqlite.prepare('SELECT 1 AS one').raw(true);
    expect(named.get()).toEqual({ one: 1 });
    expect(raw.get()).toEqual([1]);
    expect(stmt(sqlite, 'SELECT 1 AS one')).toBe(named);
  });
});
