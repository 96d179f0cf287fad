import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { freePort, waitFor, waitForExit } from '../helpers/wait.js';
import { freshDatabase, ownCluster } from './helpers.js';

// msgd on PostgreSQL as the operator runs it: `node bin/msgd` with MSGD_DATABASE_URL, in its
// own process, against a cluster of this file's own (it is stopped and started here). msgd
// migrates at start, says which URL it cannot reach (the password masked) and exits 1, needs a
// master key from MSGD_MASTER_KEY or masterKeyFile, and /readyz follows the server: 503 while
// it is down, 200 once it is back, without restarting msgd.

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'msgd');
const KEY = randomBytes(32).toString('hex');

const cluster = ownCluster();
const db = freshDatabase({ cluster });
const scratch = mkdtempSync(join(tmpdir(), 'msgd-pg-start-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const passwordOf = (url: string) => decodeURIComponent(new URL(url).password);
const redacted = (url: string) => url.replace(`:${passwordOf(url)}@`, ':***@');

interface Child {
  child: ChildProcess;
  url: string;
  output(): string;
}
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await waitForExit(c, 5_000).catch(() => {});
    }
  }
});

function spawnMsgd(env: Record<string, string>, port: number): { child: ChildProcess; output(): string } {
  const child = spawn(process.execPath, [BIN], {
    env: {
      PATH: process.env.PATH,
      // A data directory that must stay untouched: on PostgreSQL msgd has none.
      MSGD_DATA_DIR: join(scratch, 'data'),
      MSGD_PORT: String(port),
      MSGD_DEMO: 'false',
      MSGD_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return { child, output: () => out };
}

async function startMsgd(env: Record<string, string>): Promise<Child> {
  const port = await freePort();
  const { child, output } = spawnMsgd(env, port);
  const url = `http://127.0.0.1:${port}`;
  const exited = waitForExit(child, 60_000).then(({ code }) => {
    throw new Error(`msgd exited with ${code} before it was ready: ${output()}`);
  });
  exited.catch(() => {});
  await Promise.race([
    waitFor(async () => (await fetch(`${url}/readyz`)).ok, 'msgd to answer /readyz 200', 30_000, 50),
    exited,
  ]);
  return { child, url, output };
}

/** msgd that must not start: its exit code and everything it wrote. */
async function failedStart(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const { child, output } = spawnMsgd(env, await freePort());
  // 'close': the process has exited and its output has been read to the end.
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  return { code, output: output() };
}

describe('msgd on PostgreSQL', () => {
  it('migrates at start, serves, and never shows the password; no data directory is made', async () => {
    const m = await startMsgd({ MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY });
    const ready = await (await fetch(`${m.url}/readyz`)).json();
    expect(ready).toEqual({
      status: 'ready',
      checks: {
        database: { ok: true, message: 'PostgreSQL answers and takes writes' },
        migrations: { ok: true, message: expect.stringMatching(/^\d+ applied, none pending$/) },
      },
    });
    expect((await fetch(`${m.url}/healthz`)).status).toBe(200);
    await waitFor(() => m.output().includes('"msg":"msgd listening"'), 'the listening line', 10_000);
    const lines = m
      .output()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, any>);
    const applied = lines.find((l) => l.msg === 'migrations applied');
    expect(applied?.database).toBe(redacted(db.url));
    const listening = lines.find((l) => l.msg === 'msgd listening')!;
    expect(listening.database).toBe(redacted(db.url));
    expect(listening.config.database.url).toBe(redacted(db.url));
    expect(listening.dataDir).toBeUndefined();
    expect(m.output()).not.toContain(passwordOf(db.url));
    expect(existsSync(join(scratch, 'data'))).toBe(false);
  });

  it('/readyz answers 503 while PostgreSQL is down and 200 once it is back, msgd running on', async () => {
    const m = await startMsgd({ MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY, MSGD_LOG_LEVEL: 'warn' });
    // A console login: its throttle and the user lookup query the store.
    const page = await fetch(`${m.url}/ui/login`);
    const cookie = page.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1];
    const login = (accept: string) =>
      fetch(`${m.url}/ui/login`, {
        method: 'POST',
        headers: { cookie, accept, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf, email: 'nobody@example.com', password: 'wrong' }).toString(),
      });
    expect((await login('text/html')).status).toBe(401);
    try {
      await cluster.stop('immediate');
      const down = await waitFor(
        async () => {
          const r = await fetch(`${m.url}/readyz`);
          return r.status === 503 ? r : null;
        },
        '/readyz to answer 503',
        15_000,
        100,
      );
      expect(down.headers.get('retry-after')).toBe('30');
      const body = (await down.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('not_ready');
      expect(body.error.message).toContain(`PostgreSQL at ${redacted(db.url)} is unavailable`);
      expect(body.error.message).not.toContain(passwordOf(db.url));
      // msgd itself is alive: liveness does not depend on the database.
      expect((await fetch(`${m.url}/healthz`)).status).toBe(200);
      // A request that meets the outage: 503 with Retry-After, as a page and as JSON.
      const html = await login('text/html');
      expect(html.status).toBe(503);
      expect(html.headers.get('retry-after')).toBe('30');
      expect(await html.text()).toContain('msgd cannot reach its storage right now; nothing of this was saved.');
      const json = await login('application/json');
      expect(json.status).toBe(503);
      expect(json.headers.get('retry-after')).toBe('30');
      const err = ((await json.json()) as { error: { code: string; message: string } }).error;
      expect(err.code).toBe('storage_unavailable');
      expect(err.message).toBe(
        'msgd cannot reach its database right now; nothing of this request was kept: try again later',
      );
    } finally {
      await cluster.start();
    }
    // Ready again once the server answers and the refused writes are 10 s old.
    await waitFor(async () => (await fetch(`${m.url}/readyz`)).ok, '/readyz to answer 200 again', 30_000, 100);
    expect((await login('text/html')).status).toBe(401);
    expect(m.child.exitCode).toBeNull();
    expect(m.output()).not.toContain(passwordOf(db.url));
  });

  it('exits 1 with one line naming the URL, the password masked, when nothing listens there', async () => {
    const url = `postgres://msgd:pw-${randomBytes(6).toString('hex')}@127.0.0.1:1/msgd`;
    const r = await failedStart({ MSGD_DATABASE_URL: url, MSGD_MASTER_KEY: KEY });
    expect(r.code).toBe(1);
    expect(r.output.trim()).toBe(
      'msgd: cannot use PostgreSQL at postgres://msgd:***@127.0.0.1:1/msgd: connection refused (is the server running, and on that host and port?)',
    );
  });

  it('exits 1 with one line when the password is wrong, and never shows it', async () => {
    const wrong = new URL(db.url);
    wrong.password = `wrong-${randomBytes(6).toString('hex')}`;
    const r = await failedStart({ MSGD_DATABASE_URL: wrong.toString(), MSGD_MASTER_KEY: KEY });
    expect(r.code).toBe(1);
    const lines = r.output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^msgd: cannot use PostgreSQL at postgres://postgres:\\*\\*\\*@127\\.0\\.0\\.1:\\d+/.*: authentication failed`,
      ),
    );
    expect(r.output).not.toContain(wrong.password);
  });

  it('exits 1 with one line when neither MSGD_MASTER_KEY nor masterKeyFile gives the key', async () => {
    const r = await failedStart({ MSGD_DATABASE_URL: db.url });
    expect(r.code).toBe(1);
    const lines = r.output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^msgd: no master key: on PostgreSQL \(database\.url\) there is no data directory to keep one in; set MSGD_MASTER_KEY, or masterKeyFile/,
    );
    expect(existsSync(join(scratch, 'data'))).toBe(false);
  });

  it('refuses a master key that opens none of the stored secrets, as on SQLite, and starts with the right one', async () => {
    const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY };
    const added = await runCli(
      ['gateway', 'add', 'twilio', '--name', 'tw-key', '--set', 'account_sid=AC123', '--secret-stdin', 'auth_token'],
      { env, stdin: 'the-auth-token\n' },
    );
    expect(added.code, added.stderr).toBe(0);
    const r = await failedStart({ ...env, MSGD_MASTER_KEY: randomBytes(32).toString('hex') });
    expect(r.code).toBe(1);
    expect(r.output.trim().split('\n')).toEqual([
      'msgd: the master key from MSGD_MASTER_KEY opens none of the stored secrets of 1 gateway: it is probably not the key they were written with; start msgd with that key (msgctl doctor names the rows)',
    ]);
    const m = await startMsgd(env);
    expect((await fetch(`${m.url}/readyz`)).status).toBe(200);
  });
});
