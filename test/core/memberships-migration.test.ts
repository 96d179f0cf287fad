import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate as drizzleMigrate } from 'drizzle-orm/better-sqlite3/migrator';
import { afterAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { lookupSession } from '../../src/core/ui-sessions.js';
import { linkHash, openLink, setUserStatus } from '../../src/core/users.js';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.js';
import { openDb } from '../../src/db/open.js';
import { coreCtx } from '../helpers/ctx.js';

// Console users become persons with memberships: a database made at the schema before it,
// with users, sessions and links in it, upgraded by msgd's own migrate (one transaction, foreign
// keys on), keeps every person, role, state, session and link.
// SQLite's own: a data directory from before memberships; PostgreSQL's schema starts with them
// (migrations/pg/0000_init.sql), so it has no such upgrade.

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

    expect(
      db.sqlite
        .prepare(
          'SELECT id, email, password_hash, status, sessions_valid_after, last_login_at, created_at, updated_at FROM users ORDER BY id',
        )
        .all(),
    ).toEqual([
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

  it("ends a disabled user's sessions and unused links: enabling the membership later brings none back", async () => {
    const db = openDb(join(tmp, 'disabled.db'));
    drizzleMigrate(db.orm, { migrationsFolder: migrationsBefore('0011') });
    const now = Date.now();
    const run = (sql: string, ...args: unknown[]) => db.sqlite.prepare(sql).run(...args);
    run(
      `INSERT INTO partners (id, slug, name, status, currency, created_at, updated_at) VALUES ('ptr_a', 'acme', 'Acme', 'active', 'USD', ?, ?)`,
      now,
      now,
    );
    const user = (id: string, email: string, hash: string | null, status: string) =>
      run(
        `INSERT INTO users (id, partner_id, email, role, password_hash, status, sessions_valid_after, created_at, updated_at)
         VALUES (?, 'ptr_a', ?, 'developer', ?, ?, 0, ?, ?)`,
        id,
        email,
        hash,
        status,
        now - 10_000,
        now - 10_000,
      );
    user('usr_cy', 'cy@acme.example', 'scrypt$y', 'disabled');
    user('usr_dee', 'dee@acme.example', null, 'disabled');
    user('usr_eve', 'eve@acme.example', 'scrypt$z', 'active');
    const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
    const session = (id: string, userId: string, secret: string) =>
      run(
        `INSERT INTO ui_sessions (id, hash, user_id, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
        id,
        sha(secret),
        userId,
        now - 5_000,
        now - 5_000,
        now + 3_600_000,
      );
    session('ses_cy', 'usr_cy', 'cy-session-secret-0123456789abcdef');
    session('ses_eve', 'usr_eve', 'eve-session-secret-0123456789abcdef');
    const link = (
      id: string,
      userId: string,
      kind: string,
      secret: string,
      usedAt: number | null,
      expires = 3_600_000,
    ) =>
      run(
        `INSERT INTO user_invites (id, user_id, hash, kind, expires_at, used_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
        id,
        userId,
        linkHash(secret),
        kind,
        now + expires,
        usedAt,
        now - 5_000,
      );
    const secrets = {
      cyReset: 'cy-reset-secret-0123456789abcdef',
      deeInvite: 'dee-invite-secret-0123456789abcdef',
      eveReset: 'eve-reset-secret-0123456789abcdef',
      eveUsed: 'eve-used-secret-0123456789abcdef',
      eveExpired: 'eve-expired-secret-0123456789abcdef',
    };
    link('inv_cy', 'usr_cy', 'reset', secrets.cyReset, null);
    link('inv_dee', 'usr_dee', 'invite', secrets.deeInvite, null);
    link('inv_eve', 'usr_eve', 'reset', secrets.eveReset, null);
    link('inv_eve_used', 'usr_eve', 'reset', secrets.eveUsed, now - 1_000);
    link('inv_eve_old', 'usr_eve', 'reset', secrets.eveExpired, null, -1_000);

    expect(migrate(db)[0]).toBe('0011_console_memberships');
    const ctx = coreCtx({ db, masterKey: Buffer.alloc(32, 1) }, { dataDir: tmp, now: () => now });
    // The active user keeps their session and their one usable link; used and expired links stay dead.
    expect((await lookupSession(ctx, 'eve-session-secret-0123456789abcdef'))?.user?.partnerId).toBe('ptr_a');
    expect((await openLink(ctx, secrets.eveReset))?.kind).toBe('reset');
    expect(await openLink(ctx, secrets.eveUsed)).toBeNull();
    expect(await openLink(ctx, secrets.eveExpired)).toBeNull();

    // The disabled ones, enabled again, come back with no session and no link.
    await setUserStatus(ctx, 'ptr_a', 'usr_cy', 'active', 'test');
    await setUserStatus(ctx, 'ptr_a', 'usr_dee', 'active', 'test');
    expect(await lookupSession(ctx, 'cy-session-secret-0123456789abcdef')).toBeNull();
    expect(await openLink(ctx, secrets.cyReset)).toBeNull();
    expect(await openLink(ctx, secrets.deeInvite)).toBeNull();
    expect(db.sqlite.prepare('PRAGMA foreign_key_check').all()).toEqual([]);
    db.close();
  });
});
