import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint } from '../../src/core/endpoints.js';
import { sealJson } from '../../src/core/secrets.js';
import { startEnrolment } from '../../src/core/two-factor.js';
import { sql } from '../../src/db/sql.js';
import {
  type CliStore,
  cleanupTmp,
  cliStore,
  cliStoreKind,
  oneErrorLine,
  runCli,
  runJson,
  tmpDataDir,
  type CliResult,
} from '../helpers/cli.js';

// The masterKeyFile setting, with real key files and a real store: which files are refused and
// how they are named, what wins when two keys are given, doctor opening every stored secret,
// backups and restores with it. No run may print the key.

/** init and the data directory's key file, backups and restores: SQLite's. */
const onSqlite = it.skipIf(cliStoreKind === 'postgres');
const stores: CliStore[] = [];
/** A store whose every run is given the key in `good` (MSGD_MASTER_KEY_FILE), dropped at the end. */
async function keyFileStore(): Promise<CliStore> {
  const s = await cliStore({ key: { MSGD_MASTER_KEY_FILE: good } });
  stores.push(s);
  return s;
}

const root = dirname(tmpDataDir());
const key = randomBytes(32);
const other = randomBytes(32);
const outputs: CliResult[] = [];

/** A key file with this text and mode, in the test's temp dir. */
function keyFile(name: string, text: string, mode = 0o600): string {
  const file = join(root, name);
  writeFileSync(file, text, { mode });
  chmodSync(file, mode);
  return file;
}

async function run(args: string[], opts: Parameters<typeof runCli>[1] = {}): Promise<CliResult> {
  const r = await runCli(args, opts);
  outputs.push(r);
  return r;
}

const good = keyFile('good.key', `${key.toString('hex')}\n`);

afterAll(async () => {
  for (const s of stores.splice(0)) await s.drop();
  // Whatever each run printed, in any of the forms a key is written in.
  for (const k of [key, other]) {
    for (const text of [k.toString('hex'), k.toString('base64')]) {
      for (const r of outputs) {
        expect(r.stdout).not.toContain(text);
        expect(r.stderr).not.toContain(text);
      }
    }
  }
  cleanupTmp();
});

describe('a key file msgctl refuses', () => {
  let s: CliStore;
  beforeAll(async () => {
    s = await keyFileStore();
  });

  it.each([
    ['readable by everyone', 0o644],
    ['readable by the group', 0o640],
    ['writable by others', 0o602],
  ])('%s: one line naming the file and the fix', async (_what, mode) => {
    const file = keyFile(`mode-${mode.toString(8)}.key`, `${key.toString('hex')}\n`, mode);
    const r = await run(['--master-key-file', file, 'partner', 'list'], s.opts());
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(oneErrorLine(r.stderr)).toBe(
      `msgctl: the master key file ${file} has mode 0${mode.toString(8)}: other accounts may read or change it; it must be readable by its owner alone (chmod 600 ${file})`,
    );
    chmodSync(file, 0o600);
    expect((await run(['--master-key-file', file, 'partner', 'list'], s.opts())).code).toBe(0);
  });

  it('missing, a directory, or holding no key: says so, and never what the file holds', async () => {
    const missing = join(root, 'nope.key');
    const m = await run(['--master-key-file', missing, 'partner', 'list'], s.opts());
    expect(oneErrorLine(m.stderr)).toMatch(
      new RegExp(
        `^msgctl: the master key file ${missing} does not exist \\(set by masterKeyFile, MSGD_MASTER_KEY_FILE or --master-key-file\\): .*openssl rand -hex 32`,
      ),
    );

    const dir = join(root, 'a-dir');
    mkdirSync(dir, { mode: 0o700 });
    const d = await run(['--master-key-file', dir, 'partner', 'list'], s.opts());
    expect(oneErrorLine(d.stderr)).toBe(`msgctl: the master key file ${dir} is not a regular file`);

    // 31 bytes, two keys, and text that is no key: the file's content is never echoed.
    for (const text of [
      randomBytes(31).toString('hex'),
      `${key.toString('hex')}\n${other.toString('hex')}\n`,
      'password=hunter2-do-not-print',
    ]) {
      const file = keyFile('bad.key', text);
      const r = await run(['--master-key-file', file, 'partner', 'list'], s.opts());
      expect(r.code).toBe(1);
      expect(oneErrorLine(r.stderr)).toBe(
        `msgctl: the master key file ${file} does not hold a master key: it must hold 32 bytes written as 64 hex characters or base64 on one line (openssl rand -hex 32)`,
      );
      expect(r.stderr).not.toContain('hunter2');
    }
  });

  it('MSGD_MASTER_KEY and a key file both given: refused as ambiguous, whichever way the file is named', async () => {
    const env = { MSGD_MASTER_KEY: key.toString('hex') };
    const expected = `msgctl: two master keys are given, MSGD_MASTER_KEY and the key file ${good} (masterKeyFile): keep one (unset MSGD_MASTER_KEY, or masterKeyFile, MSGD_MASTER_KEY_FILE and --master-key-file)`;
    const byFlag = await run(['--master-key-file', good, 'partner', 'list'], s.opts({ env }));
    expect(byFlag.code).toBe(1);
    expect(oneErrorLine(byFlag.stderr)).toBe(expected);
    const byEnv = await run(['partner', 'list'], s.opts({ env: { ...env, MSGD_MASTER_KEY_FILE: good } }));
    expect(oneErrorLine(byEnv.stderr)).toBe(expected);
    const config = join(root, 'both.json');
    writeFileSync(config, JSON.stringify({ masterKeyFile: good }));
    const byConfig = await run(['--config', config, 'partner', 'list'], s.opts({ env }));
    expect(oneErrorLine(byConfig.stderr)).toBe(expected);
  });
});

describe('a key file msgctl takes', () => {
  onSqlite(
    'init with a 0600 key file writes no master.key; the flag, MSGD_MASTER_KEY_FILE and the config file all name it',
    async () => {
      const dataDir = tmpDataDir();
      const r = await run(['--json', '--master-key-file', good, 'init'], { dataDir });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).master_key).toEqual({ source: 'master_key_file', path: good, mode: '0600' });
      expect(existsSync(join(dataDir, 'master.key'))).toBe(false);

      const add = await run(
        ['gateway', 'add', 'twilio', '--name', 'tw', '--set', 'account_sid=AC1', '--secret-stdin', 'auth_token'],
        { dataDir, stdin: 'token-1', env: { MSGD_MASTER_KEY_FILE: good } },
      );
      expect(add.code, add.stderr).toBe(0);

      const config = join(root, 'key-file.json');
      writeFileSync(config, JSON.stringify({ masterKeyFile: good }));
      const doctor = await run(['--config', config, 'doctor'], { dataDir });
      expect(doctor.code, doctor.stdout).toBe(0);
      expect(doctor.stdout).toMatch(new RegExp(`ok +master key +${good} \\(masterKeyFile, mode 0600\\)`));
      expect(doctor.stdout).toMatch(/ok +gateway secrets +1 gateway, secrets readable with this master key/);

      // --master-key-file beats MSGD_MASTER_KEY_FILE (which here names no file).
      const flag = await run(['--master-key-file', good, 'gateway', 'show', 'tw'], {
        dataDir,
        env: { MSGD_MASTER_KEY_FILE: join(root, 'nope.key') },
      });
      expect(flag.code, flag.stderr).toBe(0);
      expect(flag.stdout).not.toContain('token-1');
    },
  );

  it('the same key as MSGD_MASTER_KEY, or as base64 among comment lines, opens the same secrets', async () => {
    const s = await cliStore({ key: { MSGD_MASTER_KEY: key.toString('hex') } });
    stores.push(s);
    await runJson(
      ['gateway', 'add', 'twilio', '--name', 'tw', '--set', 'account_sid=AC1', '--secret-stdin', 'auth_token'],
      s.opts({ stdin: 'token-2' }),
    );
    const b64 = keyFile('b64.key', `# msgd master key\n\n${key.toString('base64')}\n`);
    const r = await run(['--master-key-file', b64, 'doctor'], {
      dataDir: s.dataDir,
      env: { MSGD_DATABASE_URL: s.env.MSGD_DATABASE_URL },
    });
    expect(r.code, r.stdout).toBe(0);
  });
});

describe('msgctl doctor with the wrong key', () => {
  let s: CliStore;
  const ids: { gateways: string[]; endpoint: string; user: string } = { gateways: [], endpoint: '', user: '' };

  beforeAll(async () => {
    s = await keyFileStore();
    const opts = s.opts();
    const partner = await runJson(['partner', 'create', 'acme', '--name', 'Acme'], opts);
    for (const name of ['tw-a', 'tw-b']) {
      const g = await runJson(
        ['gateway', 'add', 'twilio', '--name', name, '--set', 'account_sid=AC1', '--secret-stdin', 'auth_token'],
        { ...opts, stdin: `secret-of-${name}` },
      );
      ids.gateways.push(g.id);
    }
    await s.withCtx(async (ctx) => {
      ids.endpoint = (await createEndpoint(ctx, partner.id, { url: 'https://hooks.example.com/msgd' })).endpoint.id;
      ids.user = 'usr_totp1';
      const now = Date.now();
      await ctx.store.run(
        sql`INSERT INTO users (id, email, created_at, updated_at) VALUES (${ids.user}, 'ops@example.com', ${now}, ${now})`,
      );
      await startEnrolment(ctx, ids.user);
    });
  });

  it('passes with the right key and says how many secrets of each kind it opened', async () => {
    const r = await run(['--master-key-file', good, 'doctor'], s.opts());
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toMatch(/ok +gateway secrets +2 gateways, secrets readable with this master key/);
    expect(r.stdout).toMatch(/ok +webhook secrets +1 webhook endpoint, signing secrets readable with this master key/);
    expect(r.stdout).toMatch(
      /ok +TOTP secrets +1 console user with two-factor, TOTP secrets readable with this master key/,
    );
  });

  it('names each kind and the rows that do not open, never their values', async () => {
    const wrong = keyFile('wrong.key', `${other.toString('hex')}\n`);
    const r = await run(['--master-key-file', wrong, 'doctor'], s.opts());
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toBe('msgctl: doctor: 3 checks failed');
    const [a, b] = ids.gateways.sort();
    expect(r.stdout).toContain(
      `the secrets of 2 gateways do not open with this master key (${a}, ${b}): it is probably not the key they were written with`,
    );
    expect(r.stdout).toContain(
      `the signing secrets of 1 webhook endpoint do not open with this master key (${ids.endpoint}): it is probably not the key they were written with`,
    );
    expect(r.stdout).toContain(
      `the TOTP secrets of 1 console user with two-factor do not open with this master key (${ids.user}): it is probably not the key they were written with`,
    );
    expect(r.stdout).not.toContain('secret-of-');

    const j = await run(['--json', '--master-key-file', wrong, 'doctor'], s.opts());
    const report = JSON.parse(j.stdout);
    expect(report.ok).toBe(false);
    expect(
      report.checks.filter((c: { status: string }) => c.status === 'fail').map((c: { name: string }) => c.name),
    ).toEqual(['gateway secrets', 'webhook secrets', 'TOTP secrets']);
  });

  it('a row sealed with another key is named alone: the others open', async () => {
    const [a, b] = ids.gateways.sort();
    const setSecrets = (secrets: string) =>
      s.withCtx((ctx) => ctx.store.run(sql`UPDATE gateways SET secrets = ${secrets} WHERE id = ${b}`));
    const { secrets: sealed } = (await s.withCtx((ctx) =>
      ctx.store.get<{ secrets: string }>(sql`SELECT secrets FROM gateways WHERE id = ${b}`),
    ))!;
    await setSecrets(sealJson(other, { auth_token: 'x' }));
    try {
      const r = await run(['--master-key-file', good, 'doctor'], s.opts());
      expect(r.code).toBe(1);
      expect(r.stdout).toContain(
        `the secrets of 1 of 2 gateways do not open with this master key (${b}): they were probably written with another key`,
      );
      expect(r.stdout).not.toContain(a);
    } finally {
      await setSecrets(sealed);
    }
  });
});

describe('backup and restore with a key file', () => {
  onSqlite('writes no key beside the backup, and restores with the same key file, without --key', async () => {
    const dataDir = tmpDataDir();
    const opts = { dataDir, env: { MSGD_MASTER_KEY_FILE: good } };
    await runJson(['init'], opts);
    await runJson(
      ['gateway', 'add', 'twilio', '--name', 'tw', '--set', 'account_sid=AC1', '--secret-stdin', 'auth_token'],
      { ...opts, stdin: 'token-3' },
    );
    const dest = join(root, 'backups');
    mkdirSync(dest, { recursive: true });
    const b = await run(['backup', dest], opts);
    expect(b.code, b.stderr).toBe(0);
    expect(b.stderr).toContain(
      `msgctl: the master key comes from masterKeyFile ${good} and was not written; restoring needs that key.`,
    );
    expect(readdirSync(dest)).toHaveLength(1);
    const backup = { file: join(dest, readdirSync(dest)[0]) };

    const target = tmpDataDir();
    const twice = await run(['restore', backup.file, '--key', good], { ...opts, dataDir: target });
    expect(twice.code).toBe(2);
    expect(oneErrorLine(twice.stderr)).toBe(
      `msgctl: masterKeyFile is set (${good}): it is the key msgd will use; drop --key`,
    );
    const r = await run(['restore', backup.file], { ...opts, dataDir: target });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/ok +gateway secrets +1 gateway, secrets readable with this master key/);
    expect(existsSync(join(target, 'master.key'))).toBe(false);
  });
});
