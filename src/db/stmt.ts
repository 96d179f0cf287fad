import type { Database, Statement } from 'better-sqlite3';
import { pinConnection, prepareOwn } from './pin.js';

// Prepared statements cached per connection and SQL text, for hot paths that must not
// re-parse SQL on every call.
const caches = new WeakMap<Database, Map<string, Statement>>();
// Raw-mode statements (rows as arrays) apart: raw is a mode of the statement object, so one
// shared with stmt() would hand named-row callers arrays.
const rawCaches = new WeakMap<Database, Map<string, Statement>>();

function cached(all: WeakMap<Database, Map<string, Statement>>, db: Database, sql: string, raw: boolean): Statement {
  let cache = all.get(db);
  if (!cache) {
    cache = new Map();
    all.set(db, cache);
    pinConnection(db);
  }
  let s = cache.get(sql);
  if (!s) {
    // Statements of their own, kept here for the connection's life (src/db/pin.ts): not shared
    // through prepare()'s cache, where a caller may set another mode on the same object.
    s = raw ? prepareOwn(db, sql).raw(true) : prepareOwn(db, sql);
    cache.set(sql, s);
  }
  return s;
}

export function stmt<P extends unknown[] = unknown[], R = unknown>(db: Database, sql: string): Statement<P, R> {
  return cached(caches, db, sql, false) as unknown as Statement<P, R>;
}

/**
 * The same, returning rows as arrays: better-sqlite3 builds named rows property by property
 * through the V8 API, which on wide rows or long pages costs more than the query itself.
 */
export function rawStmt(db: Database, sql: string): Statement {
  return cached(rawCaches, db, sql, true);
}
