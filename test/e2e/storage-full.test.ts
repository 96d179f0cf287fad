import { execFileSync } from 'node:child_process';
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
    const view = inspect(prep);
    try {
      const rows = messagesOf(view.ctx, prep.partner.partnerId);
      expect(rows.map((m) => m.id).sort()).toEqual([...accepted].sort());
      expectMoneyConsistent(view.ctx, prep.partner.partnerId);
    } finally {
      view.close();
    }

    // Space is back: msgd takes writes again without a restart.
    execFileSync('prlimit', ['--pid', String(c.child.pid), '--fsize=unlimited']);
    // Ready again once no write was refused for 10 s and the probe's write goes through.
    await waitFor(async () => (await fetch(`${c.url}/readyz`)).status === 200, '/readyz to be 200', 20_000, 200);
    const after = await send(c.url, SMS, { to: '+14155550123', text: 'after the disk was freed' }, prep.partner.token);
    expect(after.status).toBe(200);
    const again = inspect(prep);
    try {
      await waitStatus(again.ctx, after.body.id, 'sent', 20_000);
      for (const id of accepted) await waitStatus(again.ctx, id, 'sent', 30_000);
      expectMoneyConsistent(again.ctx, prep.partner.partnerId);
    } finally {
      again.close();
    }
  }, 90_000);
});
