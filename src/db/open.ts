import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { pinConnection } from './pin.js';
import * as schema from './schema.js';

export type Orm = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

export interface Db {
  /** The raw better-sqlite3 handle: for pragmas, checkpoints and hot-path prepared statements. */
  sqlite: Database.Database;
  orm: Orm;
  path: string;
  close(): void;
}

export interface OpenOptions {
  readonly?: boolean;
  /** ms to wait on a lock held by another connection (msgctl beside msgd). */
  busyTimeoutMs?: number;
  /**
   * The server checkpoints the WAL itself off the request path (src/jobs/maintenance.ts);
   * short-lived connections (msgctl) keep SQLite's automatic checkpoint.
   */
  manualCheckpoint?: boolean;
}

// Every SQLite pragma the project relies on lives here and nowhere else.
export function openDb(path: string, opts: OpenOptions = {}): Db {
  // Kept for the life of the process, with every statement prepared on it (src/db/pin.ts).
  const sqlite = pinConnection(new Database(path, { readonly: opts.readonly ?? false }));
  sqlite.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
  if (!opts.readonly) sqlite.pragma('journal_mode = WAL');
  // FULL: a 200 and its debit survive power loss, not only a process crash.
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('temp_store = MEMORY');
  // No memory mapping: every mapped page the process touches counts in its RSS, and with the
  // page cache below the accept rate is the same (npm run bench: send).
  sqlite.pragma('mmap_size = 0');
  // 4 MiB of page cache per connection. The hot pages (partners, tokens, channels, queued jobs,
  // the interior pages of the indexes a send walks) fit many times over; the operating system's
  // page cache holds the rest of the file, and a larger cache only adds RSS (npm run bench: send).
  sqlite.pragma('cache_size = -4096');
  if (opts.manualCheckpoint) sqlite.pragma('wal_autocheckpoint = 0');
  const orm = drizzle({ client: sqlite, schema }) as Orm;
  return {
    sqlite,
    orm,
    path,
    close() {
      if (sqlite.open) sqlite.close();
    },
  };
}

/** Checkpoint the WAL into the database file; TRUNCATE also resets the WAL file size. */
export function checkpoint(db: Db, mode: 'PASSIVE' | 'TRUNCATE' = 'PASSIVE') {
  return db.sqlite.pragma(`wal_checkpoint(${mode})`);
}

/**
 * SQLite's own check of the file: 'ok', or the first problem it found. `full` runs
 * integrity_check (every index against its table), else the faster quick_check.
 */
export function checkIntegrity(db: Db, full = false): string {
  return String(db.sqlite.pragma(full ? 'integrity_check' : 'quick_check', { simple: true }));
}
