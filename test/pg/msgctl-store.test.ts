import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PG_MIGRATIONS_DIR } from '../../src/db/pg/migrate.js';
import { cleanupTmp, runCli, spawnCli, tmpDataDir } from '../helpers/cli.js';
import { freshDatabase, withClient } from './helpers.js';

// msgctl on PostgreSQL: database.url (--database-url, MSGD_DATABASE_URL, the config file)
// selects it; msgctl migrate applies the schema under the migration lock; the commands that
// work on a data directory's SQLite file refuse, with one line and a non-zero exit, naming what
// does the job on PostgreSQL. The URL's password never appears in what msgctl prints.

const TAGS = (
  JSON.parse(readFileSync(join(PG_MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8')) as { entries: { tag: string }[] }
).entries.map((e) => e.tag);
const KEY = randomBytes(32).toString('hex');
const passwordOf = (url: string) => decodeURIComponent(new URL(url).password);

const db = freshDatabase();

function expectNoPassword(url: string, ...texts: string[]) {
  const pw = passwordOf(url);
  expect(pw.length).toBeGreaterThan(0);
  for (const t of texts) expect(t).not.toContain(pw);
}

describe('msgctl on PostgreSQL', () => {
  it('refuses an ordinary command on a database without the schema, and says to run msgctl migrate', async () => {
    const r = await runCli(['partner', 'list'], { env: { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/pending migration\(s\).*run "msgctl migrate"/);
    expectNoPassword(db.url, r.stdout, r.stderr);
  });

  it('migrates twice at once: both succeed, one applies every migration, the other finds none left', async () => {
    const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY };
    const [a, b] = await Promise.all([
      spawnCli(['--json', 'migrate'], { env }),
      spawnCli(['--json', 'migrate'], { env }),
    ]);
    expect([a.code, b.code], a.stderr + b.stderr).toEqual([0, 0]);
    const docs = [JSON.parse(a.stdout), JSON.parse(b.stdout)];
    const applied = docs.map((d) => d.applied as string[]).sort((x, y) => y.length - x.length);
    expect(applied).toEqual([TAGS, []]);
    for (const d of docs) {
      expect(d).toMatchObject({ up_to_date: true, migrations_applied_total: TAGS.length, backup: null });
      expect(d.database).toBe(db.url.replace(`:${passwordOf(db.url)}@`, ':***@'));
      expect(d.data_dir).toBeUndefined();
    }
    expectNoPassword(db.url, a.stdout, a.stderr, b.stdout, b.stderr);
    const rows = await withClient(db.url, (c) => c.query('SELECT count(*)::int AS n FROM __drizzle_migrations'));
    expect(rows.rows[0].n).toBe(TAGS.length);

    const again = await runCli(['migrate'], { env });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`The database is up to date (${TAGS.length} migration(s) applied).`);
  });

  it('takes the URL from --database-url, else MSGD_DATABASE_URL, else the config file', async () => {
    const nobody = (db: string) => `postgres://msgd:not-this-one@127.0.0.1:1/${db}`;
    const file = join(dirname(tmpDataDir()), 'msgd.json');
    writeFileSync(file, JSON.stringify({ database: { url: nobody('from_file') } }));
    // The file alone: its URL is the one used.
    const fromFile = await runCli(['migrate'], { env: { MSGD_CONFIG: file, MSGD_MASTER_KEY: KEY } });
    expect(fromFile.code).toBe(1);
    expect(fromFile.stderr).toContain('postgres://msgd:***@127.0.0.1:1/from_file');
    // The variable beats the file.
    const fromEnv = await runCli(['migrate'], {
      env: { MSGD_CONFIG: file, MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY },
    });
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    expect(fromEnv.stdout).toMatch(/^(Applied \d+ migration|The database is up to date)/);
    // The flag beats the variable.
    const fromFlag = await runCli(['--database-url', db.url, 'migrate'], {
      env: { MSGD_CONFIG: file, MSGD_DATABASE_URL: nobody('from_env'), MSGD_MASTER_KEY: KEY },
    });
    expect(fromFlag.code, fromFlag.stderr).toBe(0);
    expect(fromFlag.stdout).toContain(`The database is up to date (${TAGS.length} migration(s) applied).`);
    const wrongFlag = await runCli(['--database-url', nobody('from_flag'), 'migrate'], {
      env: { MSGD_CONFIG: file, MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY },
    });
    expect(wrongFlag.code).toBe(1);
    expect(wrongFlag.stderr).toContain('postgres://msgd:***@127.0.0.1:1/from_flag');
    expect(wrongFlag.stderr + fromFile.stderr).not.toContain('not-this-one');
  });

  it('needs the master key from MSGD_MASTER_KEY or masterKeyFile: one line when neither is set', async () => {
    const r = await runCli(['partner', 'list'], { env: { MSGD_DATABASE_URL: db.url } });
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^msgctl: no master key: on PostgreSQL \(database\.url\).*MSGD_MASTER_KEY.*masterKeyFile/);
  });

  it.each([
    [
      ['backup', '/tmp/never-written.db'],
      /msgctl backup copies a data directory's SQLite database.*pg_dump.*continuous archiving.*no backup was taken/,
    ],
    [['restore', '/tmp/no-such-backup.db'], /msgctl restore .*pg_restore.*nothing was restored/],
    [['init'], /msgctl init .*msgctl migrate; nothing was created/],
  ])('msgctl %j refuses on PostgreSQL with one line and exit 1, touching no data directory', async (args, line) => {
    const dataDir = tmpDataDir();
    const r = await runCli(args, { dataDir, env: { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY } });
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(line);
    expect(lines[0]).toContain(db.url.replace(`:${passwordOf(db.url)}@`, ':***@'));
    expect(r.stdout).toBe('');
    expectNoPassword(db.url, r.stderr);
    expect(existsSync(join(dataDir, 'msgd.db'))).toBe(false);
  });

  it('says which URL it could not reach, the password masked, and exits 1', async () => {
    const url = 'postgres://msgd:s3cret-pw@127.0.0.1:1/msgd';
    const r = await runCli(['partner', 'list'], { env: { MSGD_DATABASE_URL: url, MSGD_MASTER_KEY: KEY } });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      'msgctl: cannot use PostgreSQL at postgres://msgd:***@127.0.0.1:1/msgd: connection refused (is the server running, and on that host and port?)',
    );
  });
});

process.on('exit', cleanupTmp);
