import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupTmp, runCli, runJson, tmpDataDir } from '../helpers/cli.js';

// msgctl user: invite, list, disable, enable and reset against a real data directory.

let dir: string;

beforeAll(async () => {
  dir = tmpDataDir();
  await runJson(['init'], { dataDir: dir });
  await runJson(['partner', 'create', 'acme', '--name', 'Acme'], { dataDir: dir });
});
afterAll(() => cleanupTmp());

describe('msgctl user', () => {
  it('invite prints a one-time link on server.publicUrl and a notice on stderr', async () => {
    const r = await runCli(['user', 'invite', 'acme', 'Ann@Acme.example', '--role', 'admin'], {
      dataDir: dir,
      env: { MSGD_PUBLIC_URL: 'https://msgd.example.com/' },
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^Invited ann@acme\.example \(admin\) for acme\.\n {2}link +https:\/\/msgd\.example\.com\/ui\/invite\/[\w-]{43}\n/,
    );
    expect(r.stderr).toContain('The link works once');
    expect(r.stderr).not.toContain('publicUrl is not set');
    const secret = /invite\/([\w-]{43})/.exec(r.stdout)![1];
    // Only its hash is stored.
    const dump = await runCli(['--json', 'audit', 'list'], { dataDir: dir });
    expect(dump.stdout).not.toContain(secret);
  });

  it('invite without publicUrl uses the configured address and warns', async () => {
    const j = await runJson(['user', 'invite', 'acme', 'bob@acme.example', '--role', 'developer'], {
      dataDir: dir,
      env: { MSGD_PORT: '9090' },
    });
    expect(j).toMatchObject({ email: 'bob@acme.example', role: 'developer', state: 'invited', partner: 'acme' });
    expect(j.link).toMatch(/^http:\/\/127\.0\.0\.1:9090\/ui\/invite\/[\w-]{43}$/);
    const text = await runCli(['user', 'invite', 'acme', 'bob@acme.example', '--role', 'developer'], { dataDir: dir });
    expect(text.stderr).toContain('warning: server.publicUrl is not set');
  });

  it('refuses bad input with a clear message and changes nothing', async () => {
    const badRole = await runCli(['user', 'invite', 'acme', 'c@acme.example', '--role', 'owner'], { dataDir: dir });
    expect(badRole.code).toBe(1);
    expect(badRole.stderr).toContain('unknown role "owner"');
    const badEmail = await runCli(['user', 'invite', 'acme', 'not-an-email', '--role', 'admin'], { dataDir: dir });
    expect(badEmail.stderr).toContain('a valid email address is required');
    const noPartner = await runCli(['user', 'invite', 'nope', 'c@acme.example', '--role', 'admin'], { dataDir: dir });
    expect(noPartner.stderr).toContain('partner "nope" not found');
    const list = await runJson(['user', 'list', 'acme'], { dataDir: dir });
    expect(list.data.map((u: any) => u.email)).toEqual(['ann@acme.example', 'bob@acme.example']);
  });

  it('list, disable, enable and reset', async () => {
    const list = await runCli(['user', 'list', 'acme'], { dataDir: dir });
    expect(list.stdout).toMatch(/ann@acme\.example +admin +invited/);
    const off = await runCli(['user', 'disable', 'acme', 'ann@acme.example'], { dataDir: dir });
    expect(off.stdout).toContain('Disabled ann@acme.example');
    expect((await runCli(['user', 'disable', 'acme', 'ann@acme.example'], { dataDir: dir })).stderr).toContain(
      'already disabled',
    );
    expect((await runCli(['user', 'reset', 'acme', 'ann@acme.example'], { dataDir: dir })).stderr).toContain(
      'is disabled; enable it first',
    );
    await runJson(['user', 'enable', 'acme', 'ann@acme.example'], { dataDir: dir });
    const reset = await runJson(['user', 'reset', 'acme', 'ann@acme.example'], { dataDir: dir });
    expect(reset.link).toMatch(/\/ui\/invite\/[\w-]{43}$/);
    // Another partner's user is not found from this partner.
    await runJson(['partner', 'create', 'globex', '--name', 'Globex'], { dataDir: dir });
    expect((await runCli(['user', 'disable', 'globex', 'ann@acme.example'], { dataDir: dir })).stderr).toContain(
      'not found',
    );
  });
});
