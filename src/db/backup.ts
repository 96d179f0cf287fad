import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Database } from 'better-sqlite3';
import type { Config } from '../config/schema.js';
import { writeBackupKey } from './backup-key.js';
import { DataDirError } from './errors.js';
import type { MasterKey } from './master-key.js';
import type { Db } from './open.js';

const require = createRequire(import.meta.url);

// A backup is `VACUUM INTO` a new file: one read transaction, so the copy is the database as
// it stood when the backup began, whatever msgd commits meanwhile. SQLite's online backup API
// run from another process starts over whenever the source changes, so beside a busy msgd it
// might never finish; VACUUM INTO does not restart. While it runs, the checkpoint cannot move
// past its snapshot and the WAL grows with every commit (docs/deploy.md has the figure).
//
// The copy is written to "<file>.partial", synced and renamed, so a file with the final name
// is always a whole backup.

export interface SnapshotResult {
  file: string;
  bytes: number;
  durationMs: number;
}

export interface SnapshotOptions {
  /** Called a few times a second with bytes written so far and the expected total. */
  onProgress?: (done: number, total: number) => void;
}

export class BackupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BackupError';
  }
}

const sqlString = (s: string) => `'${s.replace(/'/g, "''")}'`;

function prepareTarget(target: string): string {
  const file = resolve(target);
  if (existsSync(file)) throw new BackupError(`${file} already exists; a backup never overwrites a file`);
  if (!existsSync(dirname(file))) throw new BackupError(`the directory ${dirname(file)} does not exist`);
  const partial = `${file}.partial`;
  rmSync(partial, { force: true });
  // Token hashes, the ledger and sealed secrets: owner-only, as the database itself. VACUUM
  // INTO writes into an existing empty file and keeps its mode.
  closeSync(openSync(partial, 'wx', 0o600));
  return partial;
}

function syncFile(path: string) {
  const fd = openSync(path, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Rename the finished copy into place and make the rename itself durable. */
function finish(partial: string, file: string, started: number): SnapshotResult {
  syncFile(partial);
  renameSync(partial, file);
  try {
    const fd = openSync(dirname(file), 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Some filesystems refuse to fsync a directory; the file itself is synced.
  }
  return { file, bytes: statSync(file).size, durationMs: Date.now() - started };
}

/** Snapshot on a connection this process already holds: blocks it (msgd before it serves, msgctl migrate). */
export function snapshotSync(db: Database, target: string): SnapshotResult {
  const started = Date.now();
  const file = resolve(target);
  const partial = prepareTarget(file);
  try {
    db.exec(`VACUUM INTO ${sqlString(partial)}`);
    return finish(partial, file, started);
  } catch (e) {
    rmSync(partial, { force: true });
    throw e;
  }
}

const SCRIPT = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
const kept = [];
try {
  db.exec('PRAGMA busy_timeout = 5000');
  // A small cache: the copy streams through it, so the target grows as it goes.
  db.exec('PRAGMA cache_size = 256');
  const one = (sql) => { const st = db.prepare(sql); kept.push(st); return st.pluck().get(); };
  const total = (one('PRAGMA page_count') - one('PRAGMA freelist_count')) * one('PRAGMA page_size');
  parentPort.postMessage({ type: 'total', total });
  db.exec(workerData.sql);
  parentPort.postMessage({ type: 'done' });
} catch (e) {
  parentPort.postMessage({ type: 'error', message: String((e && e.message) || e), code: e && e.code });
} finally {
  db.close();
}
`;

/**
 * Snapshot the database at `dbPath` into `target` from a worker thread with its own
 * connection, so the calling event loop (msgd serving traffic, msgctl drawing progress) runs on.
 */
export function snapshot(dbPath: string, target: string, opts: SnapshotOptions = {}): Promise<SnapshotResult> {
  const started = Date.now();
  const file = resolve(target);
  const partial = prepareTarget(file);
  return new Promise<SnapshotResult>((resolvePromise, reject) => {
    let total = 0;
    let failure: Error | null = null;
    let done = false;
    const worker = new Worker(SCRIPT, {
      eval: true,
      workerData: { driver: require.resolve('better-sqlite3'), path: dbPath, sql: `VACUUM INTO ${sqlString(partial)}` },
    });
    const poll = setInterval(() => {
      if (!opts.onProgress || !total) return;
      let size = 0;
      try {
        size = statSync(partial).size;
      } catch {
        // Not created yet.
      }
      opts.onProgress(Math.min(size, total), total);
    }, 250);
    worker.on('message', (m: { type: string; total?: number; message?: string; code?: string }) => {
      if (m.type === 'total') {
        total = m.total ?? 0;
        opts.onProgress?.(0, total);
      } else if (m.type === 'done') done = true;
      else if (m.type === 'error')
        failure = Object.assign(new BackupError(`backup failed: ${m.message}`), { code: m.code });
    });
    worker.on('error', (e) => (failure ??= e));
    worker.on('exit', () => {
      clearInterval(poll);
      if (!failure && !done) failure = new BackupError('backup failed: the backup thread stopped early');
      if (failure) {
        rmSync(partial, { force: true });
        reject(failure);
        return;
      }
      try {
        const result = finish(partial, file, started);
        opts.onProgress?.(result.bytes, result.bytes);
        resolvePromise(result);
      } catch (e) {
        rmSync(partial, { force: true });
        reject(e);
      }
    });
  });
}

/** "msgd-20261126T060000Z.db", or with a suffix ("-pre-migrate"): sorts by time. */
export function backupFileName(now: number, suffix = ''): string {
  const stamp = new Date(now)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
  return `msgd-${stamp}${suffix}.db`;
}

const SCHEDULED = /^msgd-\d{8}T\d{6}Z\.db$/;

/** The key file written beside a backup. */
export const keyFileFor = (backupFile: string) => `${backupFile}.master-key`;

/**
 * Keep the newest `keep` scheduled backups in `dir` (names msgd gave them), with their key
 * files; others in the directory (pre-migration backups, the operator's own) are left alone.
 */
export function pruneBackups(dir: string, keep: number, list: string[]): string[] {
  const ours = list.filter((n) => SCHEDULED.test(n)).sort();
  const removed = ours.slice(0, Math.max(0, ours.length - keep));
  for (const name of removed) {
    rmSync(join(dir, name), { force: true });
    rmSync(keyFileFor(join(dir, name)), { force: true });
  }
  return removed;
}

/** Where scheduled and pre-migration backups go: backup.dir, or "backups" in the data directory. */
export function backupDir(config: Config): string {
  return resolve(config.backup.dir ?? join(config.dataDir, 'backups'));
}

/**
 * A key file beside the backup, unless the config says not to or the key is kept outside the
 * data directory (MSGD_MASTER_KEY, masterKeyFile): a copy beside the backups would undo that.
 */
export function keepKeyBeside(config: Config, backupFile: string, key: MasterKey): string | null {
  if (!config.backup.withKey || key.source.kind !== 'dataDir') return null;
  const keyFile = keyFileFor(backupFile);
  writeBackupKey(keyFile, backupFile, key.key);
  return keyFile;
}

/**
 * The backup msgd's start and `msgctl migrate` take before they change the schema, so an
 * upgrade that goes wrong can be rolled back (restore it with the msgd it came from).
 */
export function backupBeforeMigrate(
  config: Config,
  log: (file: string, pending: string[], keyFile: string | null) => void = () => {},
) {
  return (db: Db, pending: string[], key: MasterKey) => {
    const dir = backupDir(config);
    let file: string;
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      file = snapshotSync(db.sqlite, join(dir, backupFileName(Date.now(), '-pre-migrate'))).file;
    } catch (e) {
      throw new DataDirError(
        `the backup before applying ${pending.length} migration(s) failed, so none was applied: ${(e as Error).message} ` +
          `(free space in ${dir}, set backup.dir elsewhere, or skip it with backup.beforeMigrate: false)`,
      );
    }
    const keyFile = keepKeyBeside(config, file, key);
    log(file, pending, keyFile);
    return { file, keyFile };
  };
}
