import { closeSync, existsSync, openSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { openDb, type Db, type OpenOptions } from './open.js';
import { migrate, migrationStatus } from './migrate.js';
import { DataDirError } from './errors.js';
import { loadMasterKey, type KeySource, type MasterKey } from './master-key.js';

export const DB_FILE = 'msgd.db';
export { DataDirError };
export { KEY_FILE, decodeMasterKey } from './master-key.js';

export interface DataDir {
  dir: string;
  db: Db;
  masterKey: Buffer;
  /** Where the key came from: MSGD_MASTER_KEY, the masterKeyFile setting, or <dataDir>/master.key. */
  keySource: KeySource;
  /** true when this call created the database file. */
  created: boolean;
  close(): void;
}

export interface OpenDataDirOptions extends OpenOptions {
  env?: NodeJS.ProcessEnv;
  /** The masterKeyFile setting: read the key from this file (MSGD_MASTER_KEY set too is refused). */
  masterKeyFile?: string | null;
  /** Create the directory, database and key when missing (msgd serve, msgctl init). */
  create?: boolean;
  /** Apply pending migrations (default true). */
  migrate?: boolean;
  /** Called before migrations are applied to a database that has some applied already (a backup). */
  beforeMigrate?: (db: Db, pending: string[], key: MasterKey) => void;
}

export function openDataDir(path: string, opts: OpenDataDirOptions = {}): DataDir {
  const dir = resolve(path);
  const env = opts.env ?? process.env;
  const dbPath = join(dir, DB_FILE);
  const existed = existsSync(dbPath);
  if (!existed && !opts.create) {
    throw new DataDirError(`no msgd data directory at ${dir} (run "msgctl init" or start msgd once)`);
  }
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const { key, source } = loadMasterKey(dir, env, opts.masterKeyFile, opts.create ?? false);
  // Token hashes and the ledger are nobody else's business: create the database owner-only
  // (SQLite gives its -wal and -shm files the same mode).
  if (!existed) closeSync(openSync(dbPath, 'a', 0o600));
  const db = openDb(dbPath, opts);
  try {
    if (opts.migrate ?? true) {
      if (opts.beforeMigrate) {
        const status = migrationStatus(db);
        if (status.pending.length && status.applied > 0 && !status.tooNew)
          opts.beforeMigrate(db, status.pending, { key, source });
      }
      migrate(db);
    }
  } catch (e) {
    db.close();
    throw e;
  }
  return { dir, db, masterKey: key, keySource: source, created: !existed, close: () => db.close() };
}
