import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { store } from '../../src/db/query.js';
import type { CoreCtx } from '../../src/core/context.js';
import { openGateway } from '../../src/core/gateway-secrets.js';
import { addGateway, getGateway, listGateways, updateGateway } from '../../src/core/gateways.js';
import { SecretDecryptError, seal, unseal } from '../../src/core/secrets.js';
import { listAudit } from '../../src/core/audit.js';
import { openDataDir } from '../../src/db/datadir.js';
import { openTestCtx } from '../helpers/ctx.js';

// Secrets at rest: no byte sequence of a secret value may appear in the database, its WAL
// or its shared-memory file, in any encoding a careless write might have used.
// SQLite only: it reads the bytes of the data directory's files (the database, WAL, -shm).

const SECRETS = {
  wa: 'WA-ACCESS-TOKEN-4c1f8e2a9b7d',
  waApp: 'WA-APP-SECRET-0d9e8f7a6b5c',
  twilio: 'TWILIO-AUTH-77aa88bb99cc',
  sendgrid: 'SG.sendgrid-key-1a2b3c4d5e6f',
  smtp: 'smtp-pass-Zq9Xw8Yv7U',
  rotated: 'TWILIO-AUTH-ROTATED-5e5e5e5e',
};

const t = openTestCtx();
afterAll(() => t.close());

function encodings(s: string): [string, Buffer][] {
  return [
    ['utf8', Buffer.from(s, 'utf8')],
    ['utf16le', Buffer.from(s, 'utf16le')],
    ['base64', Buffer.from(Buffer.from(s).toString('base64').replace(/=+$/, ''))],
    ['hex', Buffer.from(Buffer.from(s).toString('hex'))],
  ];
}

function filesOf(dir: string): [string, Buffer][] {
  return ['msgd.db', 'msgd.db-wal', 'msgd.db-shm']
    .map((f) => join(dir, f))
    .filter((f) => existsSync(f))
    .map((f) => [f, readFileSync(f)]);
}

function expectAbsent(dir: string) {
  const files = filesOf(dir);
  expect(files.length).toBeGreaterThan(0);
  for (const [file, bytes] of files) {
    for (const secret of Object.values(SECRETS)) {
      for (const [enc, needle] of encodings(secret))
        expect(bytes.includes(needle), `${secret} (${enc}) in ${file}`).toBe(false);
    }
  }
}

describe('gateway secrets at rest', () => {
  it('never appear in msgd.db, -wal or -shm, before or after a checkpoint', async () => {
    // Keep the WAL around: it is where fresh pages land first.
    t.ctx.db.sqlite.pragma('wal_autocheckpoint = 0');
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
    expect(existsSync(join(t.dir, 'msgd.db-wal'))).toBe(true);
    expectAbsent(t.dir);
    t.ctx.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
    expectAbsent(t.dir);
  });

  it('while the provider layer can still open them', async () => {
    const id = (await getGateway(t.ctx, 'tw')).id;
    expect(openGateway(t.ctx, id).secrets).toEqual({ auth_token: SECRETS.rotated });
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
    expect(() => openGateway(other, wa.id)).toThrow(/master key does not match/);
    const reopened = openDataDir(t.dir, { env: { MSGD_MASTER_KEY: 'ff'.repeat(32) }, migrate: false });
    try {
      await expect(
        listGateways({ ...t.ctx, db: reopened.db, store: store(reopened.db), masterKey: reopened.masterKey }),
      ).rejects.toThrow(SecretDecryptError);
    } finally {
      reopened.close();
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
