import { chmodSync, copyFileSync, existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DB_FILE, KEY_FILE } from './datadir.js';

// A backup put in place as a data directory's database (msgctl restore). Only into an empty
// directory, and undone whole: a restore that fails its checks leaves the directory as empty
// as it found it, so it can simply be run again.

const DATA_FILES = [DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`, KEY_FILE];

/** The database, WAL and key files a data directory already holds. */
export function dataFilesIn(dir: string): string[] {
  return DATA_FILES.filter((f) => existsSync(join(dir, f)));
}

export interface PlacedBackup {
  /** Removes what was placed and the files opening it made: the directory is empty again. */
  remove(): void;
}

/**
 * Copies the backup in as `dir`'s database (under another name until whole, then renamed),
 * mode 0600, with the master key it was made with (null: the key is kept outside the data
 * directory, in MSGD_MASTER_KEY or the masterKeyFile setting).
 * The caller holds the data directory's lock (src/db/instance-lock.ts).
 */
export function placeBackup(dir: string, source: string, key: Buffer | null): PlacedBackup {
  const db = join(dir, DB_FILE);
  const staging = `${db}.restoring`;
  const written: string[] = [];
  const remove = () => {
    for (const f of [...written, staging, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });
  };
  try {
    copyFileSync(source, staging);
    chmodSync(staging, 0o600);
    if (key) {
      // Created 0600 before any byte of the key is in it.
      writeFileSync(join(dir, KEY_FILE), key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
      written.push(join(dir, KEY_FILE));
    }
    renameSync(staging, db);
    written.push(db);
  } catch (e) {
    remove();
    throw e;
  }
  return { remove };
}
