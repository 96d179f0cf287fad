import { chmodSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SENDGRID_VECTOR } from '../helpers/vectors.js';
import { startTestServer } from '../helpers/server.js';
import { type Sql, sql } from '../../src/db/sql.js';
import {
  type CliStore,
  cliStore,
  cliStoreKind,
  oneErrorLine,
  runCli,
  runJson,
  type RunOptions,
} from '../helpers/cli.js';

let s: CliStore;
const run = (args: string[], opts: RunOptions = {}) => runCli(args, s.opts(opts));
const json = (args: string[], opts: RunOptions = {}) => runJson(args, s.opts(opts));
/** SQL on the store, as something other than msgctl would write it. */
const exec = (q: Sql) => s.withCtx((ctx) => ctx.store.run(q));
const rows = <R>(q: Sql) => s.withCtx((ctx) => ctx.store.all<R>(q));

async function doctorJson(env: Record<string, string> = {}) {
  const r = await runCli(['--json', 'doctor'], s.opts({ env }));
  return { code: r.code, stderr: r.stderr, report: JSON.parse(r.stdout) };
}
const check = (report: any, name: string) => report.checks.find((c: any) => c.name === name);
/**
 * The warnings of the store itself, before any data: none on SQLite; on PostgreSQL the test
 * cluster's durability settings (fsync off, test/pg/cluster.ts), which test/pg/doctor.test.ts checks.
 */
let storeWarnings: number;
/** "N warning(s)" as doctor's summary says it, with the store's own. */
const warnings = (n: number) => `${n + storeWarnings} warning${n + storeWarnings === 1 ? '' : 's'}`;
/** What doctor calls the store msgd ran on. */
const place = cliStoreKind === 'postgres' ? 'this database' : 'this data directory';

beforeAll(async () => {
  s = await cliStore();
  storeWarnings = (await doctorJson()).report.warnings;
  await json(['partner', 'create', 'acme', '--name', 'Acme']);
  await json(['balance', 'topup', 'acme', '20']);
  await json(['gateway', 'add', 'sandbox', '--name', 'demo']);
  await json(['channel', 'assign', 'acme', 'demo', 'sms', '--from', '+15550001111']);
  await json(['price', 'set', 'sms', '0.01']);
});
afterAll(() => s.drop());

describe('msgctl doctor', () => {
  // The data directory and its key file; test/pg/doctor.test.ts checks PostgreSQL's own.
  it.skipIf(cliStoreKind === 'postgres')('passes on a healthy data directory', async () => {
    const r = await run(['doctor']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/ok\s+master key\s+.*master\.key \(mode 0600\)/);
    expect(r.stdout).toMatch(/ok\s+ledger/);
    expect(r.stdout).toMatch(/0 failed, 0 warnings/);
    const { code, report } = await doctorJson();
    expect(code).toBe(0);
    expect(report).toMatchObject({ ok: true, failures: 0, warnings: 0 });
    expect(report.checks.map((c: any) => c.name)).toEqual(
      expect.arrayContaining([
        'data directory',
        'database',
        'master key',
        'migrations',
        'ledger',
        'gateway secrets',
        'prices',
        'channels',
        'webhook verification',
      ]),
    );
  });

  // The key file in the data directory; test/cli/master-key-file.test.ts checks masterKeyFile's.
  it.skipIf(cliStoreKind === 'postgres')('fails (exit 1) when the key file is readable by others', async () => {
    const key = join(s.dataDir, 'master.key');
    chmodSync(key, 0o644);
    try {
      const r = await run(['doctor']);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/fail\s+master key\s+.*mode 0644; it must be 0600/);
      expect(oneErrorLine(r.stderr)).toBe('msgctl: doctor: 1 check failed');
      const { code, report } = await doctorJson();
      expect(code).toBe(1);
      expect(report.ok).toBe(false);
      expect(check(report, 'master key').status).toBe('fail');
    } finally {
      chmodSync(key, 0o600);
    }
    expect((await run(['doctor'])).code).toBe(0);
  });

  it('fails when a balance no longer matches its ledger entries', async () => {
    await exec(sql`UPDATE partners SET balance = balance + 1000000 WHERE slug = 'acme'`);
    try {
      const { code, report } = await doctorJson();
      expect(code).toBe(1);
      expect(check(report, 'ledger')).toMatchObject({
        status: 'fail',
        message: expect.stringContaining('acme: balance 21.00 but entries sum to 20.00'),
      });
    } finally {
      await exec(sql`UPDATE partners SET balance = balance - 1000000 WHERE slug = 'acme'`);
    }
    expect((await doctorJson()).report.ok).toBe(true);
  });

  it('sees a one micro-unit mismatch past 2^53, and a top-up past the bound is refused with nothing written', async () => {
    const [saved] = await rows<{ balance: number }>(sql`SELECT balance FROM partners WHERE slug = 'acme'`);
    const entries = await rows<{ id: number; amount: number; balance_after: number }>(
      sql`SELECT id, amount, balance_after FROM ledger_entries`,
    );
    await exec(
      sql`UPDATE ledger_entries SET amount = CASE WHEN id = (SELECT MIN(id) FROM ledger_entries) THEN CAST(${2n ** 53n} AS BIGINT) ELSE 0 END,
            balance_after = CAST(${2n ** 53n + 1n} AS BIGINT)`,
    );
    await exec(sql`UPDATE partners SET balance = CAST(${2n ** 53n + 1n} AS BIGINT) WHERE slug = 'acme'`);
    try {
      const { code, report } = await doctorJson();
      expect(code).toBe(1);
      expect(check(report, 'ledger')).toMatchObject({
        status: 'fail',
        message: 'acme: balance 9007199254.740993 but entries sum to 9007199254.740992',
      });
    } finally {
      for (const e of entries)
        await exec(
          sql`UPDATE ledger_entries SET amount = ${e.amount}, balance_after = ${e.balance_after} WHERE id = ${e.id}`,
        );
      await exec(sql`UPDATE partners SET balance = ${saved.balance} WHERE slug = 'acme'`);
    }
    expect((await doctorJson()).report.ok).toBe(true);
    const ledgerCount = () => rows(sql`SELECT COUNT(*) AS n FROM ledger_entries`);
    const before = await ledgerCount();
    const r = await run(['balance', 'topup', 'acme', '999999999.99']);
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(
      /would take the balance of acme from 20\.00 to 1000000019\.99 USD, past the largest balance/,
    );
    expect(await ledgerCount()).toEqual(before);
    expect((await doctorJson()).report.ok).toBe(true);
  });

  it('fails when a ledger entry was edited', async () => {
    await exec(sql`UPDATE ledger_entries SET amount = amount * 2`);
    try {
      const { code, report } = await doctorJson();
      expect(code).toBe(1);
      expect(check(report, 'ledger').status).toBe('fail');
    } finally {
      await exec(sql`UPDATE ledger_entries SET amount = amount / 2`);
    }
  });

  it('warns, and still exits 0, about unpriced channels, unverifiable webhooks, no public URL and disabled gateways in use', async () => {
    await json(
      [
        'gateway',
        'add',
        'meta_messenger',
        '--name',
        'fb',
        '--set',
        'page_id=4242',
        '--secret-env',
        'page_access_token=PAT',
      ],
      { env: { PAT: 'pat-1' } },
    );
    await json(['gateway', 'add', 'sendgrid', '--name', 'sg', '--secret-env', 'api_key=SGK'], {
      env: { SGK: 'SG.key' },
    });
    await json(['channel', 'assign', 'acme', 'fb', 'messenger']);
    await json(['gateway', 'update', 'demo', '--disable']);
    const r = await run(['doctor']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/warn\s+webhook verification\s+no app_secret on fb; no webhook_public_key on sg/);
    expect(r.stdout).toMatch(/warn\s+public URL\s+server.publicUrl is not set but fb, sg need it:/);
    expect(r.stdout).toMatch(new RegExp(`0 failed, ${warnings(4)}, \\d+ ok\n$`));
    expect(r.stdout).not.toContain('(s)');
    expect(r.stdout).toMatch(/warn\s+prices\s+no price for acme messenger/);
    expect(r.stdout).toMatch(/warn\s+channels\s+.*acme sms via demo/);
    const { report } = await doctorJson();
    expect(report).toMatchObject({ ok: true, failures: 0, warnings: 4 + storeWarnings });

    await json(['gateway', 'update', 'fb', '--secret-env', 'app_secret=APP'], { env: { APP: 'app-1' } });
    await json(['gateway', 'update', 'sg', '--secret-env', 'webhook_public_key=PK'], {
      env: { PK: SENDGRID_VECTOR.publicKey },
    });
    await json(['price', 'set', 'messenger', '0.005', '--partner', 'acme']);
    await json(['gateway', 'update', 'demo', '--enable']);
    expect((await doctorJson({ MSGD_PUBLIC_URL: 'https://msgd.example.com' })).report).toMatchObject({
      ok: true,
      warnings: storeWarnings,
    });
    await json(['gateway', 'remove', 'sg', '--yes']);
    const one = await run(['doctor']);
    expect(one.stdout).toMatch(/server.publicUrl is not set but fb needs it:/);
    expect(one.stdout).toMatch(new RegExp(`0 failed, ${warnings(1)}, \\d+ ok\n$`));
    expect(one.stdout).toMatch(/ok\s+ledger\s+1 partner: every balance equals the sum of its entries/);
  });

  it("warns about a Meta gateway calling a Graph version older than msgd's default", async () => {
    await json(['gateway', 'update', 'fb', '--set', 'api_version=v21.0']);
    const r = await run(['doctor'], { env: { MSGD_PUBLIC_URL: 'https://msgd.example.com' } });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /warn\s+graph version\s+fb calls Graph v21\.0, older than msgd's v26\.0.*--set api_version=v26\.0/,
    );
    await json(['gateway', 'update', 'fb', '--unset', 'api_version']);
    expect(
      check((await doctorJson({ MSGD_PUBLIC_URL: 'https://msgd.example.com' })).report, 'graph version'),
    ).toBeUndefined();
  });

  it('warns about an SMTP gateway set to implicit TLS on port 587', async () => {
    await json([
      'gateway',
      'add',
      'smtp',
      '--name',
      'mx-tls',
      '--set',
      'host=mx.example.com',
      '--set',
      'port=587',
      '--set',
      'secure=true',
    ]);
    const r = await run(['doctor'], { env: { MSGD_PUBLIC_URL: 'https://msgd.example.com' } });
    expect(r.stdout).toMatch(/warn\s+smtp port\s+mx-tls: secure .* on port 587.*--unset port/);
    await json(['gateway', 'update', 'mx-tls', '--unset', 'port']);
    expect(
      check((await doctorJson({ MSGD_PUBLIC_URL: 'https://msgd.example.com' })).report, 'smtp port'),
    ).toBeUndefined();
    await json(['gateway', 'remove', 'mx-tls', '--yes']);
  });

  it('fails when the master key does not open the stored secrets', async () => {
    const { code, report } = await (async () => {
      const r = await runCli(['--json', 'doctor'], s.opts({ env: { MSGD_MASTER_KEY: 'ab'.repeat(32) } }));
      return { code: r.code, report: JSON.parse(r.stdout) };
    })();
    expect(code).toBe(1);
    expect(check(report, 'master key')).toMatchObject({ status: 'ok', message: 'from MSGD_MASTER_KEY' });
    expect(check(report, 'gateway secrets')).toMatchObject({
      status: 'fail',
      message: expect.stringMatching(
        /^the secrets of \d+ gateways? do not open with this master key \(gw_.*\): it is probably not the key they were written with$/,
      ),
    });
  });

  // A data directory's own check: on PostgreSQL there is none to miss.
  it.skipIf(cliStoreKind === 'postgres')('fails on a missing data directory', async () => {
    const r = await runCli(['doctor'], { dataDir: join(s.dataDir, 'nope') });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/fail\s+data directory\s+.*does not exist/);
  });

  it('says which config file it read, and warns when msgd on this data directory read another', async () => {
    const own = await cliStore();
    const dir = own.dataDir;
    const file = join(dirname(dir), 'msgd.json');
    writeFileSync(file, JSON.stringify({ dataDir: dir, server: { publicUrl: 'https://gw.example.com' } }));
    const doctor = async (args: string[], env: Record<string, string> = {}) => {
      const r = await runCli(['--json', ...args, 'doctor'], { env: { ...own.env, ...env } });
      return JSON.parse(r.stdout);
    };
    const server = await startTestServer({}, { dataDir: dir, env: { ...own.env, MSGD_CONFIG: file } });
    try {
      // msgctl on the data directory alone: none, and msgd read the file.
      const bare = await doctor(['--data-dir', dir]);
      expect(bare.config_file).toBeNull();
      expect(check(bare, 'configuration')).toMatchObject({
        status: 'ok',
        message: 'none: defaults and MSGD_* variables',
      });
      const warned = check(bare, 'msgd configuration');
      expect(warned.status).toBe('warn');
      expect(warned.message).toContain(`the msgd running on ${place} read ${file}, msgctl read none`);
      expect(warned.message).toContain(`--config ${file}`);
      const text = await runCli(['--data-dir', dir, 'doctor'], { env: own.env });
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/ok\s+configuration\s+none: defaults and MSGD_\* variables/);
      expect(text.stdout).toMatch(new RegExp(`warn\\s+msgd configuration\\s+the msgd running on ${place} read `));

      // The same file, by flag or by MSGD_CONFIG: no warning.
      for (const same of [await doctor(['--config', file]), await doctor([], { MSGD_CONFIG: file })]) {
        expect(same.config_file).toBe(file);
        expect(check(same, 'configuration').message).toBe(file);
        expect(check(same, 'msgd configuration')).toMatchObject({
          status: 'ok',
          message: `the msgd running on ${place} read the same (${file})`,
        });
        expect(same.warnings).toBe(storeWarnings);
      }
    } finally {
      await server.stop();
    }
    // Stopped, it still knows what the last msgd read.
    const after = await doctor(['--data-dir', dir]);
    expect(check(after, 'msgd configuration').message).toMatch(new RegExp(`^the msgd that last ran on ${place} read `));
    await own.drop();
  });
});
