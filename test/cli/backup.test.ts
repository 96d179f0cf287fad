import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTwilioFake } from '../fakes/twilio.js';
import { SMS, send, twilioGateway } from '../helpers/gateways.js';
import { message, waitStatus } from '../helpers/rows.js';
import { setupPartner, startTestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import {
  cleanEnv,
  cleanupTmp,
  MSGCTL,
  DUMP_TABLES,
  dumpDb,
  migrationTags,
  oneErrorLine,
  runCli,
  rewindNewestMigration,
  runJson,
  tmpDataDir,
  withDb,
} from '../helpers/cli.js';

afterAll(cleanupTmp);

const TAGS = migrationTags();

/** A data directory with a partner, money and a gateway whose secret only the master key opens. */
async function populated() {
  const dataDir = tmpDataDir();
  await runJson(['init'], { dataDir });
  await runJson(['partner', 'create', 'acme', '--name', 'Acme'], { dataDir });
  await runJson(['balance', 'topup', 'acme', '25.50', '--note', 'invoice 7'], { dataDir });
  await runJson(
    ['gateway', 'add', 'twilio', '--name', 'tw', '--set', 'account_sid=AC123', '--secret-stdin', 'auth_token'],
    { dataDir, stdin: 'tw-auth-secret\n' },
  );
  return dataDir;
}

const mode = (f: string) => (statSync(f).mode & 0o777).toString(8);

describe('msgctl backup', () => {
  it('writes a timestamped backup into a directory, with the key file beside it, both owner-only', async () => {
    const dataDir = await populated();
    const dest = join(dirname(dataDir), 'backups');
    mkdirSync(dest);
    const r = await runCli(['backup', dest], { dataDir });
    expect(r.code, r.stderr).toBe(0);
    const files = readdirSync(dest).sort();
    expect(files).toHaveLength(2);
    expect(files[0]).toMatch(/^msgd-\d{8}T\d{6}Z\.db$/);
    expect(files[1]).toBe(`${files[0]}.master-key`);
    expect(mode(join(dest, files[0]))).toBe('600');
    expect(mode(join(dest, files[1]))).toBe('600');
    expect(r.stdout).toContain(join(dest, files[0]));
    // The key file says what it is, and the operator is told on stderr.
    const key = readFileSync(join(dest, files[1]), 'utf8');
    expect(key).toMatch(/SECRET: whoever has this file and the backup can read every provider secret/);
    expect(key).toContain(readFileSync(join(dataDir, 'master.key'), 'utf8').trim());
    expect(r.stderr).toMatch(/holds the master key\. Whoever has it and the backup can read every provider secret/);
    // The backup holds the same rows.
    withDb(dataDir, (db) => {
      db.prepare(`ATTACH DATABASE ? AS copy`).run(join(dest, files[0]));
      for (const t of DUMP_TABLES)
        expect(db.prepare(`SELECT * FROM copy.${t}`).all(), t).toEqual(db.prepare(`SELECT * FROM main.${t}`).all());
      db.exec('DETACH DATABASE copy');
    });
  });

  it('shows progress on a terminal, and only there', async () => {
    const dataDir = await populated();
    const { spawn } = await import('@lydell/node-pty');
    const term = spawn(process.execPath, [MSGCTL, '--data-dir', dataDir, 'backup', join(dirname(dataDir), 'tty.db')], {
      cols: 120,
      rows: 10,
      cwd: dirname(dataDir),
      env: cleanEnv() as Record<string, string>,
    });
    let screen = '';
    term.onData((d) => (screen += d));
    const code = await new Promise<number>((r) => term.onExit((e) => r(e.exitCode)));
    expect(code, screen).toBe(0);
    expect(screen).toMatch(/backing up: \d+% \([\d.]+ MB of about [\d.]+ MB\)/);
    expect(screen).toContain('Backed up');
    const piped = await runCli(['backup', join(dirname(dataDir), 'piped.db')], { dataDir });
    expect(piped.stderr + piped.stdout).not.toContain('backing up:');
  });

  it('writes the named file, never overwrites one, and --no-key writes no key', async () => {
    const dataDir = await populated();
    const file = join(dirname(dataDir), 'named.db');
    const j = await runJson(['backup', file, '--no-key'], { dataDir });
    expect(j).toMatchObject({ file, key_file: null });
    expect(j.bytes).toBe(statSync(file).size);
    expect(existsSync(`${file}.master-key`)).toBe(false);
    const before = readFileSync(file);
    const again = await runCli(['backup', file], { dataDir });
    expect(again.code).toBe(1);
    expect(oneErrorLine(again.stderr)).toBe(`msgctl: ${file} already exists; a backup never overwrites a file`);
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(readdirSync(dirname(file)).filter((f) => f.includes('partial'))).toEqual([]);
  });

  it('refuses a directory with no database and a target in a missing directory', async () => {
    const none = await runCli(['backup', '/tmp'], { dataDir: tmpDataDir() });
    expect(none.code).toBe(1);
    expect(oneErrorLine(none.stderr)).toMatch(/no msgd data directory at/);
    const dataDir = await populated();
    const r = await runCli(['backup', join(dirname(dataDir), 'nope', 'x.db')], { dataDir });
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(/the directory .*nope does not exist/);
  });
});

describe('msgctl restore', () => {
  it('holds the messages the backup has waiting to be sent, until msgctl messages release-held', async () => {
    const fake = await startTwilioFake();
    const dataDir = tmpDataDir();
    const target = tmpDataDir();
    const s = await startTestServer({}, { dataDir });
    let restored: Awaited<ReturnType<typeof startTestServer>> | undefined;
    try {
      const p = await setupPartner(s.ctx, { balance: '10', prices: { sms: '0.01' } });
      // One per second: the first is in the provider's hands ('sending') when the backup is
      // taken, the two others wait in line ('queued'). All three go out from this server.
      await twilioGateway(s.ctx, p.partnerId, fake, { rate_per_second: 1 });
      fake.latencyMs = 1500;
      const ids: string[] = [];
      for (const text of ['one', 'two', 'three'])
        ids.push((await send(s.url, SMS, { to: '+14155550123', text }, p.token)).body.id);
      await waitFor(
        async () => fake.requests.length === 1 && (await message(s.ctx, ids[0])).status === 'sending',
        'the first call',
      );
      expect(await Promise.all(ids.map(async (id) => (await message(s.ctx, id)).status))).toEqual([
        'sending',
        'queued',
        'queued',
      ]);
      const file = join(dirname(dataDir), 'in-flight.db');
      expect((await runCli(['backup', file], { dataDir })).code).toBe(0);
      for (const id of ids) await waitStatus(s.ctx, id, 'sent', 15_000);
      await s.stop();
      expect(fake.requests).toHaveLength(3);

      // The VM is lost; the backup is restored elsewhere.
      const r = await runCli(['restore', file], { dataDir: target });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/warn +held messages +3 messages are held since a restore/);
      expect(r.stdout).toContain('3 messages were waiting to be sent when the backup was taken and are held:');
      expect(r.stdout).toContain('msgctl messages release-held');
      const doctor = await runJson(['doctor'], { dataDir: target });
      expect(doctor.checks).toContainEqual({
        name: 'held messages',
        status: 'warn',
        message: expect.stringMatching(/^3 messages are held since a restore/),
      });

      // msgd on the restored data sends new messages, and none of the held ones.
      fake.latencyMs = 0;
      restored = await startTestServer({}, { dataDir: target });
      const fresh = await send(restored.url, SMS, { to: '+14155550123', text: 'after the restore' }, p.token);
      expect(fresh.status).toBe(200);
      await waitStatus(restored.ctx, fresh.body.id, 'sent');
      expect(fake.requests).toHaveLength(4);
      for (const id of ids) {
        const m = await message(restored.ctx, id);
        expect(m.status).toBe('queued');
        expect(m.error_code).toBe('held_after_restore');
        expect(m.dispatch_uncertain).toBe(0);
      }
      const shown = await runJson(['messages', 'show', ids[0]], { dataDir: target });
      expect(JSON.stringify(shown)).toContain('held after a restore');

      // Released: each goes out once, flagged a possible duplicate.
      const released = await runJson(['messages', 'release-held'], { dataDir: target });
      expect(released).toEqual({ released: 3 });
      for (const id of ids) {
        const m = await waitStatus(restored.ctx, id, 'sent', 15_000);
        expect(m.dispatch_uncertain).toBe(1);
        expect(m.error_code).toBeNull();
      }
      expect(fake.requests).toHaveLength(7);
      expect((await runJson(['messages', 'release-held'], { dataDir: target })).released).toBe(0);
      expect(
        (await runJson(['doctor'], { dataDir: target })).checks.map((c: { name: string }) => c.name),
      ).not.toContain('held messages');
    } finally {
      await restored?.stop();
      await s.stop();
      await fake.close();
    }
  }, 60_000);

  async function backedUp() {
    const dataDir = await populated();
    const file = join(dirname(dataDir), 'b.db');
    await runJson(['backup', file], { dataDir });
    return { dataDir, file };
  }

  it('restores into an empty directory and checks it: integrity, migrations, ledger, secrets', async () => {
    const { dataDir, file } = await backedUp();
    const target = tmpDataDir();
    const r = await runCli(['restore', file], { dataDir: target });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/ok +database +.*integrity ok/);
    expect(r.stdout).toMatch(/ok +migrations +\d+ applied, none pending/);
    expect(r.stdout).toMatch(/ok +ledger +1 partner: every balance equals the sum of its entries/);
    expect(r.stdout).toMatch(/ok +gateway secrets +1 gateway, secrets readable with this master key/);
    expect(dumpDb(target)).toEqual(dumpDb(dataDir));
    expect(mode(join(target, 'master.key'))).toBe('600');
    expect(mode(join(target, 'msgd.db'))).toBe('600');
    // The restored directory is an ordinary one.
    const ledger = await runJson(['ledger', 'list', 'acme'], { dataDir: target });
    expect(JSON.stringify(ledger)).toContain('invoice 7');
    expect((await runJson(['doctor'], { dataDir: target })).ok).toBe(true);
  });

  it('with MSGD_MASTER_KEY: writes no key file, and restores with the same variable', async () => {
    const env = { MSGD_MASTER_KEY: 'ab'.repeat(32) };
    const dataDir = tmpDataDir();
    await runJson(['init'], { dataDir, env });
    await runJson(['partner', 'create', 'acme', '--name', 'Acme'], { dataDir, env });
    const file = join(dirname(dataDir), 'env.db');
    const b = await runCli(['backup', file], { dataDir, env });
    expect(b.code, b.stderr).toBe(0);
    expect(b.stderr).toContain('the master key comes from MSGD_MASTER_KEY and was not written');
    expect(existsSync(`${file}.master-key`)).toBe(false);
    const target = tmpDataDir();
    const without = await runCli(['restore', file], { dataDir: target });
    expect(without.code).toBe(1);
    expect(oneErrorLine(without.stderr)).toMatch(/no master key: .*env\.db\.master-key does not exist/);
    const r = await runCli(['restore', file], { dataDir: target, env });
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(join(target, 'master.key'))).toBe(false);
    expect(r.stdout).toMatch(/ok +master key +from MSGD_MASTER_KEY/);
  });

  it('refuses a directory that holds a database, and changes nothing there', async () => {
    const { dataDir, file } = await backedUp();
    const before = dumpDb(dataDir);
    const r = await runCli(['restore', file], { dataDir });
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(
      /is not empty \(msgd\.db, master\.key\): restore only into an empty data directory/,
    );
    expect(dumpDb(dataDir)).toEqual(before);
  });

  it('refuses a backup whose key does not open its secrets, and leaves the directory empty', async () => {
    const { file } = await backedUp();
    const wrong = join(dirname(file), 'wrong.key');
    writeFileSync(wrong, Buffer.alloc(32, 7).toString('base64') + '\n');
    const target = tmpDataDir();
    const r = await runCli(['restore', file, '--key', wrong], { dataDir: target });
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(
      /did not pass its checks and was not restored .*gateway secrets: the secrets of 1 gateway do not open with this master key \(gw_/,
    );
    expect(readdirSync(target).filter((f) => f !== 'msgd.lock')).toEqual([]);
    // With the right key it then restores.
    expect((await runCli(['restore', file], { dataDir: target })).code).toBe(0);
  });

  it('refuses a damaged backup, a missing key and a missing file', async () => {
    const { file } = await backedUp();
    const damaged = join(dirname(file), 'damaged.db');
    const bytes = readFileSync(file);
    bytes.fill(0x5a, 4096 * 3, 4096 * 6);
    writeFileSync(damaged, bytes);
    writeFileSync(`${damaged}.master-key`, readFileSync(`${file}.master-key`));
    const target = tmpDataDir();
    const r = await runCli(['restore', damaged], { dataDir: target });
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(/not restored|malformed|not a database/);
    expect(existsSync(join(target, 'msgd.db'))).toBe(false);
    expect(existsSync(join(target, 'master.key'))).toBe(false);

    const nokey = join(dirname(file), 'nokey.db');
    writeFileSync(nokey, readFileSync(file));
    const k = await runCli(['restore', nokey], { dataDir: target });
    expect(k.code).toBe(1);
    expect(oneErrorLine(k.stderr)).toMatch(/no master key: .*nokey\.db\.master-key does not exist; pass --key/);

    const missing = await runCli(['restore', join(dirname(file), 'absent.db')], { dataDir: target });
    expect(missing.code).toBe(1);
    expect(oneErrorLine(missing.stderr)).toMatch(/no backup at .*absent\.db/);
  });
});

describe('a backup before migrations', () => {
  /** A data directory made before the newest migration: that migration is pending. */
  async function withPending() {
    const dataDir = await populated();
    rewindNewestMigration(dataDir);
    return dataDir;
  }
  const backups = (dataDir: string) =>
    existsSync(join(dataDir, 'backups')) ? readdirSync(join(dataDir, 'backups')).sort() : [];

  it('msgctl messages release-held works on a restored database an older msgd will run', async () => {
    // Rolling back an upgrade: the pre-migration backup is restored by this msgctl, which holds
    // its waiting messages; the previous msgd knows no held messages, so they are released first.
    const fake = await startTwilioFake();
    const dataDir = tmpDataDir();
    const target = tmpDataDir();
    const s = await startTestServer({}, { dataDir });
    let id: string;
    try {
      const p = await setupPartner(s.ctx, { balance: '10', prices: { sms: '0.01' } });
      // One a minute: the first goes out, the second waits in line.
      await twilioGateway(s.ctx, p.partnerId, fake, { rate_per_second: 1 / 60 });
      const first = (await send(s.url, SMS, { to: '+14155550123', text: 'sent' }, p.token)).body.id;
      id = (await send(s.url, SMS, { to: '+14155550123', text: 'waiting' }, p.token)).body.id;
      await waitStatus(s.ctx, first, 'sent');
    } finally {
      await s.stop();
      await fake.close();
    }
    const file = join(dirname(dataDir), 'before-upgrade.db');
    expect((await runCli(['backup', file], { dataDir })).code).toBe(0);
    const r = await runCli(['restore', file], { dataDir: target });
    expect(r.stdout).toContain('1 message was waiting to be sent when the backup was taken and is held:');
    rewindNewestMigration(target);

    const released = await runJson(['messages', 'release-held'], { dataDir: target });
    expect(released).toEqual({ released: 1 });
    withDb(target, (db) => {
      expect(db.prepare('SELECT status, dispatch_uncertain FROM messages WHERE id = ?').get(id)).toEqual({
        status: 'queued',
        dispatch_uncertain: 1,
      });
      expect(db.prepare("SELECT state FROM jobs WHERE kind = 'message.dispatch'").all()).toEqual([
        { state: 'available' },
      ]);
    });
    // Every other command still asks for the migration first.
    const other = await runCli(['messages', 'list'], { dataDir: target });
    expect(other.code).toBe(1);
    expect(oneErrorLine(other.stderr)).toMatch(/pending migration/);
  }, 60_000);

  it('msgctl migrate takes one when migrations are pending, the backup still has them pending', async () => {
    const dataDir = await withPending();
    const j = await runJson(['migrate'], { dataDir });
    expect(j.applied).toEqual([TAGS[TAGS.length - 1]]);
    const files = backups(dataDir);
    expect(files).toEqual([
      expect.stringMatching(/^msgd-\d{8}T\d{6}Z-pre-migrate\.db$/),
      expect.stringMatching(/\.master-key$/),
    ]);
    expect(j.backup).toEqual({
      file: join(dataDir, 'backups', files[0]),
      key_file: join(dataDir, 'backups', files[1]),
    });
    const restored = tmpDataDir();
    const r = await runJson(['restore', join(dataDir, 'backups', files[0])], { dataDir: restored });
    expect(r.checks.find((c: { name: string }) => c.name === 'migrations')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining(`1 pending: ${TAGS[TAGS.length - 1]}`),
    });
  });

  it('is skipped with --no-backup, with backup.beforeMigrate false, and when nothing is pending', async () => {
    const a = await withPending();
    await runJson(['migrate', '--no-backup'], { dataDir: a });
    expect(backups(a)).toEqual([]);
    await runJson(['migrate'], { dataDir: a });
    expect(backups(a)).toEqual([]);
    const b = await withPending();
    await runJson(['migrate'], { dataDir: b, env: { MSGD_BACKUP_BEFORE_MIGRATE: 'false' } });
    expect(backups(b)).toEqual([]);
  });

  it("msgd's start takes one before it migrates, unless backup.beforeMigrate is false", async () => {
    const a = await withPending();
    const server = await startTestServer({}, { dataDir: a });
    await server.stop();
    const files = backups(a);
    expect(files[0]).toMatch(/^msgd-\d{8}T\d{6}Z-pre-migrate\.db$/);
    expect(server.logs.join('')).toContain('backup taken before applying migrations');
    // Started again: nothing pending, no new backup.
    await (await startTestServer({}, { dataDir: a })).stop();
    expect(backups(a)).toEqual(files);
    const b = await withPending();
    await (await startTestServer({ 'backup.beforeMigrate': false }, { dataDir: b })).stop();
    expect(backups(b)).toEqual([]);
  });

  it('applies nothing when the backup cannot be written, and says how to proceed', async () => {
    const dataDir = await withPending();
    const notADir = join(dirname(dataDir), 'a-file');
    writeFileSync(notADir, 'x');
    const r = await runCli(['migrate'], { dataDir, env: { MSGD_BACKUP_DIR: join(notADir, 'backups') } });
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(
      /the backup before applying 1 migration\(s\) failed, so none was applied: .*backup\.beforeMigrate: false/,
    );
    const d = await runJson(['doctor'], { dataDir }).catch((e) => String(e));
    expect(String(JSON.stringify(d))).toMatch(/1 pending/);
  });

  it('goes to backup.dir when set', async () => {
    const dataDir = await withPending();
    const elsewhere = join(dirname(dataDir), 'elsewhere');
    await runJson(['migrate'], { dataDir, env: { MSGD_BACKUP_DIR: elsewhere } });
    expect(readdirSync(elsewhere)).toHaveLength(2);
    expect(backups(dataDir)).toEqual([]);
  });
});
