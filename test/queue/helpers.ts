import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';
import { openDb, type Db } from '../../src/db/open.js';
import { migrate } from '../../src/db/migrate.js';

// A real SQLite file per test in a temp dir, migrated like production; every connection
// opened through here is closed and the dir removed after the test.

const cleanups: (() => void | Promise<void>)[] = [];

afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

export function onCleanup(fn: () => void | Promise<void>) {
  cleanups.push(fn);
}

export interface TempDb {
  file: string;
  db: Db;
  /** Another connection on the same file (as a second process would have). */
  open(): Db;
}

export function tempDb(): TempDb {
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
  // A scratch table for side effects that must commit (or not) with a job's completion.
  db.sqlite.exec('CREATE TABLE effects (job_id INTEGER NOT NULL, note TEXT NOT NULL)');
  cleanups.push(() => {
    for (const c of conns) c.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { file, db, open };
}

export function effects(db: Db): { job_id: number; note: string }[] {
  return db.sqlite.prepare('SELECT job_id, note FROM effects ORDER BY rowid').all() as {
    job_id: number;
    note: string;
  }[];
}

export function jobRow(db: Db, id: number) {
  return db.sqlite.prepare('SELECT * FROM jobs WHERE id = ?').get(id) as Record<string, any> | undefined;
}
