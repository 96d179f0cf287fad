import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startCheckpointer, type Checkpointer } from '../../src/db/checkpointer.js';
import { openDb, type Db } from '../../src/db/open.js';
import { nextTurn, sleep, waitFor } from '../helpers/wait.js';

// Under steady writes the WAL must start over from its beginning now and then: a checkpoint
// running beside a busy writer never finds the WAL fully copied, and without the writer
// copying the tail itself the WAL file grows by every byte ever committed.
// SQLite's own: the WAL and its checkpoints are SQLite's; PostgreSQL manages its own log.

let dir: string;
let db: Db;
let cp: Checkpointer | undefined;
afterEach(async () => {
  await cp?.stop();
  cp = undefined;
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('checkpointer', () => {
  it('keeps the WAL from growing under continuous commits: the writer copies the tail and the WAL starts over', async () => {
    dir = mkdtempSync(join(tmpdir(), 'msgd-ckpt-'));
    const path = join(dir, 'ckpt.db');
    db = openDb(path, { manualCheckpoint: true });
    db.sqlite.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)');
    const errors: string[] = [];
    cp = startCheckpointer(path, { writer: db.sqlite, intervalMs: 50, onError: (m) => errors.push(m) });
    const insert = db.sqlite.prepare('INSERT INTO t (v) VALUES (?)');
    const batch = db.sqlite.transaction((n: number) => {
      for (let i = 0; i < n; i++) insert.run(Buffer.alloc(1024, i & 0xff));
    });
    // A writer that never pauses for long: a commit of 20 KB every event-loop turn for 1.5 s.
    let rows = 0;
    let largestWal = 0;
    const end = Date.now() + 1500;
    while (Date.now() < end) {
      batch(20);
      rows += 20;
      largestWal = Math.max(largestWal, statSync(`${path}-wal`).size);
      await nextTurn();
    }
    const written = rows * 1024;
    expect(errors).toEqual([]);
    expect(cp.finished).toBeGreaterThan(0);
    // Growing, the WAL would hold every committed byte (and more: headers, index pages).
    expect(largestWal).toBeLessThan(written / 2);
    expect(db.sqlite.prepare('SELECT COUNT(*) AS n FROM t').get()).toEqual({ n: rows });
    expect(db.sqlite.pragma('integrity_check', { simple: true })).toBe('ok');
  });

  it('never copies the tail inside a transaction of the writer', async () => {
    dir = mkdtempSync(join(tmpdir(), 'msgd-ckpt-'));
    const path = join(dir, 'ckpt.db');
    db = openDb(path, { manualCheckpoint: true });
    db.sqlite.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)');
    db.sqlite.prepare('INSERT INTO t (v) VALUES (?)').run(Buffer.alloc(100));
    const errors: string[] = [];
    cp = startCheckpointer(path, { writer: db.sqlite, intervalMs: 20, onError: (m) => errors.push(m) });
    // An iterator holds the connection busy across event-loop turns: the tail must wait.
    const it = db.sqlite.prepare('SELECT k FROM t').iterate();
    it.next();
    await sleep(150);
    expect(cp.finished).toBe(0);
    it.return?.();
    await waitFor(() => cp!.finished > 0, 'the tail to be copied once the connection is free', 2000);
    expect(errors).toEqual([]);
  });
});
