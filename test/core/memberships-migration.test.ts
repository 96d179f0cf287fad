import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate as drizzleMigrate } from 'drizzle-orm/better-sqlite3/migrator';
import { afterAll, describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.js';
import { openDb } from '../../src/db/open.js';

// Console users become persons with memberships: a database made at the schema before it,
// with users, sessions and links in it, upgraded by msgd's own migrate (one transaction, foreign
// keys on), keeps every person, role, state, session and link.

const tmp = mkdtempSync(join(tmpdir(), 'msgd-memberships-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A copy of the migrations folder that stops before `tag`. */
function migrationsBefore(tag: string) {
  const dir = join(tmp, 'migrations-before');
  cpSync(MIGRATIONS_DIR, dir, { recursive: true });
  const journalPath = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
  journal.entries = journal.entries.filter((e: { tag: string }) => e.tag < tag);
  writeFileSync(journalPath, JSON.stringify(journal));
  return dir;
}

describe('the memberships migration', () => {
  it('carries every user over as a person with one membership, and keeps sessions and links', () => {
    const db = openDb(join(tmp, 'msgd.db'));
    drizzleMigrate(db.orm, { migrationsFolder: migrationsBefore('0011') });
    const now = 1_790_000_000_000;
    const run = (sql: string, ...args: unknown[]) => db.sqlite.prepare(sql).run(...args);
    for (const [id, slug] of [
      ['ptr_a', 'acme'],
      ['ptr_g', 'globex'],
    ])
      run(
        `INSERT INTO partners (id, slug, name, status, currency, created_at, updated_at) VALUES (?, ?, ?, 'active', 'USD', ?, ?)`,
        id,
        slug,
        slug.toUpperCase(),
        now,
        now,
      );
    const user = (id: string, partner: string, email: string, role: string, hash: string | null, status: string) =>
      run(
        `INSERT INTO users (id, partner_id, email, role, password_hash, status, sessions_valid_after, last_login_at, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, 5, 7, ?, ?)`,
        id,
        partner,
        email,
        role,
        hash,
        status,
        now,
        now + 1,
      );
    user('usr_ann', 'ptr_a', 'ann@acme.example', 'admin', 'scrypt$x', 'active');
    user('usr_bob', 'ptr_a', 'bob@acme.example', 'developer', null, 'active');
    user('usr_cy', 'ptr_g', 'cy@globex.example', 'billing', 'scrypt$y', 'disabled');
    run(
      `INSERT INTO ui_sessions (id, hash, user_id, created_at, last_seen_at, expires_at) VALUES ('ses_1', 'h1', 'usr_ann', ?, ?, ?)`,
      now,
      now,
      now + 1000,
    );
    run(
      `INSERT INTO user_invites (id, user_id, hash, kind, expires_at, used_at, created_at) VALUES ('inv_1', 'usr_bob', 'h2', 'invite', ?, NULL, ?)`,
      now + 1000,
      now,
    );
    run(
      `INSERT INTO user_invites (id, user_id, hash, kind, expires_at, used_at, created_at) VALUES ('inv_2', 'usr_ann', 'h3', 'reset', ?, NULL, ?)`,
      now + 1000,
      now,
    );

    expect(migrate(db)[0]).toBe('0011_console_memberships');

    expect(db.sqlite.prepare('SELECT * FROM users ORDER BY id').all()).toEqual([
      {
        id: 'usr_ann',
        email: 'ann@acme.example',
        password_hash: 'scrypt$x',
        status: 'active',
        sessions_valid_after: 5,
        last_login_at: 7,
        created_at: now,
        updated_at: now + 1,
      },
      expect.objectContaining({ id: 'usr_bob', password_hash: null, status: 'active' }),
      expect.objectContaining({ id: 'usr_cy', password_hash: 'scrypt$y', status: 'active' }),
    ]);
    expect(
      db.sqlite
        .prepare(
          'SELECT id, user_id, partner_id, role, status, accept_by_link, accepted_at FROM memberships ORDER BY user_id',
        )
        .all(),
    ).toEqual([
      {
        id: 'mem_ann',
        user_id: 'usr_ann',
        partner_id: 'ptr_a',
        role: 'admin',
        status: 'active',
        accept_by_link: 0,
        accepted_at: now,
      },
      {
        id: 'mem_bob',
        user_id: 'usr_bob',
        partner_id: 'ptr_a',
        role: 'developer',
        status: 'pending',
        accept_by_link: 1,
        accepted_at: null,
      },
      {
        id: 'mem_cy',
        user_id: 'usr_cy',
        partner_id: 'ptr_g',
        role: 'billing',
        status: 'disabled',
        accept_by_link: 0,
        accepted_at: now,
      },
    ]);
    expect(db.sqlite.prepare('SELECT id, partner_id FROM ui_sessions').all()).toEqual([
      { id: 'ses_1', partner_id: 'ptr_a' },
    ]);
    expect(db.sqlite.prepare('SELECT id, kind, membership_id FROM user_invites ORDER BY id').all()).toEqual([
      { id: 'inv_1', kind: 'invite', membership_id: 'mem_bob' },
      { id: 'inv_2', kind: 'reset', membership_id: null },
    ]);
    expect(db.sqlite.prepare('PRAGMA foreign_key_check').all()).toEqual([]);
    expect(db.sqlite.pragma('foreign_keys', { simple: true })).toBe(1);
    db.close();
  });
});
