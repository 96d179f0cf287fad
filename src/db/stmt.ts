import type { Database, Statement } from 'better-sqlite3';

// Prepared statements cached per connection and SQL text, for hot paths that must not
// re-parse SQL on every call.
const caches = new WeakMap<Database, Map<string, Statement>>();

export function stmt<P extends unknown[] = unknown[], R = unknown>(db: Database, sql: string): Statement<P, R> {
  let cache = caches.get(db);
  if (!cache) {
    cache = new Map();
    caches.set(db, cache);
  }
  let s = cache.get(sql);
  if (!s) {
    s = db.prepare(sql);
    cache.set(sql, s);
  }
  return s as unknown as Statement<P, R>;
}
