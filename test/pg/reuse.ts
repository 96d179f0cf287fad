// Emptying a used database at msgd's current schema instead of making a new one: making one
// from the run's template costs 650-900 ms (two loaded cores), emptying one 3-6 ms. test/both's
// contexts and the servers startTestServer starts on PostgreSQL reuse their databases so.

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { databaseUrl, migratedTemplate, pgAdminUrl, type TestDatabase, withClient } from './helpers.js';

// Run once in a new database: keeps a copy of the rows the migrations inserted (meta's
// settings_version, the migrations table), the list of msgd's tables and their sequences, and
// defines reset(): drop the tables created since, empty msgd's, put the copied rows back, start
// the sequences again. One statement per reuse, one transaction. It deletes rather than
// truncates (TRUNCATE makes new files for every table and index: ten times slower here), with
// triggers and foreign-key checks off (session_replication_role), so order does not matter and
// the settings_version triggers stay still.
export const SEED_FOR_REUSE = `
CREATE SCHEMA msgd_test_seed;
CREATE TABLE msgd_test_seed.tables (name text PRIMARY KEY, seeded boolean NOT NULL);
CREATE TABLE msgd_test_seed.sequences (name text PRIMARY KEY);
DO $$
DECLARE t text; n bigint;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' LOOP
    EXECUTE format('SELECT count(*) FROM public.%I', t) INTO n;
    INSERT INTO msgd_test_seed.tables VALUES (t, n > 0);
    IF n > 0 THEN
      EXECUTE format('CREATE TABLE msgd_test_seed.%I AS TABLE public.%I', t, t);
    END IF;
  END LOOP;
END $$;
INSERT INTO msgd_test_seed.sequences
  SELECT DISTINCT pg_get_serial_sequence(format('public.%I', c.table_name), c.column_name)
    FROM information_schema.columns c JOIN msgd_test_seed.tables t ON t.name = c.table_name AND NOT t.seeded
   WHERE c.table_schema = 'public' AND (c.is_identity = 'YES' OR c.column_default LIKE 'nextval(%');
CREATE FUNCTION msgd_test_seed.reset() RETURNS void LANGUAGE plpgsql AS $$
DECLARE t text;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'public'
             AND tablename NOT IN (SELECT name FROM msgd_test_seed.tables) LOOP
    EXECUTE format('DROP TABLE public.%I CASCADE', t);
  END LOOP;
  SET LOCAL session_replication_role = replica;
  FOR t IN SELECT name FROM msgd_test_seed.tables LOOP
    EXECUTE format('DELETE FROM public.%I', t);
  END LOOP;
  FOR t IN SELECT name FROM msgd_test_seed.tables WHERE seeded LOOP
    EXECUTE format('INSERT INTO public.%I SELECT * FROM msgd_test_seed.%I', t, t);
  END LOOP;
  SET LOCAL session_replication_role = origin;
  FOR t IN SELECT name FROM msgd_test_seed.sequences LOOP
    PERFORM setval(t, 1, false);
  END LOOP;
END $$;
`;

/** Empties a database SEED_FOR_REUSE ran in, back to the state it had then (one statement). */
export const RESET_FOR_REUSE = 'SELECT msgd_test_seed.reset()';

export interface ReusableDatabase extends TestDatabase {
  /** Gives the database back for another user (or drops it, where it cannot be emptied). */
  release(): Promise<void>;
}

/**
 * An empty database at msgd's current schema, for one msgd (startTestServer on PostgreSQL) or
 * one test/both file, `release()`d when done with: emptied (RESET_FOR_REUSE, after ending what is
 * still connected to it, as DROP … WITH (FORCE) would) and renamed into the run's free list,
 * where the next taker of any file gets it by renaming it to a name of its own (a rename another
 * file won is skipped). Only when none is free is one copied from the template (and seeded).
 * The global teardown drops what is left.
 */
export async function takeEmptyDatabase(label: string): Promise<ReusableDatabase> {
  const admin = pgAdminUrl();
  // Unique to the run (runs sharing a server with MSGD_TEST_PG_URL each have their own template).
  const free = `${migratedTemplate()}_free_`;
  const slug = label
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, 30);
  const name = `t_${process.env.VITEST_POOL_ID ?? '0'}_${slug}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = databaseUrl(admin, name);
  const taken = await withClient(admin, async (c) => {
    const { rows } = await c.query<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE starts_with(datname, $1) ORDER BY random()',
      [free],
    );
    for (const { datname } of rows) {
      try {
        await c.query(`ALTER DATABASE ${pg.escapeIdentifier(datname)} RENAME TO ${pg.escapeIdentifier(name)}`);
        return true;
      } catch {
        // Taken by a server of another file first.
      }
    }
    return false;
  });
  if (!taken) {
    await withClient(admin, (c) =>
      c.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(migratedTemplate())}`),
    );
    await withClient(url, (c) => c.query(SEED_FOR_REUSE));
  }
  const drop = () =>
    withClient(admin, (c) => c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`));
  let released = false;
  return {
    name,
    url,
    release: async () => {
      if (released) return;
      released = true;
      try {
        await withClient(admin, async (c) => {
          await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
          await withClient(url, (d) => d.query(RESET_FOR_REUSE));
          // Waits (up to 5 s) for the ended connections to be gone; one that came back meanwhile fails it.
          const next = free + randomBytes(4).toString('hex');
          await c.query(`ALTER DATABASE ${pg.escapeIdentifier(name)} RENAME TO ${pg.escapeIdentifier(next)}`);
        });
      } catch {
        await drop();
      }
    },
  };
}
