import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseUrl, freshDatabase, ownCluster, pgAdminUrl, withClient } from './helpers.js';

// The harness itself: each freshDatabase() is a database of its own in the run's cluster.
describe('freshDatabase', () => {
  const a = freshDatabase();
  const b = freshDatabase();

  it('gives each call its own database, and what one holds the other does not', async () => {
    expect(a.name).not.toBe(b.name);
    await withClient(a.url, (c) =>
      c.query('CREATE TABLE notes (body text NOT NULL); INSERT INTO notes VALUES ($$in a$$)'),
    );
    const inA = await withClient(a.url, (c) =>
      c.query<{ db: string; body: string }>('SELECT current_database() AS db, body FROM notes'),
    );
    expect(inA.rows).toEqual([{ db: a.name, body: 'in a' }]);
    const inB = await withClient(b.url, (c) =>
      c.query<{ db: string; found: string | null }>(
        `SELECT current_database() AS db, to_regclass('notes')::text AS found`,
      ),
    );
    expect(inB.rows).toEqual([{ db: b.name, found: null }]);
  });
});

describe('freshDatabase from a template', () => {
  // A template prepared once (as a migrated schema would be), then copied per file.
  const template = `tpl_${process.pid}`;
  beforeAll(async () => {
    await withClient(pgAdminUrl(), (c) => c.query(`CREATE DATABASE ${template}`));
    await withClient(databaseUrl(pgAdminUrl(), template), (c) =>
      c.query('CREATE TABLE partners (id text PRIMARY KEY); INSERT INTO partners VALUES ($$acme$$)'),
    );
  });
  const copy = freshDatabase({ template });
  afterAll(async () => {
    await withClient(pgAdminUrl(), (c) => c.query(`DROP DATABASE IF EXISTS ${template}`));
  });

  it('starts as a copy of the template, and changes to it stay in the copy', async () => {
    const rows = await withClient(copy.url, (c) => c.query('SELECT id FROM partners'));
    expect(rows.rows).toEqual([{ id: 'acme' }]);
    await withClient(copy.url, (c) => c.query('DELETE FROM partners'));
    const left = await withClient(databaseUrl(pgAdminUrl(), template), (c) => c.query('SELECT id FROM partners'));
    expect(left.rows).toEqual([{ id: 'acme' }]);
  });
});

describe('ownCluster', () => {
  const cluster = ownCluster();
  const db = freshDatabase({ cluster });

  it('restarts as a crash does: open connections are cut, new ones work, committed rows stay', async () => {
    await withClient(db.url, (c) => c.query('CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)'));
    const before = new pg.Client({ connectionString: db.url });
    const errors: Error[] = [];
    before.on('error', (e) => errors.push(e));
    await before.connect();
    await cluster.restart();
    await expect(before.query('SELECT 1')).rejects.toThrow();
    await before.end().catch(() => {});
    const after = await withClient(db.url, (c) => c.query<{ n: number }>('SELECT n FROM kept'));
    expect(after.rows).toEqual([{ n: 1 }]);
    expect(readFileSync(cluster.logFile, 'utf8')).toMatch(/immediate shutdown request|database system was interrupted/);
  });

  it('is not the run cluster', () => {
    expect(cluster.adminUrl).not.toBe(pgAdminUrl());
  });
});
