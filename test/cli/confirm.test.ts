import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn as spawnPty } from '@lydell/node-pty';
import { issueToken } from '../../src/core/tokens.js';
import { queueOf } from '../../src/queue/of-ctx.js';
import { connect, setupPartner } from '../helpers/server.js';
import { type CliStore, cleanEnv, cliStore, MSGCTL, oneErrorLine, runCli, runJson } from '../helpers/cli.js';

// Commands that lose data or cannot be undone ask at a terminal and need --yes in a script.
// The terminal is a real pseudo-terminal: msgctl sees a TTY on stdin and stderr, as at a shell.

let s: CliStore;
let tokenId: string;
let deadIds: number[];

beforeAll(async () => {
  s = await cliStore();
  await s.withCtx(async (ctx) => {
    const p = await setupPartner(ctx, { slug: 'acme' });
    await connect(ctx, p.partnerId, { kind: 'sandbox', name: 'in-use' }, 'sms', '+15550001111');
    tokenId = (await issueToken(ctx, { partner: 'acme', name: 'ci', scopes: ['messages:send'] }, 'test')).token.id;
    const q = queueOf(ctx);
    deadIds = [];
    for (const d of ['wd_1', 'wd_2', 'wd_3']) {
      const id = (await q.enqueue(ctx.store, { kind: 'webhook.deliver', payload: { delivery_id: d } })).id;
      await q.fail(id, 'endpoint down');
      deadIds.push(id);
    }
  });
});
afterAll(() => s.drop());

const run = (args: string[]) => runCli(args, s.opts());
const deadCount = async () => (await runJson(['jobs', 'dead'], s.opts())).data.length;

/** Run msgctl on a pseudo-terminal, typing `answer` when it asks; the screen and exit code. */
function onTerminal(args: string[], answer: string): Promise<{ code: number; screen: string }> {
  return new Promise((resolve) => {
    const env = { ...cleanEnv(), ...s.env, CI: '' } as Record<string, string>;
    const pty = spawnPty(process.execPath, [MSGCTL, '--data-dir', s.dataDir, ...args], { cols: 200, rows: 30, env });
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

describe('without a terminal (a script)', () => {
  it.each([
    [['jobs', 'delete', '--all'], /Delete 3 dead jobs: this cannot be undone; add --yes to confirm/],
    [
      ['gateway', 'update', 'in-use', '--unset-secret', 'signing_secret'],
      /Remove secret signing_secret of gateway in-use/,
    ],
  ])('msgctl %s refuses without --yes, as a usage error, and changes nothing', async (args, message) => {
    const r = await run(args);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(oneErrorLine(r.stderr)).toMatch(message);
    expect(await deadCount()).toBe(3);
  });

  it('token revoke names the token it would revoke, and revokes it with --yes', async () => {
    const r = await run(['token', 'revoke', tokenId]);
    expect(r.code).toBe(2);
    expect(oneErrorLine(r.stderr)).toMatch(new RegExp(`Revoke token "ci" of acme \\(${tokenId}, msgd_live_`));
    expect((await runJson(['token', 'list', 'acme'], s.opts())).data[0].state).toBe('active');
    expect((await runJson(['token', 'revoke', tokenId, '--yes'], s.opts())).state).toBe('revoked');
  });

  it('jobs delete one job with --yes', async () => {
    expect(await runJson(['jobs', 'delete', String(deadIds[0]), '--yes'], s.opts())).toEqual({ deleted: 1 });
    expect(await deadCount()).toBe(2);
  });

  it('asks nothing when there is nothing to lose', async () => {
    const none = await run(['jobs', 'delete', '--all', '--kind', 'no.such.kind']);
    expect(none.code).toBe(0);
    expect(none.stdout).toContain('0 dead job(s) deleted');
  });
});

describe('at a terminal', () => {
  it('asks, on the terminal, naming what is lost; anything but y leaves it as it was', async () => {
    const r = await onTerminal(['jobs', 'delete', '--all'], 'n');
    expect(r.screen).toContain('Delete 2 dead jobs? This cannot be undone. [y/N]');
    expect(r.screen).toContain('msgctl: not confirmed: nothing was changed');
    expect(r.code).toBe(1);
    expect(await deadCount()).toBe(2);
  });

  it('goes ahead on y', async () => {
    const r = await onTerminal(['jobs', 'delete', '--all'], 'y');
    expect(r.code).toBe(0);
    expect(r.screen).toContain('2 dead job(s) deleted.');
    expect(await deadCount()).toBe(0);
  });

  it('gateway remove names the gateway; one still in use is refused before anything is asked', async () => {
    const inUse = await run(['gateway', 'remove', 'in-use']);
    expect(inUse.code).toBe(1);
    expect(oneErrorLine(inUse.stderr)).toMatch(/gateway "in-use" is assigned to 1 active channel/);
    expect((await run(['channel', 'unassign', 'acme', 'sms'])).code).toBe(0);
    const no = await onTerminal(['gateway', 'remove', 'in-use'], 'n');
    expect(no.screen).toMatch(
      /Remove sandbox gateway in-use \(gw_[0-9a-z]+\) and its stored secrets\? This cannot be undone\. \[y\/N\]/,
    );
    expect(no.code).toBe(1);
    const yes = await onTerminal(['gateway', 'remove', 'in-use'], 'yes');
    expect(yes.code).toBe(0);
    expect(yes.screen).toMatch(/Removed gateway in-use/);
    expect((await run(['gateway', 'show', 'in-use'])).code).toBe(1);
  });
});
