import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pinConnection } from '../../src/db/pin.js';
import { type Sql, sql } from '../../src/db/sql.js';
import {
  type CliStore,
  cleanupTmp,
  cliStore,
  cliStoreKind,
  dumpStore,
  migrationTags,
  oneErrorLine,
  runCli,
  runJson,
  tmpDataDir,
} from '../helpers/cli.js';

// msgctl and the schema's version on the run's store; the SQLite data directory and SQLite's
// migration files themselves (0006, 0007) are SQLite's (test/pg/migrate.test.ts has PostgreSQL's).

const TAGS = migrationTags(cliStoreKind);
const onSqlite = it.skipIf(cliStoreKind === 'postgres');

const stores: CliStore[] = [];
afterAll(async () => {
  for (const s of stores.splice(0)) await s.drop();
  cleanupTmp();
});

async function freshStore() {
  const s = await cliStore();
  stores.push(s);
  await runJson(['partner', 'create', 'acme', '--name', 'Acme'], s.opts());
  return s;
}

/** SQL on a store, as something other than msgctl would run it. */
const exec = (s: CliStore, q: Sql) => s.withCtx((ctx) => ctx.store.run(q));

/**
 * A database built by the migration files before `tag` (e.g. '0006'), opened on its own
 * connection, and a way to apply the named migration to it: an upgrade as msgd runs it.
 */
async function databaseBefore(tag: string) {
  const { mkdirSync, readFileSync, readdirSync } = await import('node:fs');
  const { default: Database } = await import('better-sqlite3');
  const dir = new URL('../../migrations/', import.meta.url);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort();
  const apply = (f: string) =>
    db.exec(readFileSync(new URL(f, dir), 'utf8').split('--> statement-breakpoint').join('\n'));
  const at = tmpDataDir();
  mkdirSync(at, { recursive: true });
  const db = pinConnection(new Database(join(at, 'old.db')));
  for (const f of files.filter((f) => f < tag)) apply(f);
  return { db, upgrade: () => apply(files.find((f) => f.startsWith(tag))!) };
}

describe('msgctl migrate', () => {
  it('says the database is up to date', async () => {
    const s = await freshStore();
    const r = await runCli(['migrate'], s.opts());
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`up to date (${TAGS.length} migration(s) applied)`);
    expect(await runJson(['migrate'], s.opts())).toMatchObject({ applied: [], up_to_date: true });
  });

  onSqlite('refuses a directory that was never initialised', async () => {
    const dataDir = tmpDataDir();
    const r = await runCli(['migrate'], { dataDir });
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(/no msgd data directory at .*run "msgctl init"/);
  });
});

describe('a database migrated by a newer msgd', () => {
  it('is refused by migrate, init, ordinary commands and doctor, and left untouched', async () => {
    const s = await freshStore();
    const future = Date.now() + 365 * 86_400_000;
    await exec(s, sql`INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('future-schema', ${future})`);
    const tables = ['__drizzle_migrations', 'partners', 'audit_log'];
    const before = await dumpStore(s, tables);
    // init is the data directory's (it refuses on PostgreSQL whatever the schema: test/pg/msgctl-store.test.ts).
    const init = cliStoreKind === 'sqlite' ? [['init']] : [];
    for (const args of [['migrate'], ...init, ['partner', 'list'], ['balance', 'topup', 'acme', '5']]) {
      const r = await runCli(args, s.opts());
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stdout).toBe('');
      expect(oneErrorLine(r.stderr)).toMatch(
        /the database was migrated by a newer msgd .*run the newer msgd or restore a backup/,
      );
    }
    const d = await runCli(['doctor'], s.opts());
    expect(d.code).toBe(1);
    expect(d.stdout).toMatch(/fail\s+migrations\s+the database was migrated by a newer msgd/);
    expect(await dumpStore(s, tables)).toEqual(before);
  });
});

describe('a database with pending migrations', () => {
  it('is refused by ordinary commands with the fix named', async () => {
    const s = await freshStore();
    // Forget the applied migrations: to this build, all of them are now pending.
    await exec(s, sql`DELETE FROM __drizzle_migrations`);
    const r = await runCli(['partner', 'list'], s.opts());
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toBe(
      `msgctl: the database has ${TAGS.length} pending migration(s) (${TAGS.join(', ')}); run "msgctl migrate"`,
    );
    const d = await runCli(['--json', 'doctor'], s.opts());
    expect(d.code).toBe(1);
    expect(JSON.parse(d.stdout).checks.find((c: any) => c.name === 'migrations')).toMatchObject({
      message: expect.stringContaining(`${TAGS.length} pending: ${TAGS.join(', ')}`),
    });
  });
});

describe('a data directory that is not there', () => {
  onSqlite('gives one line naming the directory and msgctl init', async () => {
    const dataDir = join(tmpDataDir(), 'missing');
    const r = await runCli(['partner', 'list'], { dataDir });
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toBe(
      `msgctl: no msgd data directory at ${dataDir} (run "msgctl init" or start msgd once)`,
    );
  });
});

describe('the 0006 migration (provider_id_indexed)', () => {
  onSqlite('keeps every message stored before it findable by its provider id, and rewrites no row', async () => {
    const { db, upgrade } = await databaseBefore('0006');
    try {
      db.pragma('foreign_keys = OFF'); // messages with no partner row: only the index is under test
      const ins = db.prepare(
        `INSERT INTO messages (id, partner_id, direction, channel_type, "to", "from", content, status, provider_message_id, created_at, updated_at)
         VALUES (?, 'pt_1', 'outbound', ?, '+14155552671', '+15017250604', '{}', 'sent', ?, 1, 1)`,
      );
      ins.run('msg_old_sms', 'sms', 'SM11111111111111111111111111111111');
      ins.run('msg_old_wa', 'whatsapp', 'wamid.OLD1');
      ins.run('msg_old_queued', 'sms', null);
      upgrade();
      const find = db.prepare(
        'SELECT id FROM messages INDEXED BY messages_provider WHERE provider_message_id = ? AND provider_id_indexed = 1',
      );
      expect(find.get('SM11111111111111111111111111111111')).toEqual({ id: 'msg_old_sms' });
      expect(find.get('wamid.OLD1')).toEqual({ id: 'msg_old_wa' });
      expect(
        (
          db
            .prepare(
              'SELECT count(*) AS n FROM messages INDEXED BY messages_provider WHERE provider_id_indexed = 1 AND provider_message_id IS NOT NULL',
            )
            .get() as any
        ).n,
      ).toBe(2);
      expect(db.prepare('SELECT DISTINCT provider_id_indexed AS v FROM messages').all()).toEqual([{ v: 1 }]);
    } finally {
      db.close();
    }
  });
});

describe('the 0007 migration (no ledger_message index)', () => {
  onSqlite('drops the index and keeps every ledger entry, still listed by partner', async () => {
    const { db, upgrade } = await databaseBefore('0007');
    try {
      db.pragma('foreign_keys = OFF'); // entries with no partner row: only the ledger's indexes are under test
      const indexes = () =>
        (
          db
            .prepare(
              `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger_entries' ORDER BY name`,
            )
            .all() as { name: string }[]
        ).map((r) => r.name);
      expect(indexes()).toEqual(['ledger_message', 'ledger_partner']);
      const ins = db.prepare(
        `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, actor, created_at) VALUES ('pt_1', ?, ?, ?, ?, 'test', 1)`,
      );
      ins.run('topup', 1000, 1000, null);
      ins.run('debit', -10, 990, 'msg_1');
      upgrade();
      expect(indexes()).toEqual(['ledger_partner']);
      expect(
        db
          .prepare(
            `SELECT kind, balance_after, message_id FROM ledger_entries INDEXED BY ledger_partner WHERE partner_id = 'pt_1' ORDER BY id DESC`,
          )
          .all(),
      ).toEqual([
        { kind: 'debit', balance_after: 990, message_id: 'msg_1' },
        { kind: 'topup', balance_after: 1000, message_id: null },
      ]);
    } finally {
      db.close();
    }
  });
});
