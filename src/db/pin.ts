import Database from 'better-sqlite3';

// No connection or statement of msgd's ever becomes garbage: on Node 24.19 and later,
// better-sqlite3 12 aborts the process when the collector frees one outside JavaScript
// (docs/architecture.md, Storage). Every connection is kept for the life of the process (closed
// ones too), and its prepare() hands out one statement per SQL text, prepared once and kept:
// drizzle prepares one for every query it runs, and pragma() prepares through prepare() too.
// Objects still alive when the process (or a worker thread) exits are freed safely.

/** Every pinned connection, with the statements its prepare() has made (by SQL text). */
const pinned = new Map<Database.Database, Map<string, Database.Statement>>();
const ownPrepare = Database.prototype.prepare;

/**
 * Keep `db` and every statement prepared on it for the life of the process (see above).
 * Statements from its prepare() are shared by every caller of the same SQL: use them at once
 * (run, get, all), do not iterate() them or keep one with a mode set (raw, pluck); for that,
 * prepareOwn() gives a statement of the caller's own.
 */
export function pinConnection(db: Database.Database): Database.Database {
  if (pinned.has(db)) return db;
  const statements = new Map<string, Database.Statement>();
  pinned.set(db, statements);
  const prepare = (source: string): Database.Statement => {
    let s = statements.get(source);
    if (s === undefined) {
      s = ownPrepare.call(db, source) as Database.Statement;
      statements.set(source, s);
    } else if (s.reader) {
      // Modes are per statement object: each caller gets it as prepare() made it.
      s.raw(false);
      s.pluck(false);
    }
    return s;
  };
  db.prepare = prepare as Database.Database['prepare'];
  db.pragma = ((source: string, options?: { simple?: boolean }) => {
    const s = prepare(`PRAGMA ${source}`);
    // A pragma that sets a value may return nothing (foreign_keys = ON): then it only runs.
    if (!s.reader) {
      s.run();
      return options?.simple ? undefined : [];
    }
    if (!options?.simple) return s.all();
    const row = s.get() as Record<string, unknown> | undefined;
    return row === undefined ? undefined : Object.values(row)[0];
  }) as Database.Database['pragma'];
  return db;
}

/**
 * A statement of its own, not shared through prepare()'s cache: for a caller that keeps it for
 * the connection's life and sets its modes (src/db/stmt.ts's raw-row statements).
 */
export function prepareOwn(db: Database.Database, source: string): Database.Statement {
  return ownPrepare.call(db, source) as Database.Statement;
}

/** How many statements `db`'s prepare() keeps, or null if `db` is not pinned (for tests). */
export function pinnedStatements(db: Database.Database): number | null {
  return pinned.get(db)?.size ?? null;
}
