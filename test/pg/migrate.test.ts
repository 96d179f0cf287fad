import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { SchemaTooNewError } from '../../src/db/migrate.js';
import { MIGRATION_LOCK_KEY, migrate, migrationStatus, PG_MIGRATIONS_DIR } from '../../src/db/pg/migrate.js';
import { freshDatabase, withClient } from './helpers.js';

// msgd migrates PostgreSQL at start (and msgctl migrate): all pending migrations in one
// transaction under an advisory lock, so that several processes starting at once neither race
// nor half-apply, and a database migrated by a newer msgd is refused untouched.

const journal = JSON.parse(readFileSync(join(PG_MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8')) as {
  entries: { tag: string; when: number }[];
};
const TAGS = journal.entries.map((e) => e.tag);
const LATEST = Math.max(...journal.entries.map((e) => e.when));

async function tables(url: string): Promise<string[]> {
  return withClient(url, async (c) => {
    const { rows } = await c.query<{ t: string }>(
      `SELECT tablename AS t FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1`,
    );
    return rows.map((r) => r.t);
  });
}

describe('a fresh database', () => {
  const db = freshDatabase();

  it('migrates to the latest schema, then has nothing to do', async () => {
    expect(await migrationStatus(db.url)).toEqual({ applied: 0, known: TAGS.length, pending: TAGS, tooNew: false });
    expect(await migrate(db.url)).toEqual(TAGS);
    expect(await tables(db.url)).toEqual(expect.arrayContaining(['partners', 'messages', 'jobs', 'meta']));
    expect(await migrationStatus(db.url)).toEqual({
      applied: TAGS.length,
      known: TAGS.length,
      pending: [],
      tooNew: false,
    });

    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      expect(await migrate(pool)).toEqual([]);
      // The versions are recorded as on SQLite: the journal's `when` per migration.
      const { rows } = await pool.query<{ created_at: string }>(
        'SELECT created_at::text AS created_at FROM __drizzle_migrations ORDER BY id',
      );
      expect(rows.map((r) => Number(r.created_at))).toEqual(journal.entries.map((e) => e.when));
    } finally {
      await pool.end();
    }
  });
});

describe('two processes migrating at once', () => {
  const db = freshDatabase();

  it('one applies every migration, the other waits and finds nothing to do', async () => {
    const clients = [new pg.Client({ connectionString: db.url }), new pg.Client({ connectionString: db.url })];
    await Promise.all(clients.map((c) => c.connect()));
    try {
      const results = await Promise.all(clients.map((c) => migrate(c)));
      expect(results.map((r) => r.length).sort()).toEqual([0, TAGS.length]);
      expect(results.flat()).toEqual(TAGS);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
    const { rows } = await withClient(db.url, (c) =>
      c.query<{ n: number }>('SELECT count(*)::int AS n FROM __drizzle_migrations'),
    );
    expect(rows[0].n).toBe(TAGS.length);
  });
});

describe('a migrator while another holds the migration lock', () => {
  const db = freshDatabase();

  it('waits for the lock, then migrates', async () => {
    await withClient(db.url, async (holder) => {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY.toString()]);
      let done = false;
      const migrating = migrate(db.url).then((tags) => {
        done = true;
        return tags;
      });
      // The migrator's connection waits on the advisory lock (and has changed nothing).
      const deadline = Date.now() + 10_000;
      for (;;) {
        // Read outside the holder's transaction, which sees the activity of its first read only.
        const { rows } = await withClient(db.url, (c) =>
          c.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`,
          ),
        );
        if (rows[0].n === 1) break;
        if (Date.now() > deadline) throw new Error('no migrator waits on the advisory lock');
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(done).toBe(false);
      expect(await tables(db.url)).toEqual([]);
      await holder.query('COMMIT');
      expect(await migrating).toEqual(TAGS);
    });
  });
});

describe('a database migrated by a newer msgd', () => {
  const db = freshDatabase();

  it('is refused with both versions named, and left as it was', async () => {
    await migrate(db.url);
    const newer = LATEST + 86_400_000;
    await withClient(db.url, (c) =>
      c.query('INSERT INTO __drizzle_migrations (hash, created_at) VALUES ($1, $2)', ['newer', newer]),
    );
    const before = await tables(db.url);

    const err = await migrate(db.url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchemaTooNewError);
    expect((err as Error).message).toBe(
      `the database was migrated by a newer msgd (schema ${new Date(newer).toISOString()}, ` +
        `this build knows up to ${new Date(LATEST).toISOString()}); run the newer msgd or restore a backup`,
    );
    expect((await migrationStatus(db.url)).tooNew).toBe(true);
    expect(await tables(db.url)).toEqual(before);

    // Through a pool: refused alike, and its connection is given back, usable.
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      await expect(migrate(pool)).rejects.toThrow(SchemaTooNewError);
      expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });
});

describe('a migration that fails', () => {
  const db = freshDatabase();

  it('leaves nothing applied and names the migration', async () => {
    // A table of the first migration already there: its CREATE TABLE fails half-way through.
    await withClient(db.url, (c) => c.query('CREATE TABLE jobs (id bigint)'));
    const err = (await migrate(db.url).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/^migration 0000_init failed: relation "jobs" already exists/);
    expect(await tables(db.url)).toEqual(['jobs']);
    expect((await migrationStatus(db.url)).pending).toEqual(TAGS);
  });
});
