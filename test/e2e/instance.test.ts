import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { getMessageRow } from '../../src/core/messages.js';
import { openDataDir } from '../../src/db/datadir.js';
import { DISPATCH_JOB } from '../../src/jobs/dispatch.js';
import { JobQueue } from '../../src/queue/queue.js';
import { connect, setupPartner, startTestServer, storeOutboundSms, tmpDir } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { coreCtx } from '../helpers/ctx.js';

// One msgd per data directory, and what that allows at start: jobs a dead msgd left running
// are its orphans, taken back at once instead of when their lease would have run out.

const dir = tmpDir('msgd-instance-');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('one msgd per data directory', () => {
  it('takes back at start the jobs a crashed msgd left running: resent at once, flagged a possible duplicate if their request may have left', async () => {
    // What kill -9 mid-call leaves behind: a dispatch job running under a 10-minute lease.
    const dd = openDataDir(dir, { create: true, env: {} });
    const ctx = coreCtx(dd, { dataDir: dir });
    const p = await setupPartner(ctx, { balance: '10' });
    const { channel } = await connect(
      ctx,
      p.partnerId,
      { kind: 'sandbox', settings: { delivery_delay_ms: 600_000 } },
      'sms',
      '+15550001111',
    );
    const m = storeOutboundSms(ctx, p.partnerId, channel, { text: 'in flight when msgd died' });
    // And one it had claimed that was still waiting for a free connection: never sent.
    const waiting = storeOutboundSms(ctx, p.partnerId, channel, { text: 'waiting when msgd died' });
    const queue = new JobQueue(dd.db);
    queue.enqueue({ kind: DISPATCH_JOB, payload: { message_id: m.id } });
    queue.enqueue({ kind: DISPATCH_JOB, payload: { message_id: waiting.id } });
    expect(await queue.claim('dead-msgd', 10, Date.now(), { leaseMs: 600_000 })).toHaveLength(2);
    dd.db.sqlite.prepare(`UPDATE messages SET status = 'sending' WHERE id IN (?, ?)`).run(m.id, waiting.id);
    // Marked before its request could be written.
    dd.db.sqlite.prepare(`UPDATE messages SET dispatch_in_flight = 1 WHERE id = ?`).run(m.id);
    dd.close();

    const s = await startTestServer({}, { dataDir: dir });
    try {
      const sent = await waitFor(
        () => {
          const row = getMessageRow(s.ctx, m.id);
          return row?.status === 'sent' ? row : undefined;
        },
        'the orphaned message to be sent',
        5_000,
      );
      expect(sent.dispatch_uncertain).toBe(1);
      expect(sent.dispatch_in_flight).toBe(0);
      const other = await waitFor(
        () => {
          const row = getMessageRow(s.ctx, waiting.id);
          return row?.status === 'sent' ? row : undefined;
        },
        'the message that was waiting to be sent',
        5_000,
      );
      expect(other.dispatch_uncertain).toBe(0);
      expect(s.logs.join('')).toContain(
        'jobs left running by a msgd that stopped without finishing them were taken back',
      );

      // A second msgd on the same directory is refused, and the first keeps running.
      await expect(startTestServer({}, { dataDir: dir })).rejects.toThrow(
        /another msgd is already running on .*: run one msgd per data directory/,
      );
      expect((await fetch(`${s.url}/healthz`)).status).toBeLessThan(500);
    } finally {
      await s.stop();
    }
    // Stopped cleanly, the directory is free again.
    const again = await startTestServer({}, { dataDir: dir });
    await again.stop();
  });
});
