import type { Database } from 'better-sqlite3';
import type { Store } from '../db/query.js';
import { connectionSettingsVersion, settingsVersionSource } from '../db/settings-version.js';

// What a request's checks read (tokens, partners but not their balance, gateways, channels,
// prices) changes rarely, and only when the operator changes it. Triggers (SQLite's migration
// 0005, PostgreSQL's migrations/pg/0001) move one number, meta.settings_version, with every such
// change, whichever process makes it (msgctl's included). Caches of those tables keep what they
// read beside the version they read it at, and look at the number once per event-loop turn: a
// change committed before a turn begins is seen by that turn's first request, as "takes effect
// on the next request" promises, and a burst of requests pays for one read of it, not one query
// per table per request.
//
// A change made through this process (core functions, always with an audit row) marks the
// version to be read again at once, so it is seen even within the same turn. Where the version
// is read from is src/db/settings-version.ts: on SQLite synchronously on the connection (the
// send's and dispatch's synchronous caches share it), on PostgreSQL by one query per turn.

/** The settings version as this SQLite connection last saw it (read at most once per event-loop turn). */
export function settingsVersion(db: Database): string {
  return connectionSettingsVersion(db).current();
}

/** This SQLite connection changed settings: read the version again on next use. */
export function settingsChanged(db: Database): void {
  connectionSettingsVersion(db).changed();
}

/** The settings version of a store, on either store (read at most once per event-loop turn). */
export async function storeSettingsVersion(store: Store): Promise<string> {
  return settingsVersionSource(store).current();
}

/** Settings changed through this store: read the version again on next use. */
export function settingsChangedIn(store: Store): void {
  settingsVersionSource(store).changed();
}

/**
 * A map of values derived from settings, emptied whenever the settings version moves. Keys
 * are whatever the caller looks things up by; a miss is computed by `load` and kept. On the
 * SQLite connection, for synchronous callers; StoreSettingsCache is its form on either store.
 */
export class SettingsCache<K, V> {
  private version = '';
  private readonly map = new Map<K, V>();

  constructor(
    private readonly db: Database,
    private readonly load: (key: K) => V,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: K): V {
    const v = settingsVersion(this.db);
    if (v !== this.version) {
      this.map.clear();
      this.version = v;
    }
    let value = this.map.get(key);
    if (value === undefined && !this.map.has(key)) {
      value = this.load(key);
      if (this.map.size >= this.maxEntries) this.map.clear();
      this.map.set(key, value);
    }
    return value as V;
  }
}

/**
 * SettingsCache on either store: `load` reads through the store. A value loaded while the
 * version moved is returned but not kept, so a cache never holds what an older version read.
 */
export class StoreSettingsCache<K, V> {
  private version = '';
  private readonly map = new Map<K, V>();

  constructor(
    private readonly store: Store,
    private readonly load: (key: K) => Promise<V>,
    private readonly maxEntries = 10_000,
  ) {}

  async get(key: K): Promise<V> {
    const current = settingsVersionSource(this.store).current();
    const v = typeof current === 'string' ? current : await current;
    if (v !== this.version) {
      this.map.clear();
      this.version = v;
    }
    const kept = this.map.get(key);
    if (kept !== undefined || this.map.has(key)) return kept as V;
    const value = await this.load(key);
    if (this.version === v) {
      if (this.map.size >= this.maxEntries) this.map.clear();
      this.map.set(key, value);
    }
    return value;
  }
}
