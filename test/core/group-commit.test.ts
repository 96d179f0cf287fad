import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/db/open.js';
import { GroupCommitter } from '../../src/db/group-commit.js';

// Work submitted in one event-loop turn shares one transaction; each piece has its own
// savepoint; every promise settles after the shared COMMIT, and says the truth about it.

let dir: string;
let db: Db;
afterEach(() => {
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

function setup() {
  dir = mkdtempSync(join(tmpdir(), 'msgd-gc-'));
  db = openDb(join(dir, 'gc.db'));
  db.sqlite.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)');
  return new GroupCommitter(db.sqlite);
}

const rows = () => (db.sqlite.prepare('SELECT k FROM t ORDER BY k').all() as { k: string }[]).map((r) => r.k);
const put = (k: string, bytes = 10) => () => db.sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run(k, Buffer.alloc(bytes));

describe('GroupCommitter', () => {
  it('commits a turn in one transaction; a failing piece rolls back only itself', async () => {
    const gc = setup();
    const results = await Promise.allSettled([gc.run(put('a')), gc.run(put('a')), gc.run(put('b'))]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(rows()).toEqual(['a', 'b']);
    expect(gc.batches).toBe(1);
  });

  it('when SQLite rolls back the whole transaction (disk full) mid-batch, every piece is rejected and none is durable', async () => {
    const gc = setup();
    const pages = (db.sqlite.pragma('page_count', { simple: true }) as number) + 4;
    db.sqlite.pragma(`max_page_count = ${pages}`);
    const results = await Promise.allSettled([gc.run(put('small-1')), gc.run(put('huge', 1024 * 1024)), gc.run(put('small-2'))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(rows()).toEqual([]);
    expect(db.sqlite.inTransaction).toBe(false);
    // The connection is usable again once space allows.
    db.sqlite.pragma('max_page_count = 1073741823');
    await gc.run(put('after'));
    expect(rows()).toEqual(['after']);
  });
});
