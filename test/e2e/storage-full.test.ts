import { execFileSync } from 'node:child_process';
import Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startTwilioFake } from '../fakes/twilio.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupAfterEach, inspect, prepare, startMsgd } from './child.js';
import { expectMoneyConsistent } from '../helpers/expectations.js';
import { SMS, send } from '../helpers/gateways.js';
import { messagesOf, waitStatus } from '../helpers/rows.js';

// A disk that refuses writes: msgd's files are held under a file-size limit (RLIMIT_FSIZE) a
// little above their size at start. Sends are then refused with 503 storage_unavailable and
// Retry-After, nothing half-written, /readyz says so; once the limit is lifted (space is
// back) msgd takes sends again by itself and dispatches them.

const cleanup = cleanupAfterEach();

const size = (f: string) => {
  try {
    return statSync(f).size;
  } catch {
    return 0;
  }
};

describe('storage full', () => {
  it('refuses sends with 503 storage_unavailable, keeps nothing of them, and recovers by itself', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    const prep = cleanup.prep(await prepare(fake, {}, { balance: '1000', price: '0.01' }));
    const db = join(prep.dir, 'msgd.db');
    const limit = Math.max(size(db), size(`${db}-wal`)) + 256 * 1024;
    const c = cleanup.child(
      await startMsgd(prep, {
        wrap: ['prlimit', `--fsize=${limit}:unlimited`, '--'],
        env: { MSGD_LOG_LEVEL: 'error' },
      }),
    );
    expect((await fetch(`${c.url}/readyz`)).status).toBe(200);

    const accepted: string[] = [];
    let refused: Awaited<ReturnType<typeof send>> | undefined;
    const text = 'x'.repeat(1500);
    for (let i = 0; i < 2000 && !refused; i++) {
      const r = await send(c.url, SMS, { to: '+14155550123', text: `${i} ${text}` }, prep.partner.token);
      if (r.status === 200) accepted.push(r.body.id);
      else refused = r;
    }
    expect(refused, 'a send refused once the files reached the limit').toBeDefined();
    expect(refused!.status).toBe(503);
    expect(refused!.body.error.code).toBe('storage_unavailable');
    expect(refused!.headers.get('retry-after')).toBe('30');
    expect(accepted.length).toBeGreaterThan(0);

    const ready = await fetch(`${c.url}/readyz`);
    expect(ready.status).toBe(503);
    const body = await ready.json();
    expect(body.error.code).toBe('not_ready');
    expect(body.error.details.map((d: { field: string }) => d.field)).toContain('database');
    expect((await fetch(`${c.url}/healthz`)).status).toBe(200);

    // Every 200 is kept with its debit; nothing of a refused send is.
    const view = await inspect(prep);
    try {
      const rows = await messagesOf(view.ctx, prep.partner.partnerId);
      expect(rows.map((m) => m.id).sort()).toEqual([...accepted].sort());
      await expectMoneyConsistent(view.ctx, prep.partner.partnerId);
    } finally {
      await view.close();
    }

    // Space is back: msgd takes writes again without a restart.
    execFileSync('prlimit', ['--pid', String(c.child.pid), '--fsize=unlimited']);
    // Ready again once no write was refused for 10 s and the probe's write goes through.
    await waitFor(async () => (await fetch(`${c.url}/readyz`)).status === 200, '/readyz to be 200', 20_000, 200);
    const after = await send(c.url, SMS, { to: '+14155550123', text: 'after the disk was freed' }, prep.partner.token);
    expect(after.status).toBe(200);
    const again = await inspect(prep);
    try {
      await waitStatus(again.ctx, after.body.id, 'sent', 20_000);
      for (const id of accepted) await waitStatus(again.ctx, id, 'sent', 30_000);
      await expectMoneyConsistent(again.ctx, prep.partner.partnerId);
    } finally {
      await again.close();
    }
  }, 90_000);

  it("sums up the job loop's failing batches in the log: the first with its stack, one a spell, the recovery", async () => {
    const fake = cleanup.fake(await startTwilioFake());
    const prep = cleanup.prep(await prepare(fake, {}, { balance: '1000', price: '0.01' }));
    const db = join(prep.dir, 'msgd.db');
    const limit = Math.max(size(db), size(`${db}-wal`)) + 256 * 1024;
    const c = cleanup.child(
      await startMsgd(prep, {
        wrap: ['prlimit', `--fsize=${limit}:unlimited`, '--'],
        env: { MSGD_LOG_LEVEL: 'info' },
      }),
    );
    const logLines = () =>
      c
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, any>);
    const failed = () => logLines().filter((l) => l.msg === 'job batch transaction failed; retrying');

    // A reader holding its snapshot keeps the WAL from starting over, as a disk that is really
    // full has no room a checkpoint could free: once the limit is reached every write fails.
    const reader = new Database(db, { readonly: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM messages').get();
    // Fill the disk while the job loop dispatches: its settle transactions fail from then on.
    // Slow answers keep sends in flight, so their settles are still to write when the disk is full.
    fake.latencyMs = 200;
    const text = 'x'.repeat(1500);
    for (let i = 0; i < 2000; i++) {
      const r = await send(c.url, SMS, { to: '+14155550123', text: `${i} ${text}` }, prep.partner.token);
      if (r.status !== 200) break;
    }
    const first = await waitFor(() => failed()[0], 'the first failed batch in the log', 20_000, 50);
    expect(first.level).toBe(50);
    expect(first.err.stack).toMatch(/\n\s+at /);
    expect(first.code).toMatch(/^SQLITE_/);

    // The batch is retried several times a second; the log says so once a spell (15 s).
    const summary = await waitFor(
      () => logLines().find((l) => /^\d+ more job batch transactions failed in the last \d+ s$/.test(l.msg ?? '')),
      'a summary line',
      30_000,
      100,
    );
    expect(summary.level).toBe(50);
    expect(summary.failures).toBeGreaterThan(10);
    expect(summary.codes[first.code]).toBeGreaterThan(0);
    expect(failed()).toHaveLength(1);

    reader.exec('COMMIT');
    reader.close();
    execFileSync('prlimit', ['--pid', String(c.child.pid), '--fsize=unlimited']);
    const recovered = await waitFor(
      () => logLines().find((l) => /^job batch transactions succeed again after \d+ failures/.test(l.msg ?? '')),
      'the recovery line',
      20_000,
      100,
    );
    expect(recovered.level).toBe(30);
    expect(recovered.failures).toBeGreaterThan(summary.failures);
    const batchLines = logLines().filter((l) => /job batch transaction/.test(l.msg ?? ''));
    expect(batchLines.length, JSON.stringify(batchLines.map((l) => l.msg))).toBeLessThanOrEqual(4);
  }, 90_000);
});
