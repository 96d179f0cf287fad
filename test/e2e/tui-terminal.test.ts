import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pty from '@lydell/node-pty';
import { afterEach, describe, expect, it } from 'vitest';
import { MSGCTL, cleanEnv } from '../helpers/cli.js';
import type { CoreCtx } from '../../src/core/context.js';
import { addGateway, getGateway } from '../../src/core/gateways.js';
import { createPartner, getPartner } from '../../src/core/partners.js';
import { openDataDir } from '../../src/db/datadir.js';
import { waitFor } from '../helpers/wait.js';
import { coreCtx } from '../helpers/ctx.js';

// What only a real terminal shows: keys that arrive in one read, a bracketed paste, the exit
// status a signal leaves, a terminal without attributes (TERM=dumb) and a locale without UTF-8.

const ANSI = /\x1b\[[0-9;?]*[ -\/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]/g;

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

function terminalEnv(term: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(cleanEnv())) {
    if (v !== undefined && k !== 'CI' && k !== 'CONTINUOUS_INTEGRATION' && !k.startsWith('CI_')) env[k] = v;
  }
  return { ...env, TERM: term, LANG: 'C.UTF-8', ...extra };
}

/** A data directory set up through the core functions, closed again before the console opens it. */
async function dataDir(setup: (ctx: CoreCtx) => void = () => {}): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'msgd-tui-term-'));
  cleanup.push(() => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, 'data');
  const dd = openDataDir(dir, { create: true, env: {} });
  await setup(coreCtx(dd, { dataDir: dir }));
  dd.close();
  return dir;
}

async function withCtx<T>(dir: string, fn: (ctx: CoreCtx) => T | Promise<T>): Promise<T> {
  const dd = openDataDir(dir, { env: {} });
  try {
    return await fn(coreCtx(dd, { dataDir: dir }));
  } finally {
    dd.close();
  }
}

function open(dir: string, env: Record<string, string>) {
  const term = pty.spawn(process.execPath, [MSGCTL, '--data-dir', dir, 'tui'], {
    name: env.TERM,
    cols: 80,
    rows: 24,
    cwd: dirnameOf(dir),
    env,
  });
  let raw = '';
  let mark = 0;
  let exit: { exitCode: number; signal?: number } | null = null;
  term.onData((d) => (raw += d));
  term.onExit((e) => (exit = e));
  cleanup.push(() => {
    if (!exit) term.kill('SIGKILL');
  });
  return {
    term,
    raw: () => raw,
    exit: () => exit,
    async see(what: RegExp, timeoutMs = 10_000) {
      const m = await waitFor(
        () => raw.slice(mark).replace(ANSI, '').match(what),
        `the terminal to show ${what}`,
        timeoutMs,
        25,
      ).catch((e) => {
        throw new Error(`${(e as Error).message}; it shows:\n${raw.slice(mark).replace(ANSI, '').slice(-2500)}`);
      });
      await new Promise((r) => setTimeout(r, 80));
      return m;
    },
    /** One write: everything in it arrives in one read. */
    async write(data: string) {
      mark = raw.length;
      term.write(data);
      await new Promise((r) => setTimeout(r, 120));
    },
  };
}

const dirnameOf = (p: string) => join(p, '..');

describe('msgctl tui in a real terminal: keys, paste, signals, terminals', () => {
  it('reads keys that arrive in one read one by one: jjjjj moves five rows, Tab then text fills two fields', async () => {
    const dir = await dataDir(async (ctx) => {
      for (let i = 0; i < 10; i++) await createPartner(ctx, { slug: `p${i}`, name: `Partner ${i}` }, 'test');
    });
    const t = open(dir, terminalEnv('xterm'));
    await t.see(/○ msgd not running/);
    await t.write('2');
    await t.see(/Partner 9/);
    await t.write('jjjjj');
    await t.write('\r');
    await t.see(/p5 · Partner 5 · active/);
    await t.write('\x1b');
    await t.see(/SPENT TODAY/);
    await t.write('n');
    await t.see(/New partner/);
    await t.write('acme\tAcme Ltd\r');
    await t.see(/Created partner acme/);
    expect(await withCtx(dir, async (ctx) => (await getPartner(ctx, 'acme')).name)).toBe('Acme Ltd');
    await t.write('q');
    await waitFor(() => t.exit(), 'msgctl tui to exit', 10_000);
    expect(t.exit()!.exitCode).toBe(0);
  }, 60_000);

  it('takes a bracketed paste into a secret field as text, never as keys; paste mode is off again on the way out', async () => {
    const dir = await dataDir();
    const t = open(dir, terminalEnv('xterm'));
    await t.see(/○ msgd not running/);
    // Bracketed paste is asked for on the way in.
    expect(t.raw()).toContain('\x1b[?2004h');
    await t.write('3');
    await t.see(/No gateways yet/);
    await t.write('n');
    await t.see(/Add a gateway: its kind/);
    await t.write('sbx\t\x1b[D');
    await t.see(/‹ sandbox: Sandbox/);
    await t.write('\r');
    await t.see(/Add sandbox gateway sbx/);
    // Settings first, the optional signing_secret last: ↑ wraps round to it.
    await t.write('\x1b[A');
    await t.see(/› signing_secret/);
    // A secret with a Tab, q and an Enter in it: as keys, Tab would move on and Enter submit.
    await t.write('\x1b[200~s3cr\tq3t\r\x1b[201~');
    const f = await t.see(/› signing_secret\s+(•+)/);
    expect(f[1]).toHaveLength('s3crq3t'.length);
    expect(t.raw()).not.toContain('Added sandbox gateway');
    await t.write('\r');
    await t.see(/Added sandbox gateway sbx/);
    expect(await withCtx(dir, async (ctx) => (await getGateway(ctx, 'sbx')).secret_names)).toEqual(['signing_secret']);
    await t.write('q');
    await waitFor(() => t.exit(), 'msgctl tui to exit', 10_000);
    const raw = t.raw();
    expect(raw.lastIndexOf('\x1b[?2004l')).toBeGreaterThan(raw.lastIndexOf('\x1b[?2004h'));
  }, 60_000);

  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const)
    it(`exits ${code} on ${signal}, with the terminal restored`, async () => {
      const t = open(await dataDir(), terminalEnv('xterm'));
      await t.see(/○ msgd not running/);
      t.term.kill(signal);
      await waitFor(() => t.exit(), `msgctl tui to exit on ${signal}`, 10_000);
      expect(t.exit()!.exitCode).toBe(code);
      const raw = t.raw();
      expect(raw.lastIndexOf('\x1b[?1049l')).toBeGreaterThan(raw.lastIndexOf('\x1b[?1049h'));
      expect(raw.lastIndexOf('\x1b[?2004l')).toBeGreaterThan(raw.lastIndexOf('\x1b[?2004h'));
    }, 60_000);

  it('TERM=dumb: the selected row is marked with >', async () => {
    const dir = await dataDir(async (ctx) => {
      await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
      await createPartner(ctx, { slug: 'globex', name: 'Globex' }, 'test');
    });
    const t = open(dir, terminalEnv('dumb'));
    await t.see(/○ msgd not running/);
    await t.write('2');
    await t.see(/>acme\s+Acme/);
    await t.write('j');
    await t.see(/>globex\s+Globex/);
  }, 60_000);

  it('LANG=C: ASCII only, boxes drawn with + - |', async () => {
    const dir = await dataDir(async (ctx) => {
      await addGateway(ctx, { kind: 'sandbox', name: 'sandbox-1', settings: {} }, 'test');
    });
    const t = open(dir, terminalEnv('xterm', { LANG: 'C', LC_ALL: 'C' }));
    await t.see(/o msgd not running/);
    await t.write('3');
    await t.see(/\+-{20,}\+/);
    await t.see(/\|sandbox-1 - Sandbox/);
    // eslint-disable-next-line no-control-regex
    expect(t.raw()).not.toMatch(/[^\x00-\x7f]/);
  }, 60_000);
});
