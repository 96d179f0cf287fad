import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn as spawnPty } from '@lydell/node-pty';
import { MSGCTL, type CliStore, cleanEnv, cliStore, runCli, runJson } from '../helpers/cli.js';

// msgctl user: invite, list, disable, enable and reset against a real data directory.

let s: CliStore;
let dir: string;

beforeAll(async () => {
  s = await cliStore();
  dir = s.dataDir;
  await runJson(['partner', 'create', 'acme', '--name', 'Acme'], s.opts());
});
afterAll(() => s.drop());

/** msgctl on a real pseudo-terminal, typing `answer` when it asks. */
function onTerminal(args: string[], answer: string): Promise<{ code: number; screen: string }> {
  return new Promise((resolve) => {
    const env = { ...cleanEnv(), ...s.env, CI: '' } as Record<string, string>;
    const pty = spawnPty(process.execPath, [MSGCTL, '--data-dir', dir, ...args], { cols: 200, rows: 30, env });
    let screen = '';
    let answered = false;
    pty.onData((d) => {
      screen += d;
      if (!answered && screen.includes('[y/N] ')) {
        answered = true;
        pty.write(`${answer}\r`);
      }
    });
    pty.onExit(({ exitCode }) => resolve({ code: exitCode, screen }));
  });
}

describe('msgctl user', () => {
  it('invite prints a one-time link on server.publicUrl and a notice on stderr', async () => {
    const r = await runCli(
      ['user', 'invite', 'acme', 'Ann@Acme.example', '--role', 'admin'],
      s.opts({ env: { MSGD_PUBLIC_URL: 'https://msgd.example.com/' } }),
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^Invited ann@acme\.example \(admin\) for acme\.\n {2}link +https:\/\/msgd\.example\.com\/ui\/invite\/[\w-]{43}\n/,
    );
    expect(r.stderr).toContain('The link works once');
    expect(r.stderr).not.toContain('publicUrl is not set');
    const secret = /invite\/([\w-]{43})/.exec(r.stdout)![1];
    // Only its hash is stored.
    const dump = await runCli(['--json', 'audit', 'list'], s.opts());
    expect(dump.stdout).not.toContain(secret);
  });

  it('invite without publicUrl uses the configured address and warns', async () => {
    const j = await runJson(
      ['user', 'invite', 'acme', 'bob@acme.example', '--role', 'developer'],
      s.opts({ env: { MSGD_PORT: '9090' } }),
    );
    expect(j).toMatchObject({ email: 'bob@acme.example', role: 'developer', state: 'invited', partner: 'acme' });
    expect(j.link).toMatch(/^http:\/\/127\.0\.0\.1:9090\/ui\/invite\/[\w-]{43}$/);
    const text = await runCli(['user', 'invite', 'acme', 'bob@acme.example', '--role', 'developer'], s.opts());
    expect(text.stderr).toContain('warning: server.publicUrl is not set');
  });

  it('refuses bad input with a clear message and changes nothing', async () => {
    const badRole = await runCli(['user', 'invite', 'acme', 'c@acme.example', '--role', 'owner'], s.opts());
    expect(badRole.code).toBe(1);
    expect(badRole.stderr).toContain('unknown role "owner"');
    const badEmail = await runCli(['user', 'invite', 'acme', 'not-an-email', '--role', 'admin'], s.opts());
    expect(badEmail.stderr).toContain('a valid email address is required');
    const noPartner = await runCli(['user', 'invite', 'nope', 'c@acme.example', '--role', 'admin'], s.opts());
    expect(noPartner.stderr).toContain('partner "nope" not found');
    const list = await runJson(['user', 'list', 'acme'], s.opts());
    expect(list.data.map((u: any) => u.email)).toEqual(['ann@acme.example', 'bob@acme.example']);
  });

  it('list, disable, enable and reset', async () => {
    const list = await runCli(['user', 'list', 'acme'], s.opts());
    expect(list.stdout).toMatch(/ann@acme\.example +admin +invited/);
    const off = await runCli(['user', 'disable', 'acme', 'ann@acme.example'], s.opts());
    expect(off.stdout).toContain('Disabled ann@acme.example');
    expect((await runCli(['user', 'disable', 'acme', 'ann@acme.example'], s.opts())).stderr).toContain(
      'already disabled',
    );
    expect((await runCli(['user', 'reset', 'acme', 'ann@acme.example'], s.opts())).stderr).toContain(
      'is disabled for this partner; enable it first',
    );
    await runJson(['user', 'enable', 'acme', 'ann@acme.example'], s.opts());
    const reset = await runJson(['user', 'reset', 'acme', 'ann@acme.example'], s.opts());
    expect(reset.link).toMatch(/\/ui\/invite\/[\w-]{43}$/);
    // Another partner's user is not found from this partner.
    await runJson(['partner', 'create', 'globex', '--name', 'Globex'], s.opts());
    expect((await runCli(['user', 'disable', 'globex', 'ann@acme.example'], s.opts())).stderr).toContain('not found');
  });

  it('list shows the memberships of the partner; one person may be in several partners', async () => {
    await runJson(['partner', 'create', 'initech', '--name', 'Initech'], s.opts());
    const inv = await runJson(['user', 'invite', 'initech', 'Ann@acme.example', '--role', 'billing'], s.opts());
    expect(inv).toMatchObject({ email: 'ann@acme.example', role: 'billing', state: 'invited', partner: 'initech' });
    const acme = await runJson(['user', 'list', 'acme'], s.opts());
    const initech = await runJson(['user', 'list', 'initech'], s.opts());
    const annAcme = acme.data.find((u: any) => u.email === 'ann@acme.example');
    expect(annAcme).toMatchObject({ role: 'admin', state: 'invited' });
    expect(initech.data).toEqual([expect.objectContaining({ id: annAcme.id, role: 'billing', state: 'invited' })]);
    expect(initech.data[0].membership_id).not.toBe(annAcme.membership_id);
    // Disabling acts on the membership: initech's stays as it was.
    await runJson(['user', 'disable', 'acme', annAcme.id], s.opts());
    expect((await runJson(['user', 'list', 'initech'], s.opts())).data[0].state).toBe('invited');
    await runJson(['user', 'enable', 'acme', annAcme.id], s.opts());
  });

  it('remove ends a membership: asks first, --yes from scripts, audited; the last one frees the address', async () => {
    const noYes = await runCli(['user', 'remove', 'initech', 'ann@acme.example'], s.opts());
    expect(noYes.code).toBe(2);
    expect(noYes.stderr).toContain('add --yes to confirm');
    expect((await runJson(['user', 'list', 'initech'], s.opts())).data).toHaveLength(1);

    const gone = await runJson(['user', 'remove', 'initech', 'ANN@ACME.EXAMPLE', '--yes'], s.opts());
    expect(gone).toMatchObject({ email: 'ann@acme.example', partner: 'initech', removed: true });
    expect((await runJson(['user', 'list', 'initech'], s.opts())).data).toEqual([]);
    // Still in acme.
    expect((await runJson(['user', 'list', 'acme'], s.opts())).data.map((u: any) => u.email)).toContain(
      'ann@acme.example',
    );
    const again = await runCli(['user', 'remove', 'initech', 'ann@acme.example', '--yes'], s.opts());
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('not found');

    // Bob's only membership: removing it deletes the person, and the address can be invited anew.
    const bob = (await runJson(['user', 'list', 'acme'], s.opts())).data.find(
      (u: any) => u.email === 'bob@acme.example',
    );
    const text = await runCli(['user', 'remove', 'acme', bob.id, '--yes'], s.opts());
    expect(text.stdout).toBe('Removed bob@acme.example from acme.\n');
    const audit = await runJson(['audit', 'list', '--limit', '5'], s.opts());
    expect(JSON.stringify(audit)).toMatch(/user\.remove.*person_deleted/);
    const fresh = await runJson(['user', 'invite', 'initech', 'bob@acme.example', '--role', 'developer'], s.opts());
    expect(fresh.id).not.toBe(bob.id);
    expect(fresh.link_kind).toBe('invite');
  });

  it('remove asks at a terminal, naming the user and the partner; only y removes', async () => {
    await runJson(['user', 'invite', 'acme', 'dee@acme.example', '--role', 'billing'], s.opts());
    const no = await onTerminal(['user', 'remove', 'acme', 'dee@acme.example'], 'n');
    expect(no.screen).toMatch(
      /Remove dee@acme\.example \(usr_[0-9a-z]+, billing\) from acme, ending their sessions there\? This cannot be undone\. \[y\/N\]/,
    );
    expect(no.code).toBe(1);
    const emails = async () => (await runJson(['user', 'list', 'acme'], s.opts())).data.map((u: any) => u.email);
    expect(await emails()).toContain('dee@acme.example');
    const yes = await onTerminal(['user', 'remove', 'acme', 'dee@acme.example'], 'y');
    expect(yes.code).toBe(0);
    expect(yes.screen).toContain('Removed dee@acme.example from acme.');
    expect(await emails()).not.toContain('dee@acme.example');
  });
});
