import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupTmp, cliStore, cliStoreKind, oneErrorLine, runCli, runJson, tmpDataDir } from '../helpers/cli.js';

afterAll(cleanupTmp);

/**
 * How msgctl finds a data directory, and what init writes there: SQLite's. On PostgreSQL
 * test/pg/msgctl-store.test.ts checks how it finds the database (--database-url, MSGD_DATABASE_URL, the file).
 */
const onSqlite = it.skipIf(cliStoreKind === 'postgres');

function writeConfig(dir: string, name: string, config: object): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(config));
  return file;
}

describe('where msgctl finds the data directory', () => {
  onSqlite('--data-dir beats MSGD_DATA_DIR, which is used without it', async () => {
    const a = tmpDataDir();
    const b = tmpDataDir();
    expect((await runJson(['init'], { env: { MSGD_DATA_DIR: a } })).data_dir).toBe(a);
    expect((await runJson(['init'], { dataDir: b, env: { MSGD_DATA_DIR: a } })).data_dir).toBe(b);
    await runJson(['partner', 'create', 'in-b', '--name', 'B'], { dataDir: b, env: { MSGD_DATA_DIR: a } });
    expect((await runJson(['partner', 'list'], { env: { MSGD_DATA_DIR: a } })).data).toEqual([]);
    expect((await runJson(['partner', 'list'], { dataDir: b })).data).toHaveLength(1);
  });

  onSqlite('--config beats MSGD_CONFIG; the file sets the data dir and the webhook base URL', async () => {
    const dataDir = tmpDataDir();
    const root = dirname(dataDir);
    const good = writeConfig(root, 'good.json', { dataDir, server: { publicUrl: 'https://msgd.example.com/' } });
    const other = writeConfig(root, 'other.json', {
      dataDir: join(root, 'other'),
      server: { host: '0.0.0.0', port: 9000 },
    });
    await runJson(['init'], { env: { MSGD_CONFIG: good } });
    const fb = await runJson(
      [
        'gateway',
        'add',
        'meta_messenger',
        '--name',
        'fb',
        '--set',
        'page_id=123',
        '--secret-env',
        'page_access_token=T',
      ],
      {
        env: { MSGD_CONFIG: good, T: 'page-token' },
      },
    );
    expect(fb.webhook_url).toBe(`https://msgd.example.com/api/webhook-messenger.php?gateway=${fb.id}`);
    const ig = await runJson(
      [
        'gateway',
        'add',
        'meta_instagram',
        '--name',
        'ig',
        '--set',
        'ig_account_id=456',
        '--secret-env',
        'access_token=T',
      ],
      {
        env: { MSGD_CONFIG: good, T: 'ig-token' },
      },
    );
    expect(ig.webhook_url).toBe(`https://msgd.example.com/api/webhook-messenger.php?gateway=${ig.id}`);
    const sg = await runJson(['gateway', 'add', 'sendgrid', '--name', 'sg', '--secret-env', 'api_key=T'], {
      env: { MSGD_CONFIG: good, T: 'sg-key' },
    });
    expect(sg.webhook_url).toBe(`https://msgd.example.com/api/webhook.php?gateway=${sg.id}`);
    // The other config points elsewhere (and that directory does not exist): --config wins.
    const r = await runCli(['gateway', 'show', 'fb'], { env: { MSGD_CONFIG: other } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(join(root, 'other'));
    const shown = await runJson(['--config', good, 'gateway', 'show', 'fb'], { env: { MSGD_CONFIG: other } });
    expect(shown.id).toBe(fb.id);
    // Without publicUrl the URL is built from server.host and server.port.
    const local = await runJson(['--config', other, '--data-dir', dataDir, 'gateway', 'show', 'sg']);
    expect(local.webhook_url).toBe(`http://0.0.0.0:9000/api/webhook.php?gateway=${sg.id}`);
  });

  it('an invalid config is one line naming the key', async () => {
    const dataDir = tmpDataDir();
    const bad = writeConfig(dirname(dataDir), 'bad.json', { server: { port: 'eighty' } });
    const r = await runCli(['--config', bad, 'partner', 'list'], { dataDir });
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(/^msgctl: invalid configuration \(.*bad\.json\):.*server\.port/);
    const env = await runCli(['partner', 'list'], { dataDir, env: { MSGD_PORT: 'x' } });
    expect(oneErrorLine(env.stderr)).toBe('msgctl: MSGD_PORT: expected an integer, got "x"');
  });

  it('a low-balance threshold is a plain decimal, as on the command line', async () => {
    const dataDir = tmpDataDir();
    const padded = writeConfig(dirname(dataDir), 'padded.json', { billing: { balanceLowThreshold: '005' } });
    const r = await runCli(['--config', padded, 'partner', 'list'], { dataDir });
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(/billing\.balanceLowThreshold.*a plain decimal amount such as 5\.00/);
  });
});

describe('the master key', () => {
  it('a wrong MSGD_MASTER_KEY gives a clear one-line error, not a crash', async () => {
    const s = await cliStore();
    await runJson(
      ['gateway', 'add', 'twilio', '--name', 'tw', '--set', 'account_sid=AC1', '--secret-stdin', 'auth_token'],
      s.opts({ stdin: 'x' }),
    );
    const r = await runCli(['gateway', 'show', 'tw'], s.opts({ env: { MSGD_MASTER_KEY: '00'.repeat(32) } }));
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toBe(
      'msgctl: cannot decrypt a stored secret: the master key does not match the one it was sealed with',
    );
    const malformed = await runCli(['partner', 'list'], s.opts({ env: { MSGD_MASTER_KEY: 'short' } }));
    expect(oneErrorLine(malformed.stderr)).toMatch(/MSGD_MASTER_KEY must be 32 bytes/);
    await s.drop();
  });

  onSqlite('with MSGD_MASTER_KEY, init writes no key file', async () => {
    const dataDir = tmpDataDir();
    const j = await runJson(['init'], { dataDir, env: { MSGD_MASTER_KEY: '11'.repeat(32) } });
    expect(j.master_key).toEqual({ source: 'env', path: null, mode: null });
  });
});

describe('stdin', () => {
  it('is never read unless --secret-stdin is given', async () => {
    const s = await cliStore();
    // stdin stays open and silent: a command that read it would never finish.
    const started = Date.now();
    const r = await runCli(['gateway', 'add', 'sandbox', '--name', 'demo'], s.opts({ holdStdin: true }));
    expect(r.code, r.stderr).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    await s.drop();
  });
});
