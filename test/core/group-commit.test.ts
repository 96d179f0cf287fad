import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/db/open.js';
import { GroupCommitter } from '../../src/db/group-commit.js';

// Work submitted in one event-loop turn shares one transaction; a piece that fails takes back
// only its own writes; every promise settles after the shared COMMIT, and says the truth about it.

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
    // The failing piece wrote nothing before its statement failed: no second run was needed.
    expect(gc.reruns).toBe(0);
  });

  it('a piece that fails after some of its writes is taken back alone, and the rest of its batch commits', async () => {
    const gc = setup();
    let runs = 0;
    const halfway = () => {
      runs++;
      put('c-1')();
      put('a')(); // already written by the first piece: UNIQUE fails after c-1 is in
    };
    const results = await Promise.allSettled([gc.run(put('a')), gc.run(halfway), gc.run(put('b')), gc.run(put('d'))]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason.code).toBe('SQLITE_CONSTRAINT_PRIMARYKEY');
    expect(rows()).toEqual(['a', 'b', 'd']);
    expect(gc.batches).toBe(1);
    // The batch ran twice: once without savepoints (rolled back when the piece failed midway),
    // then each piece in its own savepoint. Pieces must be safe to run twice.
    expect(gc.reruns).toBe(1);
    expect(runs).toBe(2);
    // The next batch goes the fast way again.
    await gc.run(put('e'));
    expect(gc.reruns).toBe(1);
    expect(rows()).toEqual(['a', 'b', 'd', 'e']);
  });

  it('a piece that throws after an UPDATE that changed a row is taken back too', async () => {
    const gc = setup();
    db.sqlite.prepare("INSERT INTO t (k, v) VALUES ('x', X'00')").run();
    const results = await Promise.allSettled([
      gc.run(() => {
        db.sqlite.prepare("UPDATE t SET k = 'y' WHERE k = 'x'").run();
        throw new Error('changed my mind');
      }),
      gc.run(put('z')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect(rows()).toEqual(['x', 'z']);
    expect(gc.reruns).toBe(1);
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
