import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { freePort, waitFor, waitForExit } from '../helpers/wait.js';
import { startTwilioFake } from '../fakes/twilio.js';
import { cleanupAfterEach, inspect, prepare, startMsgd, type Prepared } from './child.js';
import { SMS, send } from '../helpers/gateways.js';
import { messagesOf } from '../helpers/rows.js';
import { expectMoneyConsistent } from '../helpers/expectations.js';

// Backups of a msgd that is serving: taken by msgctl from another process while sends pour
// in, restored into a fresh directory, and served from there.

const cleanup = cleanupAfterEach();

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'msgd-backup-e2e-'));
  cleanup.prep({ dir, remove: async () => rmSync(dir, { recursive: true, force: true }) } as Prepared);
  return dir;
}

describe('backup under load, restore, serve', () => {
  it('keeps every message accepted before the backup began, the ledger holds, the copy serves', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    const prep = cleanup.prep(await prepare(fake, {}, { balance: '100000', price: '0.01' }));
    const msgd = cleanup.child(await startMsgd(prep));

    // 16 clients sending back to back for the whole test.
    const pool = new Pool(msgd.url, { connections: 16, pipelining: 1 });
    const accepted: string[] = [];
    const refused: number[] = [];
    let stop = false;
    let n = 0;
    const load = Promise.all(
      Array.from({ length: 16 }, async () => {
        while (!stop) {
          const res = await pool.request({
            path: SMS,
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${prep.partner.token}` },
            body: JSON.stringify({ to: '+14155550123', text: `backup load ${n++}` }),
          });
          const body = (await res.body.json()) as { id?: string };
          if (res.statusCode === 200) accepted.push(body.id!);
          else refused.push(res.statusCode);
        }
      }),
    );
    await waitFor(() => accepted.length >= 300, 'some sends accepted', 30_000);

    // Everything that had its 200 before msgctl started must be in the backup.
    const before = [...accepted];
    const work = scratch();
    const file = join(work, 'under-load.db');
    const b = await runCli(['backup', file], { dataDir: prep.dir });
    const duringBackup = accepted.length - before.length;
    // A little more load after it, then stop.
    await waitFor(() => accepted.length >= before.length + duringBackup + 100, 'sends after the backup', 30_000);
    stop = true;
    await load;
    await pool.close();
    expect(b.code, b.stderr).toBe(0);
    expect(refused).toEqual([]);
    expect(duringBackup).toBeGreaterThan(0); // msgd kept accepting while the backup ran

    const restored = join(work, 'restored');
    const r = await runCli(['restore', file], { dataDir: restored });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/ok +ledger +.*every balance equals the sum of its entries/);

    const copy = await inspect({ ...prep, dir: restored });
    try {
      const ids = new Set((await messagesOf(copy.ctx, prep.partner.partnerId)).map((m) => m.id));
      expect(before.filter((id) => !ids.has(id))).toEqual([]);
      // Nothing the backup holds was invented: each is a message msgd answered 200 for.
      const answered = new Set(accepted);
      expect([...ids].filter((id) => !answered.has(id))).toEqual([]);
      await expectMoneyConsistent(copy.ctx, prep.partner.partnerId);
    } finally {
      await copy.close();
    }

    // The original stops; the restored copy serves the same partner with the same token.
    msgd.child.kill('SIGTERM');
    const configFile = join(work, 'restored.json');
    writeFileSync(configFile, '{}');
    const second = cleanup.child(await startMsgd({ ...prep, dir: restored, configFile, port: await freePort() }));
    const res = await send(second.url, SMS, { to: '+14155550123', text: 'after restore' }, prep.partner.token);
    expect(res.status).toBe(200);
    const old = await fetch(`${second.url}/v1/messages/${before[0]}`, {
      headers: { authorization: `Bearer ${prep.partner.token}` },
    });
    expect(old.status).toBe(200);
    expect(((await old.json()) as { id: string }).id).toBe(before[0]);
  }, 120_000);
});

describe('backups msgd takes itself', () => {
  it('on schedule, into backup.dir, keeping the newest backup.keep with their keys', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    const dir = scratch();
    const prep = cleanup.prep(
      await prepare(fake, { backup: { dir, schedule: '* * * * * *', keep: 2 } }, { balance: '10', price: '0.01' }),
    );
    const msgd = cleanup.child(await startMsgd(prep));
    const scheduled = () => readdirSync(dir).filter((f) => /^msgd-\d{8}T\d{6}Z\.db$/.test(f));
    // Every second a backup; after the third, the oldest is gone.
    await waitFor(
      () => scheduled().length === 2 && readdirSync(dir).some((f) => f.endsWith('.master-key')),
      'two backups',
      30_000,
    );
    const first = scheduled()[0];
    await waitFor(() => !existsSync(join(dir, first)), 'the oldest backup pruned', 30_000);
    // What a run leaves is looked at once msgd has stopped (it finishes the run under way): while
    // it runs, a backup a second is being copied, then renamed, given its key and pruned.
    msgd.child.kill('SIGTERM');
    await waitForExit(msgd.child, 30_000);
    expect(scheduled().length).toBe(2);
    expect(existsSync(join(dir, `${first}.master-key`))).toBe(false);
    for (const f of scheduled()) expect(existsSync(join(dir, `${f}.master-key`))).toBe(true);
    expect(readdirSync(dir).filter((f) => f.endsWith('.partial'))).toEqual([]);
    // A scheduled backup restores like any other.
    const target = join(scratch(), 'data');
    const r = await runCli(['restore', join(dir, scheduled()[0])], { dataDir: target });
    expect(r.code, r.stderr).toBe(0);
    rmSync(target, { recursive: true, force: true });
  }, 60_000);
});
