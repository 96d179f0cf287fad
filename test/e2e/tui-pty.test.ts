import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pty from '@lydell/node-pty';
import { afterEach, describe, expect, it } from 'vitest';
import { MSGCTL, ROOT, cleanEnv } from '../helpers/cli.js';
import { addGateway } from '../../src/core/gateways.js';
import { openDataDir } from '../../src/db/datadir.js';
import { postJson } from '../helpers/server.js';
import { freePort, waitFor, waitForExit } from '../helpers/wait.js';
import { coreCtx } from '../helpers/ctx.js';

// The operator's whole first session in a real pseudo-terminal: msgd runs as its own process,
// `msgctl tui` opens beside it at 80×24, and everything is done by keystrokes: a sandbox
// gateway, a partner, a token (its secret read off the screen), a top-up, the SMS channel.
// Then an SMS sent over HTTP with that token shows up in the live tail as its sandbox status
// webhook, and q leaves the terminal as it was.

const ESC = '\x1b';
const KEY = { enter: '\r', tab: '\t', left: `${ESC}[D`, right: `${ESC}[C`, up: `${ESC}[A` };
const ANSI = /\x1b\[[0-9;?]*[ -\/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]/g;

class Screen {
  raw = '';
  mark = 0;
  constructor(readonly term: pty.IPty) {
    term.onData((d) => (this.raw += d));
  }
  /** Text drawn since the last mark, without escape sequences. */
  since(): string {
    return this.raw.slice(this.mark).replace(ANSI, '');
  }
  async see(what: RegExp, timeoutMs = 10_000): Promise<RegExpMatchArray> {
    const m = await waitFor(() => this.since().match(what), `the terminal to show ${what}`, timeoutMs, 25).catch(
      (e) => {
        throw new Error(`${(e as Error).message}; it shows:\n${this.since().slice(-2500)}`);
      },
    );
    // Drawn before the screen's key handlers are subscribed: let them be.
    await new Promise((r) => setTimeout(r, 60));
    return m;
  }
  async keys(...ks: string[]) {
    for (const k of ks) {
      this.mark = this.raw.length;
      this.term.write(k);
      await new Promise((r) => setTimeout(r, 80));
    }
  }
}

const cleanup: (() => unknown)[] = [];

/**
 * The environment of an operator's shell: without the variables that mark a CI run (CI, CI_*),
 * which make Ink draw only the last frame, so the screen would stay blank until msgctl exits.
 */
function terminalEnv(term: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(cleanEnv())) {
    if (v !== undefined && k !== 'CI' && k !== 'CONTINUOUS_INTEGRATION' && !k.startsWith('CI_')) env[k] = v;
  }
  return { ...env, TERM: term, ...extra };
}
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

describe('msgctl tui in a real terminal', () => {
  it('runs an operator session beside a running msgd, and restores the terminal on quit', async () => {
    const root = mkdtempSync(join(tmpdir(), 'msgd-tui-pty-'));
    cleanup.push(() => rmSync(root, { recursive: true, force: true }));
    const dataDir = join(root, 'data');
    const port = await freePort();
    const msgd: ChildProcess = spawn(process.execPath, [join(ROOT, 'bin', 'msgd')], {
      env: {
        ...cleanEnv(),
        MSGD_DATA_DIR: dataDir,
        MSGD_PORT: String(port),
        MSGD_DEMO: 'false',
        MSGD_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let msgdOut = '';
    msgd.stdout!.on('data', (d) => (msgdOut += d));
    msgd.stderr!.on('data', (d) => (msgdOut += d));
    cleanup.push(async () => {
      if (msgd.exitCode === null && msgd.signalCode === null) {
        msgd.kill('SIGTERM');
        await waitForExit(msgd, 15_000).catch(() => msgd.kill('SIGKILL'));
      }
    });
    const url = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${url}/healthz`).catch(() => null))?.ok, 'msgd to answer', 20_000, 50);

    const term = pty.spawn(process.execPath, [MSGCTL, '--data-dir', dataDir, 'tui'], {
      name: 'xterm-256color',
      cols: 80,
      rows: 24,
      cwd: root,
      env: terminalEnv('xterm-256color'),
    });
    let exit: { exitCode: number } | null = null;
    term.onExit((e) => (exit = e));
    cleanup.push(() => {
      if (!exit) term.kill();
    });
    const s = new Screen(term);
    await s.see(/● msgd running \d+\.\d+\.\d+ · up/);
    // The alternate screen, so the shell's screen comes back untouched on the way out.
    expect(s.raw).toContain('\x1b[?1049h');

    // A sandbox gateway: name, then the kind (←: the last of the list, sandbox).
    await s.keys('3');
    await s.see(/No gateways yet/);
    await s.keys('n');
    await s.see(/Add a gateway: its kind/);
    await s.keys('sbx', KEY.tab, KEY.left);
    await s.see(/‹ sandbox: Sandbox/);
    await s.keys(KEY.enter);
    await s.see(/Add sandbox gateway sbx/);
    await s.keys(KEY.enter);
    await s.see(/Added sandbox gateway sbx\. Register its webhook URL:/);
    await s.see(/http:\/\/127\.0\.0\.1:\d+\/api\/webhook\.php\?gateway=gw_\w{26}/);

    // The partner, its token, money and channel.
    await s.keys('2');
    await s.see(/No partners yet/);
    await s.keys('n');
    await s.see(/New partner/);
    await s.keys('acme', KEY.tab, 'Acme Ltd', KEY.enter);
    await s.see(/Created partner acme/);
    await s.keys('i');
    await s.see(/Issue a token for acme/);
    await s.keys('prod', KEY.enter);
    const shown = await s.see(/Shown ONCE[\s\S]*?(msgd_live_[A-Za-z0-9_-]{20,})/);
    const token = shown[1];
    await s.keys(KEY.enter);
    await s.see(/Issued token "prod"/);
    await s.keys('t');
    await s.see(/Top up acme/);
    await s.keys('10.00', KEY.enter);
    await s.see(/Balance 0\.00 USD → 10\.00 USD\./);
    await s.keys('y');
    await s.see(/Topped up acme by 10\.00 USD; balance 10\.00 USD\./);
    await s.keys('A');
    await s.see(/Assign a channel to acme/);
    await s.keys(KEY.right, KEY.right, KEY.right);
    await s.see(/‹ sms ›/);
    await s.keys(KEY.tab, KEY.tab, KEY.tab, '+15550001111', KEY.enter);
    await s.see(/Assigned sms to acme \(sender \+15550001111\)\./);

    // The tail, then a send with the token the screen showed.
    await s.keys('4');
    await s.see(/live · in only/);
    const sent = await postJson(
      `${url}/api/send-sms.php`,
      { to: '+14155550123', text: 'Hello from the console' },
      token,
    );
    expect(sent.status).toBe(200);
    await s.see(/\d\d sandbox\s+sbx\s+verified\s+processed/, 20_000);
    // Its detail: what the webhook changed, the message it moved.
    await s.keys(KEY.up, KEY.enter);
    await s.see(new RegExp(`status delivered: message ${sent.body.id} \\(now delivered\\)`));
    await s.keys(ESC);

    await s.keys('q');
    await waitFor(() => exit, 'msgctl tui to exit', 10_000);
    expect(exit!.exitCode).toBe(0);
    // Main screen back and the cursor shown, after the last frame.
    const tailEnd = s.raw.slice(s.raw.lastIndexOf('\x1b[?1049l'));
    expect(s.raw.lastIndexOf('\x1b[?1049l')).toBeGreaterThan(s.raw.lastIndexOf('\x1b[?1049h'));
    expect(s.raw.lastIndexOf('\x1b[?25h')).toBeGreaterThan(s.raw.lastIndexOf('\x1b[?25l'));
    expect(tailEnd.replace(ANSI, '').trim()).toBe('');
  }, 120_000);

  it('keeps the terminal clean: a screen that fails, a resize, and SIGTERM', async () => {
    const root = mkdtempSync(join(tmpdir(), 'msgd-tui-pty-'));
    cleanup.push(() => rmSync(root, { recursive: true, force: true }));
    const dataDir = join(root, 'data');
    const dd = openDataDir(dataDir, { create: true, env: {} });
    const ctx = coreCtx(dd, { dataDir });
    await addGateway(ctx, { kind: 'sandbox', name: 'sandbox-1', settings: {} }, 'test');
    // A gateway of a kind this msgctl does not know: drawing its detail throws.
    dd.db.sqlite
      .prepare(
        `INSERT INTO gateways (id, kind, name, status, settings, secrets, created_at, updated_at)
         SELECT 'gw_x', 'pigeon', 'coop', 'active', '{}', secrets, 0, 0 FROM gateways LIMIT 1`,
      )
      .run();
    dd.close();

    const term = pty.spawn(process.execPath, [MSGCTL, '--data-dir', dataDir, 'tui'], {
      name: 'xterm',
      cols: 80,
      rows: 24,
      cwd: root,
      env: terminalEnv('xterm', { NO_COLOR: '1' }),
    });
    let exit: { exitCode: number; signal?: number } | null = null;
    term.onExit((e) => (exit = e));
    cleanup.push(() => {
      if (!exit) term.kill();
    });
    const s = new Screen(term);
    await s.see(/○ msgd not running/);
    await s.keys('3');
    await s.see(/This screen failed: .*Switch screens/s);
    await s.keys('2');
    await s.see(/No partners yet/);
    // NO_COLOR: no colour escapes at all (bold and inverse remain).
    expect(s.raw).not.toMatch(/\x1b\[3[0-7]m|\x1b\[38;/);

    s.mark = s.raw.length;
    term.resize(100, 30);
    // The header spans the new width: the data directory ends at column 100.
    await s.see(new RegExp(`○ msgd not running {20,}${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));

    term.kill('SIGTERM');
    await waitFor(() => exit, 'msgctl tui to exit on SIGTERM', 10_000);
    expect(s.raw.lastIndexOf('\x1b[?1049l')).toBeGreaterThan(s.raw.lastIndexOf('\x1b[?1049h'));
    expect(s.raw.lastIndexOf('\x1b[?25h')).toBeGreaterThan(s.raw.lastIndexOf('\x1b[?25l'));
  }, 60_000);

  it('quits on Ctrl-C with the terminal restored', async () => {
    const root = mkdtempSync(join(tmpdir(), 'msgd-tui-pty-'));
    cleanup.push(() => rmSync(root, { recursive: true, force: true }));
    const dataDir = join(root, 'data');
    openDataDir(dataDir, { create: true, env: {} }).close();
    const term = pty.spawn(process.execPath, [MSGCTL, '--data-dir', dataDir, 'tui'], {
      name: 'xterm',
      cols: 80,
      rows: 24,
      cwd: root,
      env: terminalEnv('xterm'),
    });
    let exit: { exitCode: number } | null = null;
    term.onExit((e) => (exit = e));
    cleanup.push(() => {
      if (!exit) term.kill();
    });
    const s = new Screen(term);
    await s.see(/○ msgd not running/);
    await s.keys('\x03');
    await waitFor(() => exit, 'msgctl tui to exit on Ctrl-C', 10_000);
    expect(exit!.exitCode).toBe(0);
    expect(s.raw.lastIndexOf('\x1b[?1049l')).toBeGreaterThan(s.raw.lastIndexOf('\x1b[?1049h'));
    expect(s.raw.lastIndexOf('\x1b[?25h')).toBeGreaterThan(s.raw.lastIndexOf('\x1b[?25l'));
  }, 60_000);
});
