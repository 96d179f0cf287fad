import { closeSync, mkdirSync, openSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { DataDirError } from './datadir.js';
import { pinConnection } from './pin.js';

// One msgd per data directory: per-gateway rate shaping, the rate limiter and the job loop's
// view of leases all live in the process, and a second msgd would double them (Twilio's 1/s
// becoming 2/s) and could not tell its own running jobs from a crashed one's. The lock is an
// exclusive transaction on a small SQLite file beside the database: the operating system
// drops it when the process dies, however it dies, so a crash never leaves a stale lock.

export const LOCK_FILE = 'msgd.lock';

export interface InstanceLock {
  release(): void;
}

export function lockDataDir(path: string): InstanceLock {
  const dir = resolve(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, LOCK_FILE);
  closeSync(openSync(file, 'a', 0o600));
  // Kept for the life of the process, as every connection (src/db/pin.ts).
  const db = pinConnection(new Database(file));
  try {
    db.exec('PRAGMA busy_timeout = 0');
    db.exec('BEGIN EXCLUSIVE');
  } catch (e) {
    db.close();
    if ((e as { code?: string }).code === 'SQLITE_BUSY') {
      throw new DataDirError(`another msgd is already running on ${dir}: run one msgd per data directory`);
    }
    throw e;
  }
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      db.close();
    },
  };
}
