import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { CoreCtx } from '../../src/core/context.js';
import { openGateway, openGatewayIn } from '../../src/core/gateway-secrets.js';
import { addGateway, getGateway, listGateways, updateGateway } from '../../src/core/gateways.js';
import { SecretDecryptError, seal, unseal } from '../../src/core/secrets.js';
import { listAudit } from '../../src/core/audit.js';
import { openStore } from '../../src/db/open-store.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// Secrets at rest: no byte sequence of a secret value may appear in the files the store keeps,
// in any encoding a careless write might have used. On SQLite: the database, its WAL and its
// shared-memory file. On PostgreSQL: the database's directory (tables, TOAST, indexes) and the
// WAL segments written since the file began, read from the server's data directory (on this
// machine: the tests' cluster).

const SECRETS = {
  wa: 'WA-ACCESS-TOKEN-4c1f8e2a9b7d',
  waApp: 'WA-APP-SECRET-0d9e8f7a6b5c',
  twilio: 'TWILIO-AUTH-77aa88bb99cc',
  sendgrid: 'SG.sendgrid-key-1a2b3c4d5e6f',
  smtp: 'smtp-pass-Zq9Xw8Yv7U',
  rotated: 'TWILIO-AUTH-ROTATED-5e5e5e5e',
};

let t: StoreCtx;
/** PostgreSQL: the WAL segment current when the file began; every later one holds its writes. */
let firstWal = '';
beforeAll(async () => {
  t = await openStoreCtx();
  if (t.dialect === 'postgres')
    firstWal = (await t.ctx.store.get<{ f: string }>(sql`SELECT pg_walfile_name(pg_current_wal_lsn()) AS f`))!.f;
});
afterAll(() => t.close());

function encodings(s: string): [string, Buffer][] {
  return [
    ['utf8', Buffer.from(s, 'utf8')],
    ['utf16le', Buffer.from(s, 'utf16le')],
    ['base64', Buffer.from(Buffer.from(s).toString('base64').replace(/=+$/, ''))],
    ['hex', Buffer.from(Buffer.from(s).toString('hex'))],
  ];
}

/** The files that hold the store's data, or null when they are on another machine. */
async function storeFiles(): Promise<string[] | null> {
  if (t.dialect === 'sqlite')
    return ['msgd.db', 'msgd.db-wal', 'msgd.db-shm'].map((f) => join(t.target, f)).filter((f) => existsSync(f));
  const at = (await t.ctx.store.get<{ data: string; db: number; wal: string }>(
    sql`SELECT current_setting('data_directory') AS data,
               CAST((SELECT oid FROM pg_database WHERE datname = current_database()) AS BIGINT) AS db,
               pg_walfile_name(pg_current_wal_lsn()) AS wal`,
  ))!;
  if (!existsSync(join(at.data, 'PG_VERSION'))) return null;
  const base = join(at.data, 'base', String(at.db));
  const wal = join(at.data, 'pg_wal');
  // Segment names sort in write order (timeline, then position): those from the file's start on.
  const segments = readdirSync(wal).filter((f) => /^[0-9A-F]{24}$/.test(f) && f >= firstWal && f <= at.wal);
  return [...readdirSync(base).map((f) => join(base, f)), ...segments.map((f) => join(wal, f))];
}

async function expectAbsent() {
  const names = await storeFiles();
  expect(names, 'the store keeps its files on another machine').not.toBeNull();
  const files = names!.map((f): [string, Buffer] => [f, readFileSync(f)]);
  expect(files.length).toBeGreaterThan(0);
  for (const [file, bytes] of files) {
    for (const secret of Object.values(SECRETS)) {
      for (const [enc, needle] of encodings(secret))
        expect(bytes.includes(needle), `${secret} (${enc}) in ${file}`).toBe(false);
    }
  }
}

describe('gateway secrets at rest', () => {
  it("never appear in the store's files (msgd.db, -wal, -shm; PostgreSQL's tables and WAL), before or after a checkpoint", async (c) => {
    // MSGD_TEST_PG_URL may name a server on another machine, whose files this one cannot read.
    if ((await storeFiles()) === null) return c.skip();
    // Keep the WAL around: it is where fresh pages land first.
    if (t.dialect === 'sqlite') t.ctx.db.sqlite.pragma('wal_autocheckpoint = 0');
    await addGateway(
      t.ctx,
      {
        kind: 'whatsapp_cloud',
        name: 'wa',
        settings: { phone_number_id: '123' },
        secrets: { access_token: SECRETS.wa, app_secret: SECRETS.waApp },
      },
      'test',
    );
    await addGateway(
      t.ctx,
      { kind: 'twilio', name: 'tw', settings: { account_sid: 'AC1' }, secrets: { auth_token: SECRETS.twilio } },
      'test',
    );
    await addGateway(t.ctx, { kind: 'sendgrid', name: 'sg', secrets: { api_key: SECRETS.sendgrid } }, 'test');
    await addGateway(
      t.ctx,
      {
        kind: 'smtp',
        name: 'relay',
        settings: { host: 'mx.example.com', user: 'relay' },
        secrets: { password: SECRETS.smtp },
      },
      'test',
    );
    await updateGateway(t.ctx, 'tw', { secrets: { auth_token: SECRETS.rotated } }, 'test');
    if (t.dialect === 'sqlite') expect(existsSync(join(t.target, 'msgd.db-wal'))).toBe(true);
    await expectAbsent();
    if (t.dialect === 'sqlite') t.ctx.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
    else await t.ctx.store.run(sql`CHECKPOINT`);
    await expectAbsent();
  });

  it('while the provider layer can still open them', async () => {
    const id = (await getGateway(t.ctx, 'tw')).id;
    expect((await openGatewayIn(t.ctx, id)).secrets).toEqual({ auth_token: SECRETS.rotated });
    // SQLite's synchronous transactions open it on the connection.
    if (t.dialect === 'sqlite') expect(openGateway(t.ctx, id).secrets).toEqual({ auth_token: SECRETS.rotated });
  });

  it('and no view, listing or audit entry carries a value', async () => {
    const everything = JSON.stringify([
      await listGateways(t.ctx),
      await getGateway(t.ctx, 'wa'),
      await listAudit(t.ctx, 1000),
    ]);
    for (const secret of Object.values(SECRETS)) expect(everything).not.toContain(secret);
    expect((await getGateway(t.ctx, 'wa')).secret_names).toEqual(['access_token', 'app_secret']);
  });

  it('a wrong master key fails with SecretDecryptError, never garbage', async () => {
    const other: CoreCtx = { ...t.ctx, masterKey: Buffer.alloc(32, 7) };
    await expect(getGateway(other, 'wa')).rejects.toThrow(SecretDecryptError);
    const wa = await getGateway(t.ctx, 'wa');
    await expect(openGatewayIn(other, wa.id)).rejects.toThrow(/master key does not match/);
    if (t.dialect === 'sqlite') expect(() => openGateway(other, wa.id)).toThrow(/master key does not match/);
    // The store opened as msgd or msgctl would, with another MSGD_MASTER_KEY.
    const config =
      t.dialect === 'sqlite'
        ? loadConfig({ env: {}, dataDir: t.target })
        : loadConfig({ env: { MSGD_DATABASE_URL: t.target } });
    const reopened = await openStore(config, {
      env: { MSGD_MASTER_KEY: 'ff'.repeat(32) },
      migrate: false,
      poolSize: 1,
    });
    try {
      await expect(
        listGateways({ ...t.ctx, db: reopened.db, store: reopened.store, masterKey: reopened.masterKey }),
      ).rejects.toThrow(SecretDecryptError);
    } finally {
      await reopened.close();
    }
  });

  it('sealing is randomised and authenticated', () => {
    const key = Buffer.alloc(32, 1);
    const a = seal(key, 'same');
    expect(seal(key, 'same')).not.toBe(a);
    expect(unseal(key, a)).toBe('same');
    const raw = Buffer.from(a.slice(3), 'base64');
    raw[raw.length - 1] ^= 1; // flip one ciphertext bit
    expect(() => unseal(key, 'v1:' + raw.toString('base64'))).toThrow(SecretDecryptError);
    expect(() => unseal(key, 'plaintext')).toThrow(SecretDecryptError);
  });
});
