import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, runJson } from '../helpers/cli.js';
import { freePort, waitFor, waitForExit } from '../helpers/wait.js';

// bin/msgd and the master key as an operator gives it: a key file (masterKeyFile), refused at
// start when other accounts may read it, when it is missing or unreadable, when MSGD_MASTER_KEY
// is set as well, and when it opens none of the stored secrets. Neither its logs nor its errors
// ever hold the key.

const BIN = join(ROOT, 'bin', 'msgd');
const root = mkdtempSync(join(tmpdir(), 'msgd-key-'));
chmodSync(root, 0o755);
const dataDir = join(root, 'data');
const key = randomBytes(32);
const wrong = randomBytes(32);
const children: ChildProcess[] = [];
const runs: { stdout(): string; stderr(): string }[] = [];

function keyFile(name: string, k: Buffer, mode = 0o600): string {
  const file = join(root, name);
  writeFileSync(file, `${k.toString('hex')}\n`, { mode });
  chmodSync(file, mode);
  return file;
}

function msgd(env: Record<string, string>, args: string[] = [], opts: { asNobody?: boolean } = {}) {
  const asNobody = opts.asNobody && process.getuid?.() === 0;
  const [cmd, argv] = asNobody
    ? ['setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--', process.execPath, BIN, ...args]]
    : [process.execPath, [BIN, ...args]];
  const child = spawn(cmd, argv, {
    env: { PATH: process.env.PATH, MSGD_DATA_DIR: dataDir, MSGD_LOG_LEVEL: 'debug', MSGD_DEMO: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
  const run = { child, stdout: () => stdout, stderr: () => stderr };
  runs.push(run);
  return run;
}

/** msgd's one line on stderr when it refuses to start, and nothing on stdout. */
async function refused(m: ReturnType<typeof msgd>): Promise<string> {
  expect((await waitForExit(m.child, 20_000)).code).toBe(1);
  expect(m.stdout()).toBe('');
  const line = m.stderr();
  expect(line.endsWith('\n') && !line.trimEnd().includes('\n'), line).toBe(true);
  return line.trimEnd();
}

async function starts(m: ReturnType<typeof msgd>) {
  await waitFor(() => m.stdout().includes('msgd listening'), 'the listening log line', 20_000);
  m.child.kill('SIGTERM');
  expect((await waitForExit(m.child, 20_000)).code).toBe(0);
}

const good = keyFile('master.key', key);

beforeAll(async () => {
  const opts = { dataDir, env: { MSGD_MASTER_KEY_FILE: good } };
  await runJson(['init'], opts);
  await runJson(
    ['gateway', 'add', 'twilio', '--name', 'tw', '--set', 'account_sid=AC1', '--secret-stdin', 'auth_token'],
    { ...opts, stdin: 'auth-token-value' },
  );
});

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await waitForExit(c, 5_000).catch(() => {});
    }
  }
});

afterAll(() => {
  for (const r of runs) {
    for (const k of [key, wrong]) {
      for (const text of [k.toString('hex'), k.toString('base64')]) {
        expect(r.stdout()).not.toContain(text);
        expect(r.stderr()).not.toContain(text);
      }
    }
    expect(r.stdout()).not.toContain('auth-token-value');
  }
  rmSync(root, { recursive: true, force: true });
});

describe('msgd with a key file', () => {
  it('refuses one other accounts may read (0644), naming the file and chmod 600; starts once it is 0600', async () => {
    const file = keyFile('shared.key', key, 0o644);
    const port = String(await freePort());
    const line = await refused(msgd({ MSGD_PORT: port }, ['--master-key-file', file]));
    expect(line).toBe(
      `msgd: the master key file ${file} has mode 0644: other accounts may read or change it; it must be readable by its owner alone (chmod 600 ${file})`,
    );
    chmodSync(file, 0o600);
    await starts(msgd({ MSGD_PORT: port }, ['--master-key-file', file]));
  });

  it('refuses a missing file, and one it may not read', async () => {
    const missing = join(root, 'missing.key');
    expect(await refused(msgd({ MSGD_MASTER_KEY_FILE: missing, MSGD_PORT: String(await freePort()) }))).toMatch(
      new RegExp(`^msgd: the master key file ${missing} does not exist `),
    );

    // Owned by root, mode 0600: msgd running as another user cannot read it.
    if (process.getuid?.() !== 0) return;
    chownSync(dataDir, 65534, 65534);
    for (const f of ['msgd.db', 'msgd.db-wal', 'msgd.db-shm', 'msgd.lock']) {
      try {
        chownSync(join(dataDir, f), 65534, 65534);
      } catch {
        // Not every one exists.
      }
    }
    try {
      const line = await refused(
        msgd({ MSGD_MASTER_KEY_FILE: good, MSGD_PORT: String(await freePort()) }, [], { asNobody: true }),
      );
      expect(line).toBe(
        `msgd: cannot read the master key file ${good} (EACCES): it must be owned by the user msgd runs as, mode 0600 (chown that user, chmod 600 ${good})`,
      );
    } finally {
      chownSync(dataDir, 0, 0);
    }
  });

  it('refuses MSGD_MASTER_KEY and a key file together', async () => {
    const line = await refused(
      msgd({ MSGD_MASTER_KEY: key.toString('hex'), MSGD_MASTER_KEY_FILE: good, MSGD_PORT: String(await freePort()) }),
    );
    expect(line).toBe(
      `msgd: two master keys are given, MSGD_MASTER_KEY and the key file ${good} (masterKeyFile): keep one (unset MSGD_MASTER_KEY, or masterKeyFile, MSGD_MASTER_KEY_FILE and --master-key-file)`,
    );
  });

  it('refuses a key that opens none of the stored secrets, and starts with the one they were written with', async () => {
    const other = keyFile('other.key', wrong);
    const port = String(await freePort());
    expect(await refused(msgd({ MSGD_MASTER_KEY_FILE: other, MSGD_PORT: port }))).toBe(
      `msgd: the master key from masterKeyFile ${other} opens none of the stored secrets of 1 gateway: it is probably not the key they were written with; start msgd with that key (msgctl doctor names the rows)`,
    );
    expect(await refused(msgd({ MSGD_MASTER_KEY: wrong.toString('base64'), MSGD_PORT: port }))).toBe(
      'msgd: the master key from MSGD_MASTER_KEY opens none of the stored secrets of 1 gateway: it is probably not the key they were written with; start msgd with that key (msgctl doctor names the rows)',
    );
    await starts(msgd({ MSGD_MASTER_KEY_FILE: good, MSGD_PORT: port }));
    await starts(msgd({ MSGD_MASTER_KEY: key.toString('hex'), MSGD_PORT: port }));
  });
});
