import { chmodSync, closeSync, existsSync, openSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { openDb, type Db, type OpenOptions } from './open.js';
import { migrate, migrationStatus } from './migrate.js';

export const DB_FILE = 'msgd.db';
export const KEY_FILE = 'master.key';

export class DataDirError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DataDirError';
  }
}

export interface DataDir {
  dir: string;
  db: Db;
  masterKey: Buffer;
  /** "env" when MSGD_MASTER_KEY supplied the key, else the key file path. */
  keySource: string;
  /** true when this call created the database file. */
  created: boolean;
  close(): void;
}

/** Decode MSGD_MASTER_KEY: 64 hex chars or base64 of exactly 32 bytes. */
export function decodeMasterKey(value: string): Buffer {
  const v = value.trim();
  if (/^[0-9a-fA-F]{64}$/.test(v)) return Buffer.from(v, 'hex');
  const b = Buffer.from(v, 'base64');
  if (b.length === 32 && /^[A-Za-z0-9+/=_-]+$/.test(v)) return b;
  throw new DataDirError('MSGD_MASTER_KEY must be 32 bytes, written as 64 hex characters or base64');
}

function loadKey(dir: string, env: NodeJS.ProcessEnv, create: boolean): { key: Buffer; source: string } {
  if (env.MSGD_MASTER_KEY) return { key: decodeMasterKey(env.MSGD_MASTER_KEY), source: 'env' };
  const file = join(dir, KEY_FILE);
  if (!existsSync(file)) {
    if (!create) throw new DataDirError(`no master key: ${file} is missing and MSGD_MASTER_KEY is not set`);
    writeFileSync(file, randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
    chmodSync(file, 0o600);
  }
  const text = readFileSync(file, 'utf8').trim();
  const key = Buffer.from(text, 'base64');
  if (key.length !== 32) throw new DataDirError(`${file} does not hold a 32-byte base64 key`);
  return { key, source: file };
}

export function keyFileMode(dir: string): number | null {
  const file = join(dir, KEY_FILE);
  return existsSync(file) ? statSync(file).mode & 0o777 : null;
}

export interface OpenDataDirOptions extends OpenOptions {
  env?: NodeJS.ProcessEnv;
  /** Create the directory, database and key when missing (msgd serve, msgctl init). */
  create?: boolean;
  /** Apply pending migrations (default true). */
  migrate?: boolean;
  /** Called before migrations are applied to a database that has some applied already (a backup). */
  beforeMigrate?: (db: Db, pending: string[], key: { key: Buffer; source: string }) => void;
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
  const { key, source } = loadKey(dir, env, opts.create ?? false);
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
