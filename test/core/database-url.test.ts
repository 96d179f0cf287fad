import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, shownConfig } from '../../src/config/load.js';
import { loadMasterKeyWithoutDataDir } from '../../src/db/master-key.js';
import { openStore, SqliteOnlyError, sqliteOnlyDb, sqliteOnlyPart, storeKindOf } from '../../src/db/open-store.js';
import { errorHandler } from '../../src/web/errors.js';

// Which store msgd and msgctl use: database.url (--database-url beats MSGD_DATABASE_URL beats
// the config file) selects PostgreSQL, nothing selects the data directory. The URL's password
// is masked wherever the configuration is shown, and never echoed by a refusal.

const dir = mkdtempSync(join(tmpdir(), 'msgd-dburl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'msgd.json');
writeFileSync(file, JSON.stringify({ database: { url: 'postgres://f:file-pw@db.example/file' } }));

describe('database.url', () => {
  it('is null without any setting: the data directory, as always', () => {
    const c = loadConfig({ env: {} });
    expect(c.database.url).toBeNull();
    expect(storeKindOf(c)).toBe('sqlite');
  });

  it('comes from --database-url, else MSGD_DATABASE_URL, else the config file', () => {
    const env = { MSGD_DATABASE_URL: 'postgresql://e:env-pw@db.example/env' };
    expect(loadConfig({ configPath: file, env: {} }).database.url).toBe('postgres://f:file-pw@db.example/file');
    expect(loadConfig({ configPath: file, env }).database.url).toBe(env.MSGD_DATABASE_URL);
    const flag = 'postgres://g:flag-pw@db.example/flag';
    const c = loadConfig({ configPath: file, env, databaseUrl: flag });
    expect(c.database.url).toBe(flag);
    expect(storeKindOf(c)).toBe('postgres');
    // An empty variable or flag is unset: back to the data directory.
    expect(loadConfig({ env: { MSGD_DATABASE_URL: '' } }).database.url).toBeNull();
    expect(loadConfig({ configPath: file, env: {}, databaseUrl: '' }).database.url).toBeNull();
  });

  it('must be a postgres:// URL; the refusal names the key, never the value', () => {
    let err: unknown;
    try {
      loadConfig({ env: { MSGD_DATABASE_URL: 'mysql://u:hunter2@db/x' } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(
      'invalid configuration: database.url: must be a postgres:// or postgresql:// URL (or null for the SQLite data directory)',
    );
  });

  it('is shown with its password masked', () => {
    const c = loadConfig({
      env: { MSGD_DATABASE_URL: 'postgres://msgd:s3cr%40t@db.example:5432/msgd?sslmode=require' },
    });
    const shown = JSON.stringify(shownConfig(c));
    expect(shown).toContain('"url":"postgres://msgd:***@db.example:5432/msgd?sslmode=require"');
    expect(shown).not.toContain('s3cr');
    // The configuration itself keeps the real URL.
    expect(c.database.url).toContain('s3cr%40t');
  });
});

describe('the master key without a data directory', () => {
  it('comes from MSGD_MASTER_KEY or masterKeyFile; neither is one clear refusal', () => {
    const hex = 'ab'.repeat(32);
    expect(loadMasterKeyWithoutDataDir({ MSGD_MASTER_KEY: hex }, null).source).toEqual({ kind: 'env' });
    expect(() => loadMasterKeyWithoutDataDir({}, null)).toThrow(
      /^no master key: on PostgreSQL \(database\.url\) there is no data directory to keep one in; set MSGD_MASTER_KEY, or masterKeyFile/,
    );
    const keyFile = join(dir, 'key');
    writeFileSync(keyFile, `${hex}\n`, { mode: 0o600 });
    expect(loadMasterKeyWithoutDataDir({}, keyFile).source).toEqual({ kind: 'file', path: keyFile });
    expect(() => loadMasterKeyWithoutDataDir({ MSGD_MASTER_KEY: hex }, keyFile)).toThrow(/two master keys are given/);
  });

  it('is asked for before PostgreSQL is: no key, no connection attempt', async () => {
    const config = loadConfig({ env: { MSGD_DATABASE_URL: 'postgres://u:p@127.0.0.1:1/none' } });
    await expect(openStore(config, { env: {} })).rejects.toThrow(/^no master key/);
  });
});

describe('code written against the SQLite connection, on PostgreSQL', () => {
  it('is refused with not_on_postgresql, which the API answers as 501', () => {
    const db = sqliteOnlyDb();
    expect(() => db.sqlite).toThrow(SqliteOnlyError);
    expect(() => db.sqlite).toThrow("this needs msgd's SQLite data directory (ctx.db.sqlite)");
    const part = sqliteOnlyPart<{ start(): void }>('the job loop');
    expect(() => part.start()).toThrow(/\(the job loop\) and does not work on PostgreSQL/);
    // Awaiting or printing one is not a use.
    expect((db as unknown as { then?: unknown }).then).toBeUndefined();

    let status = 0;
    let body: unknown;
    const reply = {
      code(s: number) {
        status = s;
        return reply;
      },
      type: () => reply,
      header: () => reply,
      send(b: unknown) {
        body = b;
        return reply;
      },
    };
    const req = { log: { error() {}, warn() {} } };
    try {
      part.start();
    } catch (e) {
      errorHandler(e as Error, req as never, reply as never);
    }
    expect(status).toBe(501);
    expect(body).toEqual({
      error: {
        code: 'not_on_postgresql',
        message:
          "this needs msgd's SQLite data directory (the job loop) and does not work on PostgreSQL (database.url) yet",
        details: [],
      },
    });
  });
});
