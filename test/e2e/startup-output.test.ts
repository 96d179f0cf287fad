import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT, spawnCli } from '../helpers/cli.js';
import { freePort, waitFor, waitForExit } from '../helpers/wait.js';

// What bin/msgd writes before and while it starts, as a log shipper or an operator reads it:
// stdout carries JSON log lines only, and a configuration error reads as msgctl's does.

const BIN = join(ROOT, 'bin', 'msgd');
const dirs: string[] = [];
const children: import('node:child_process').ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await waitForExit(c, 5_000).catch(() => {});
    }
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), 'msgd-startup-'));
  dirs.push(d);
  return d;
}

/** msgd as this user, or as `nobody` when the tests run as root (whom no permission stops). */
function msgd(env: Record<string, string>, opts: { unprivileged?: boolean } = {}) {
  const asNobody = opts.unprivileged && process.getuid?.() === 0;
  const [cmd, args] = asNobody
    ? ['setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--', process.execPath, BIN]]
    : [process.execPath, [BIN]];
  const child = spawn(cmd, args, {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
  return { child, stdout: () => stdout, stderr: () => stderr };
}

describe('msgd at start', () => {
  it('the first start with an empty data directory: the demo banner on stderr, JSON lines only on stdout', async () => {
    const dir = scratch();
    const port = await freePort();
    const m = msgd({ MSGD_DATA_DIR: join(dir, 'data'), MSGD_PORT: String(port), MSGD_LOG_LEVEL: 'info' });
    await waitFor(() => m.stderr().includes('curl -s'), 'the demo banner', 20_000);
    await waitFor(() => m.stdout().includes('msgd listening'), 'the listening log line', 5_000);
    m.child.kill('SIGTERM');
    expect((await waitForExit(m.child, 20_000)).code).toBe(0);

    expect(m.stderr()).toMatch(/msgd created a demo partner/);
    expect(m.stderr()).toMatch(/Bearer msgd_live_/);
    const lines = m
      .stdout()
      .split('\n')
      .filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(1);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    expect(m.stdout()).not.toContain('msgd_live_');
  });
});

describe('a data directory msgd may not write', () => {
  it('is named as such, with the path refused, not taken for a port it may not listen on', async () => {
    const dir = scratch();
    chmodSync(dir, 0o755);
    const data = join(dir, 'data');
    mkdirSync(data, { mode: 0o555 });
    chmodSync(data, 0o555);
    const m = msgd({ MSGD_DATA_DIR: data, MSGD_PORT: String(await freePort()) }, { unprivileged: true });
    expect((await waitForExit(m.child, 20_000)).code).toBe(1);
    expect(m.stderr()).toBe(
      `msgd: cannot use the data directory ${data}: msgd needs to read and write it (EACCES on ${join(data, 'msgd.lock')})\n`,
    );
  });
});

describe('an invalid configuration', () => {
  it('reads the same from msgd and msgctl: one line naming the file and every key', async () => {
    const dir = scratch();
    const file = join(dir, 'msgd.json');
    writeFileSync(file, JSON.stringify({ server: { port: 'eighty' }, jobs: { backoffCapMs: -1 }, bogus: 1 }));
    const m = msgd({ MSGD_CONFIG: file, MSGD_DATA_DIR: join(dir, 'data') });
    expect((await waitForExit(m.child, 20_000)).code).toBe(1);
    expect(m.stdout()).toBe('');
    const line = m.stderr();
    expect(line.endsWith('\n')).toBe(true);
    expect(line.trimEnd()).not.toContain('\n');
    expect(line).toMatch(new RegExp(`^msgd: invalid configuration \\(${file.replace(/[.]/g, '\\.')}\\): `));
    expect(line).toContain('server.port: ');
    expect(line).toContain('jobs.backoffCapMs: ');
    expect(line).toContain('unknown key "bogus"');
    expect(line).not.toContain(':;');

    const c = await spawnCli(['--config', file, 'partner', 'list']);
    expect(c.code).toBe(1);
    expect(c.stderr).toBe(line.replace(/^msgd: /, 'msgctl: '));
  });
});
