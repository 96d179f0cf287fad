import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { sealJson } from '../../src/core/secrets.js';
import { PG_MIGRATIONS_DIR } from '../../src/db/pg/migrate.js';
import { cleanupTmp, oneErrorLine, runCli } from '../helpers/cli.js';
import { freshDatabase, migratedDatabase, pgAdminUrl, withClient } from './helpers.js';

// msgctl doctor on PostgreSQL: the server's own checks (reachable, version, takes writes, UTF8,
// durability settings), the master key's source and the migrations take the place of the
// SQLite file's; the checks of msgd's data (ledger, stored secrets, gateways, prices, channels)
// are the same as on SQLite, read through the store. The URL's password is never printed.

const KEY = randomBytes(32);
const OTHER_KEY = randomBytes(32);
const TAGS = (
  JSON.parse(readFileSync(join(PG_MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8')) as { entries: { tag: string }[] }
).entries.map((e) => e.tag);

const db = migratedDatabase();
const empty = freshDatabase();
const env = (key: Buffer | null = KEY) => ({
  MSGD_DATABASE_URL: db.url,
  ...(key ? { MSGD_MASTER_KEY: key.toString('hex') } : {}),
});
const masked = () => db.url.replace(`:${decodeURIComponent(new URL(db.url).password)}@`, ':***@');
const sqlOn = (text: string, values: unknown[] = []) => withClient(db.url, (c) => c.query(text, values));
// A database's settings, from another database: one set read-only refuses even their reset.
const alterDb = (setting: string) =>
  withClient(pgAdminUrl(), (c) => c.query(`ALTER DATABASE ${JSON.stringify(db.name)} ${setting}`));

async function doctor(key: Buffer | null = KEY) {
  const r = await runCli(['doctor'], { env: env(key) });
  expect(r.stdout + r.stderr).not.toContain(decodeURIComponent(new URL(db.url).password));
  return r;
}
async function doctorJson(key: Buffer | null = KEY) {
  const r = await runCli(['--json', 'doctor'], { env: env(key) });
  return { code: r.code, stderr: r.stderr, report: JSON.parse(r.stdout) };
}
const check = (report: any, name: string) => report.checks.find((c: any) => c.name === name);

beforeAll(async () => {
  // A partner with 20.00 topped up, a sandbox gateway whose secrets are sealed with KEY, an SMS
  // channel through it, and a price for SMS: what msgctl partner create, balance topup, gateway
  // add, channel assign and price set leave.
  const now = Date.now();
  await sqlOn(
    `INSERT INTO partners (id, slug, name, balance, created_at, updated_at) VALUES ('p_acme', 'acme', 'Acme', 20000000, $1, $1)`,
    [now],
  );
  await sqlOn(
    `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, actor, created_at)
     VALUES ('p_acme', 'topup', 20000000, 20000000, 'cli:test', $1)`,
    [now],
  );
  await sqlOn(
    `INSERT INTO gateways (id, kind, name, secrets, created_at, updated_at) VALUES ('gw_demo', 'sandbox', 'demo', $1, $2, $2)`,
    [sealJson(KEY, {}), now],
  );
  await sqlOn(
    `INSERT INTO channels (id, partner_id, gateway_id, type, sender, created_at, updated_at)
     VALUES ('ch_sms', 'p_acme', 'gw_demo', 'sms', '+15550001111', $1, $1)`,
    [now],
  );
  await sqlOn(
    `INSERT INTO prices (id, channel_type, amount, created_at, updated_at) VALUES ('pr_sms', 'sms', 10000, $1, $1)`,
    [now],
  );
});

describe('msgctl doctor on PostgreSQL', () => {
  // The version is the server's own text: `18.4`, or a distribution's `15.18 (Debian 15.18-0+deb12u1)`.
  it('passes on a healthy database: the server, the key, the migrations and the data checked', async () => {
    const r = await doctor();
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    const line = (status: string, name: string, details: string) =>
      expect(r.stdout).toMatch(new RegExp(`${status}\\s+${name}\\s+${details}`));
    line(
      'ok',
      'database',
      `PostgreSQL \\d+\\.\\d+.*? at ${masked().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: answers and takes writes`,
    );
    line('ok', 'master key', 'from MSGD_MASTER_KEY');
    line('ok', 'migrations', `${TAGS.length} applied, none pending`);
    line('ok', 'encoding', 'the database is UTF8');
    line('ok', 'ledger', '1 partner: every balance equals the sum of its entries');
    line('ok', 'gateway secrets', '1 gateway, secrets readable with this master key');
    line('ok', 'prices', '1 active channel, all priced');
    line('ok', 'channels', 'no active channel uses a disabled gateway');
    // The test cluster runs with fsync and full_page_writes off (test/pg/cluster.ts): said, not failed.
    line('warn', 'durability', 'fsync, full_page_writes are off: a crash of the server or its machine can lose sends');
    expect(r.stdout).toMatch(/0 failed, 1 warning, \d+ ok/);
    // Nothing about a data directory: no SQLite file, no key file.
    expect(r.stdout).not.toMatch(/data directory|integrity|msgd\.db|master\.key/);
  });

  it('--json has the SQLite shape, with the masked URL in place of the data directory', async () => {
    const { code, report } = await doctorJson();
    expect(code).toBe(0);
    expect(report).toMatchObject({ ok: true, database: masked(), config_file: null, failures: 0, warnings: 1 });
    expect(report.data_dir).toBeUndefined();
    expect(Object.keys(report)).toEqual(['ok', 'database', 'config_file', 'failures', 'warnings', 'checks']);
    for (const c of report.checks) expect(Object.keys(c).sort()).toEqual(['message', 'name', 'status']);
    expect(report.checks.map((c: any) => c.name)).toEqual([
      'configuration',
      'database',
      'encoding',
      'durability',
      'master key',
      'migrations',
      'ledger',
      'gateway secrets',
      'webhook secrets',
      'TOTP secrets',
      'webhook verification',
      'prices',
      'channels',
    ]);
  });

  it('fails when a balance no longer matches its ledger entries, naming the partner', async () => {
    await sqlOn(`UPDATE partners SET balance = balance + 1000000 WHERE slug = 'acme'`);
    try {
      const r = await doctor();
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(
        /fail\s+ledger\s+acme: balance 21\.00 but entries sum to 20\.00 \(last entry says 20\.00\)/,
      );
      expect(oneErrorLine(r.stderr)).toBe('msgctl: doctor: 1 check failed');
      const { code, report } = await doctorJson();
      expect(code).toBe(1);
      expect(report.ok).toBe(false);
      expect(check(report, 'ledger').status).toBe('fail');
    } finally {
      await sqlOn(`UPDATE partners SET balance = balance - 1000000 WHERE slug = 'acme'`);
    }
    expect((await doctor()).code).toBe(0);
  });

  it('names the gateways whose secrets the master key does not open', async () => {
    // Another key than the one the secrets were sealed with: none opens.
    const wrong = await doctorJson(OTHER_KEY);
    expect(wrong.code).toBe(1);
    expect(check(wrong.report, 'gateway secrets')).toEqual({
      name: 'gateway secrets',
      status: 'fail',
      message:
        'the secrets of 1 gateway do not open with this master key (gw_demo): it is probably not the key they were written with',
    });
    // One gateway written with another key, beside one written with this one.
    await sqlOn(
      `INSERT INTO gateways (id, kind, name, secrets, status, created_at, updated_at) VALUES ('gw_other', 'sandbox', 'other', $1, 'disabled', 0, 0)`,
      [sealJson(OTHER_KEY, {})],
    );
    try {
      const r = await doctor();
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(
        /fail\s+gateway secrets\s+the secrets of 1 of 2 gateways do not open with this master key \(gw_other\): they were probably written with another key/,
      );
    } finally {
      await sqlOn(`DELETE FROM gateways WHERE id = 'gw_other'`);
    }
  });

  it('without a master key: fails that check, and still checks the server and the migrations', async () => {
    const { code, report } = await doctorJson(null);
    expect(code).toBe(1);
    expect(report.failures).toBe(1);
    expect(check(report, 'master key')).toMatchObject({
      status: 'fail',
      message: expect.stringMatching(/^no master key: on PostgreSQL .*MSGD_MASTER_KEY.*masterKeyFile/),
    });
    expect(check(report, 'database').status).toBe('ok');
    expect(check(report, 'migrations').status).toBe('ok');
    // The stored secrets cannot be checked without it.
    expect(check(report, 'gateway secrets')).toBeUndefined();
  });

  it('names the pending migrations of a schema behind, and refuses a schema from a newer msgd', async () => {
    const last = (
      await sqlOn(
        'SELECT hash, created_at::text AS created_at FROM __drizzle_migrations ORDER BY created_at DESC LIMIT 1',
      )
    ).rows[0] as { hash: string; created_at: string };
    await sqlOn('DELETE FROM __drizzle_migrations WHERE created_at = $1', [last.created_at]);
    try {
      const r = await doctor();
      // msgd applies them at its start: a warning, as on SQLite.
      expect(r.code, r.stdout).toBe(0);
      expect(r.stdout).toMatch(
        new RegExp(
          `warn\\s+migrations\\s+1 pending: ${TAGS.at(-1)} \\(msgctl migrate, or msgd applies them at start\\)`,
        ),
      );
    } finally {
      await sqlOn('INSERT INTO __drizzle_migrations (hash, created_at) VALUES ($1, $2)', [last.hash, last.created_at]);
    }
    await sqlOn('INSERT INTO __drizzle_migrations (hash, created_at) VALUES ($1, $2)', ['newer', '99999999999999']);
    try {
      const { code, report } = await doctorJson();
      expect(code).toBe(1);
      expect(check(report, 'migrations')).toMatchObject({ status: 'fail', message: expect.stringMatching(/newer/) });
      // Nothing is read from a schema this msgd does not know.
      expect(check(report, 'ledger')).toBeUndefined();
    } finally {
      await sqlOn('DELETE FROM __drizzle_migrations WHERE hash = $1', ['newer']);
    }
    expect((await doctor()).code).toBe(0);
  });

  it("fails on a database without msgd's schema, naming every migration, and reads nothing else", async () => {
    const r = await runCli(['--json', 'doctor'], {
      env: { MSGD_DATABASE_URL: empty.url, MSGD_MASTER_KEY: KEY.toString('hex') },
    });
    const report = JSON.parse(r.stdout);
    expect(r.code).toBe(1);
    expect(check(report, 'migrations')).toEqual({
      name: 'migrations',
      status: 'fail',
      message: `${TAGS.length} pending: ${TAGS.join(', ')} (msgctl migrate, or msgd applies them at start)`,
    });
    expect(check(report, 'database').status).toBe('ok');
    expect(check(report, 'ledger')).toBeUndefined();
    expect(report.failures).toBe(1);
  });

  it('fails on a database that takes no writes, and warns when synchronous_commit is off', async () => {
    await alterDb('SET default_transaction_read_only = on');
    try {
      const { code, report } = await doctorJson();
      expect(code).toBe(1);
      expect(check(report, 'database')).toEqual({
        name: 'database',
        status: 'fail',
        message: expect.stringMatching(
          /^PostgreSQL \d+\.\d+.*? at .* is read-only \(default_transaction_read_only is on for this database or user\): msgd cannot write$/,
        ),
      });
    } finally {
      await alterDb('RESET default_transaction_read_only');
    }
    await alterDb('SET synchronous_commit = off');
    try {
      const { code, report } = await doctorJson();
      expect(code).toBe(0);
      expect(check(report, 'durability')).toMatchObject({
        status: 'warn',
        message: expect.stringMatching(
          /^fsync, synchronous_commit, full_page_writes are off: .*\(set fsync = on, synchronous_commit = on, full_page_writes = on\)$/,
        ),
      });
    } finally {
      await alterDb('RESET synchronous_commit');
    }
  });

  it('says which URL it could not reach, the password masked, and exits 1', async () => {
    const r = await runCli(['--json', 'doctor'], {
      env: { MSGD_DATABASE_URL: 'postgres://msgd:s3cret-pw@127.0.0.1:1/msgd', MSGD_MASTER_KEY: KEY.toString('hex') },
    });
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout);
    expect(report.database).toBe('postgres://msgd:***@127.0.0.1:1/msgd');
    expect(check(report, 'database')).toEqual({
      name: 'database',
      status: 'fail',
      message:
        'cannot use PostgreSQL at postgres://msgd:***@127.0.0.1:1/msgd: connection refused (is the server running, and on that host and port?)',
    });
    expect(r.stdout + r.stderr).not.toContain('s3cret-pw');
  });
});

process.on('exit', cleanupTmp);
