import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate as drizzleMigrate } from 'drizzle-orm/better-sqlite3/migrator';
import type { Db } from './open.js';
import { iso } from '../lib/time.js';

export const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'migrations');

interface JournalEntry {
  idx: number;
  when: number;
  tag: string;
}

export class SchemaTooNewError extends Error {
  constructor(dbLatest: number, codeLatest: number) {
    super(
      `the database was migrated by a newer msgd (schema ${iso(dbLatest)}, ` +
        `this build knows up to ${iso(codeLatest)}); run the newer msgd or restore a backup`,
    );
    this.name = 'SchemaTooNewError';
  }
}

function journal(): JournalEntry[] {
  const raw = JSON.parse(readFileSync(join(MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8'));
  return raw.entries as JournalEntry[];
}

function appliedTimes(db: Db): number[] {
  const exists = db.sqlite
    .prepare(`SELECT 1 FROM sqlite_master WHERE type='table' AND name='__drizzle_migrations'`)
    .get();
  if (!exists) return [];
  return (db.sqlite.prepare('SELECT created_at FROM __drizzle_migrations').all() as { created_at: number }[]).map((r) =>
    Number(r.created_at),
  );
}

export interface MigrationStatus {
  applied: number;
  known: number;
  pending: string[];
  tooNew: boolean;
}

export function migrationStatus(db: Db): MigrationStatus {
  const entries = journal();
  const applied = new Set(appliedTimes(db));
  const latestKnown = Math.max(0, ...entries.map((e) => e.when));
  const tooNew = [...applied].some((t) => t > latestKnown);
  return {
    applied: applied.size,
    known: entries.length,
    pending: entries.filter((e) => !applied.has(e.when)).map((e) => e.tag),
    tooNew,
  };
}

/** Apply pending migrations; refuse a database written by a newer schema. Returns the tags applied. */
export function migrate(db: Db): string[] {
  const entries = journal();
  const latestKnown = Math.max(0, ...entries.map((e) => e.when));
  const applied = appliedTimes(db);
  const latestApplied = Math.max(0, ...applied);
  if (latestApplied > latestKnown) throw new SchemaTooNewError(latestApplied, latestKnown);
  const pending = migrationStatus(db).pending;
  if (pending.length) drizzleMigrate(db.orm, { migrationsFolder: MIGRATIONS_DIR });
  return pending;
}
