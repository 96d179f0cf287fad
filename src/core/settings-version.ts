import type { Database } from 'better-sqlite3';
import { stmt } from '../db/stmt.js';

// What a request's checks read (tokens, partners but not their balance, gateways, channels,
// prices) changes rarely, and only when the operator changes it. Triggers (migration 0005) move
// one number, meta.settings_version, with every such change, whichever connection makes it
// (msgctl's included). Caches of those tables keep what they read beside the version they read
// it at, and look at the number once per event-loop turn: a change committed before a turn
// begins is seen by that turn's first request, as "takes effect on the next request" promises,
// and a burst of requests pays for one read of it, not one query per table per request.
//
// A change made through this process's own connection (core functions, always with an audit
// row) marks the version to be read again at once, so it is seen even within the same turn.

const READ = `SELECT value FROM meta WHERE key = 'settings_version'`;

class SettingsVersion {
  private value = '';
  private fresh = false;

  constructor(private readonly db: Database) {}

  current(): string {
    if (this.fresh) return this.value;
    this.fresh = true;
    setImmediate(this.expire);
    // No row: a database not yet migrated to 0005. Nothing can be kept then: a new value per read.
    this.value = stmt<[], { value: string }>(this.db, READ).get()?.value ?? `unversioned:${Math.random()}`;
    return this.value;
  }

  changed(): void {
    this.fresh = false;
  }

  private readonly expire = () => {
    this.fresh = false;
  };
}

const versions = new WeakMap<Database, SettingsVersion>();

function versionOf(db: Database): SettingsVersion {
  let v = versions.get(db);
  if (!v) versions.set(db, (v = new SettingsVersion(db)));
  return v;
}

/** The settings version as this connection last saw it (read at most once per event-loop turn). */
export function settingsVersion(db: Database): string {
  return versionOf(db).current();
}

/** This connection changed settings: read the version again on next use. */
export function settingsChanged(db: Database): void {
  versions.get(db)?.changed();
}

/**
 * A map of values derived from settings, emptied whenever the settings version moves. Keys
 * are whatever the caller looks things up by; a miss is computed by `load` and kept.
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
