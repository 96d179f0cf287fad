import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPartnerIn } from '../../src/core/partners.js';
import { MSGCTL, type CliStore, cleanEnv, cliStore, cliStoreKind, oneErrorLine, spawnCli } from '../helpers/cli.js';
import { waitForExit } from '../helpers/wait.js';

// The real bin/msgctl, for what only a process shows: exit codes, a reader that hangs up,
// secrets piped on stdin, the working directory. Everything else runs in-process (runCli).

let s: CliStore;

beforeAll(async () => {
  s = await cliStore();
});
afterAll(() => s.drop());

describe('bin/msgctl', () => {
  it('exits 0 on success, 1 on a failed command, 2 on bad usage', async () => {
    const v = await spawnCli(['--version']);
    expect(v.code).toBe(0);
    expect(v.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
    const missing = await spawnCli(['partner', 'show', 'nope'], s.opts());
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(oneErrorLine(missing.stderr)).toMatch(/^msgctl: .*nope/);
    const usage = await spawnCli(['partner', 'create', 'acme', '--name', 'Acme', '--bogus'], s.opts());
    expect(usage.code).toBe(2);
    expect(oneErrorLine(usage.stderr)).toMatch(/unknown option '--bogus'.*msgctl partner create --help/);
  });

  it('a reader that stops early (| head) ends msgctl quietly with exit 0', async () => {
    // Several times what a pipe holds (64 KiB), so msgctl is still writing when the reader hangs up.
    await s.withCtx((ctx) =>
      ctx.store.transaction(async (tx) => {
        for (let i = 0; i < 800; i++)
          await createPartnerIn(
            ctx,
            tx,
            { slug: `bulk-${i}`, name: `Bulk partner number ${i} `.repeat(4).trim() },
            'test',
          );
      }),
    );
    const child = spawn(process.execPath, [MSGCTL, '--data-dir', s.dataDir, '--json', 'partner', 'list'], {
      env: { ...cleanEnv(), ...s.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    let first = '';
    child.stdout.setEncoding('utf8').once('data', (d: string) => {
      first = d;
      child.stdout.destroy();
    });
    const { code, signal } = await waitForExit(child, 20_000);
    expect(first).toMatch(/^\{/);
    expect({ code, signal, stderr }).toEqual({ code: 0, signal: null, stderr: '' });
  });

  it('takes a secret from a pipe on stdin and never prints it back', async () => {
    const secret = 'piped-auth-token-5f3a9c';
    const add = await spawnCli(
      ['gateway', 'add', 'twilio', '--name', 'tw-piped', '--set', 'account_sid=AC1', '--secret-stdin', 'auth_token'],
      s.opts({ stdin: `${secret}\n` }),
    );
    expect(add.code, add.stderr).toBe(0);
    // Not a terminal: no prompt for the secret.
    expect(add.stderr).toBe('');
    const show = await spawnCli(['--json', 'gateway', 'show', 'tw-piped'], s.opts());
    expect(JSON.parse(show.stdout).secret_names).toEqual(['auth_token']);
    for (const out of [add.stdout, add.stderr, show.stdout, show.stderr]) expect(out).not.toContain(secret);
  });

  // Where the data directory is by default, and init: SQLite's.
  it.skipIf(cliStoreKind === 'postgres')(
    'without --data-dir, MSGD_DATA_DIR or a config, uses ./data in the working directory',
    async () => {
      const cwd = mkdtempSync(join(tmpdir(), 'msgctl-cwd-'));
      try {
        const r = await spawnCli(['--json', 'init'], { cwd });
        expect(r.code, r.stderr).toBe(0);
        expect(JSON.parse(r.stdout).data_dir).toBe(join(cwd, 'data'));
        expect(existsSync(join(cwd, 'data', 'msgd.db'))).toBe(true);
      } finally {
        rmSync(cwd, { recursive: true, force: true });
      }
    },
  );
});
