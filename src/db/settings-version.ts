import type { Database } from 'better-sqlite3';
import { sqliteConnectionOf, type Store } from './query.js';
import { sql } from './sql.js';
import { stmt } from './stmt.js';

// Where the settings version (meta.settings_version, moved by triggers on both stores: SQLite's
// migration 0005, PostgreSQL's migrations/pg/0001) is read from, once per event-loop turn
// (src/core/settings-version.ts says why). One source per SQLite connection, one per other store:
//
// - SQLite: read synchronously on the connection, so a cache hit costs no promise and the
//   synchronous caches of the send and dispatch share the source (and its "changed" mark) with
//   the store's: a change through either is seen by both at once.
// - PostgreSQL: one query per turn at most, shared by every caller of that turn; a change made
//   by this process (changed()) makes the next caller read again, and a read that was under way
//   when it was marked is not kept.

/** The version as a source last read it, and the mark that makes it read again. */
export interface SettingsVersionSource {
  /** A string at once where the store reads synchronously (SQLite), else a promise. */
  current(): string | Promise<string>;
  /** Settings changed through this process: read the version again on next use. */
  changed(): void;
}

/** No meta row: a database not yet migrated to the version's migration. Nothing can be kept then. */
const unversioned = () => `unversioned:${Math.random()}`;

/** A SQLite connection's source: read synchronously. */
export class ConnectionSource implements SettingsVersionSource {
  private value = '';
  private fresh = false;

  constructor(private readonly db: Database) {}

  current(): string {
    if (this.fresh) return this.value;
    this.fresh = true;
    setImmediate(this.expire);
    this.value =
      stmt<[], { value: string }>(this.db, `SELECT value FROM meta WHERE key = 'settings_version'`).get()?.value ??
      unversioned();
    return this.value;
  }

  changed(): void {
    this.fresh = false;
  }

  private readonly expire = () => {
    this.fresh = false;
  };
}

class QuerySource implements SettingsVersionSource {
  private value = '';
  private fresh = false;
  /** Moves with every changed(): a read begun before the mark is not kept. */
  private generation = 0;
  private reading: Promise<string> | undefined;

  constructor(private readonly store: Store) {}

  current(): string | Promise<string> {
    if (this.fresh) return this.value;
    this.reading ??= this.read();
    return this.reading;
  }

  private async read(): Promise<string> {
    const generation = this.generation;
    try {
      const row = await this.store.get<{ value: string }>(sql`SELECT value FROM meta WHERE key = 'settings_version'`);
      const value = row?.value ?? unversioned();
      if (generation === this.generation) {
        this.value = value;
        this.fresh = true;
        setImmediate(this.expire);
      }
      return value;
    } finally {
      if (generation === this.generation) this.reading = undefined;
    }
  }

  changed(): void {
    this.generation++;
    this.fresh = false;
    this.reading = undefined;
  }

  private readonly expire = () => {
    this.fresh = false;
  };
}

const byConnection = new WeakMap<Database, ConnectionSource>();
const byStore = new WeakMap<Store, SettingsVersionSource>();

/** The source of a SQLite connection (synchronous). */
export function connectionSettingsVersion(db: Database): ConnectionSource {
  let s = byConnection.get(db);
  if (!s) byConnection.set(db, (s = new ConnectionSource(db)));
  return s;
}

/** The source of a store: its connection's on SQLite, a query per turn on the others. */
export function settingsVersionSource(store: Store): SettingsVersionSource {
  let s = byStore.get(store);
  if (!s) {
    const db = sqliteConnectionOf(store);
    s = db ? connectionSettingsVersion(db) : new QuerySource(store);
    byStore.set(store, s);
  }
  return s;
}
