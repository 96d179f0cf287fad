import { statfsSync } from 'node:fs';
import type { Db } from './open.js';
import { migrationStatus } from './migrate.js';
import { STORAGE_UNAVAILABLE } from './pg/errors.js';
import { stmt } from './stmt.js';

// Whether msgd can keep what it accepts: the database takes a write, its migrations are
// current, and the data directory's disk has room above a floor. /readyz answers from it;
// a send that meets a storage error is refused with 503 storage_unavailable. This file is
// SQLite's; PostgreSQL's is src/db/pg/health.ts, behind the same StorageHealth interface.

/**
 * A write the storage refused: SQLite's codes (full, past a size limit, an I/O error), and
 * PostgreSQL unreachable or out of resources (src/db/pg/errors.ts's StorageUnavailableError).
 */
export function isStorageError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return (
    code === STORAGE_UNAVAILABLE ||
    code === 'SQLITE_FULL' ||
    code.startsWith('SQLITE_IOERR') ||
    code === 'SQLITE_READONLY' ||
    code === 'SQLITE_CANTOPEN' ||
    code === 'ENOSPC' ||
    code === 'EFBIG' ||
    code === 'EDQUOT' ||
    code === 'EIO'
  );
}

export interface ReadinessCheck {
  name: 'database' | 'migrations' | 'disk';
  ok: boolean;
  message: string;
}

export interface Readiness {
  ok: boolean;
  checks: ReadinessCheck[];
}

/** What /readyz and the msgd_ready metric ask of either store. */
export interface StorageHealth {
  /** A write msgd made was refused by the storage: not ready for the next few seconds. */
  noteFailure(e: unknown): void;
  /** The checks, cheap to ask often (each store bounds how often it really checks). */
  readiness(): Readiness;
  /** Stops any checking the health does by itself. */
  stop(): void;
}

/**
 * How long a write refused by the storage keeps msgd not ready. A nearly full disk refuses
 * some writes and takes others (a checkpoint frees WAL space for a moment), so one probe that
 * gets through is not the all-clear.
 */
export const FAILURE_WINDOW_MS = 10_000;

export class SqliteStorageHealth implements StorageHealth {
  private cached: { at: number; value: Readiness } | null = null;
  private lastFailure: { at: number; code: string } | null = null;

  constructor(
    private readonly db: Db,
    private readonly dir: string,
    private readonly minFreeBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  noteFailure(e: unknown): void {
    this.lastFailure = { at: this.now(), code: String((e as { code?: unknown } | null)?.code ?? 'error') };
    this.cached = null;
  }

  stop(): void {}

  /** The checks, at most once a second however often a probe asks (each writes a commit). */
  readiness(): Readiness {
    const t = this.now();
    if (this.cached && t - this.cached.at < 1_000) return this.cached.value;
    const checks = [this.database(), this.migrations(), this.disk()];
    const value = { ok: checks.every((c) => c.ok), checks };
    this.cached = { at: t, value };
    return value;
  }

  /**
   * Not ready while msgd's own writes were refused in the last seconds; else a committed write
   * that needs fresh pages (a 64 KB row, removed again in the same transaction), which a
   * database at its size limit, or a WAL that cannot grow, refuses.
   */
  private database(): ReadinessCheck {
    const f = this.lastFailure;
    if (f && this.now() - f.at < FAILURE_WINDOW_MS) {
      const ago = Math.round((this.now() - f.at) / 1000);
      return { name: 'database', ok: false, message: `the database refused a write ${ago} s ago (${f.code})` };
    }
    const sqlite = this.db.sqlite;
    // Another transaction of this connection is open only across an await, which the
    // synchronous group commit never makes; if one ever is, this check waits for the next turn.
    if (sqlite.inTransaction) return { name: 'database', ok: true, message: 'a write is in progress' };
    try {
      sqlite.exec('BEGIN IMMEDIATE');
      try {
        stmt(sqlite, `INSERT OR REPLACE INTO meta (key, value) VALUES ('readyz_probe', hex(randomblob(32768)))`).run();
        stmt(sqlite, `DELETE FROM meta WHERE key = 'readyz_probe'`).run();
        sqlite.exec('COMMIT');
      } catch (e) {
        if (sqlite.inTransaction) sqlite.exec('ROLLBACK');
        throw e;
      }
      return { name: 'database', ok: true, message: 'accepts writes' };
    } catch (e) {
      const err = e as { code?: string; message?: string };
      return {
        name: 'database',
        ok: false,
        message: `the database refuses writes (${err.code ?? 'error'}: ${err.message ?? String(e)})`,
      };
    }
  }

  private migrations(): ReadinessCheck {
    try {
      const s = migrationStatus(this.db);
      if (s.tooNew) return { name: 'migrations', ok: false, message: 'the database was migrated by a newer msgd' };
      if (s.pending.length > 0)
        return { name: 'migrations', ok: false, message: `pending migrations: ${s.pending.join(', ')}` };
      return { name: 'migrations', ok: true, message: `${s.applied} applied, none pending` };
    } catch (e) {
      return { name: 'migrations', ok: false, message: `cannot read the migrations: ${(e as Error).message}` };
    }
  }

  private disk(): ReadinessCheck {
    try {
      const s = statfsSync(this.dir);
      const free = s.bavail * s.bsize;
      const mb = (n: number) => `${Math.floor(n / 1048576)} MB`;
      return free >= this.minFreeBytes
        ? { name: 'disk', ok: true, message: `${mb(free)} free` }
        : {
            name: 'disk',
            ok: false,
            message: `${mb(free)} free on the data directory's disk, under the floor of ${mb(this.minFreeBytes)} (health.minFreeDiskMb)`,
          };
    } catch (e) {
      return { name: 'disk', ok: false, message: `cannot read the free space: ${(e as Error).message}` };
    }
  }
}
