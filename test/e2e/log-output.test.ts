import { closeSync, openSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startTwilioFake } from '../fakes/twilio.js';
import { waitFor, waitForExit } from '../helpers/wait.js';
import { cleanupAfterEach, prepare, startMsgd, type MsgdChild, type Prepared } from './child.js';
import { SMS, send } from '../helpers/gateways.js';

// msgd never hangs on its own output: with stdout on a full disk, past a file-size limit or
// into a pipe nobody reads, it keeps serving with logging paused, says so once on stderr,
// stops promptly on SIGTERM and releases the data directory.

const cleanup = cleanupAfterEach();

async function setup() {
  const fake = cleanup.fake(await startTwilioFake());
  return cleanup.prep(await prepare(fake, {}, { balance: '10', price: '0.01' }));
}

/** It answers, accepts a send, then stops on SIGTERM within a few seconds with exit code 0. */
async function servesAndStops(prep: Prepared, c: MsgdChild) {
  for (let i = 0; i < 20; i++) {
    const r = await send(c.url, SMS, { to: '+14155550123', text: `while logging fails ${i}` }, prep.partner.token);
    expect(r.status).toBe(200);
  }
  expect((await fetch(`${c.url}/healthz`)).status).toBe(200);
  c.child.kill('SIGTERM');
  const exit = await waitForExit(c.child, 10_000);
  expect(exit).toMatchObject({ code: 0, signal: null });
  expect(exit.ms).toBeLessThan(5_000);
  // The data directory is free again: another msgd starts on it at once.
  const next = cleanup.child(await startMsgd(prep));
  expect((await fetch(`${next.url}/healthz`)).status).toBe(200);
}

describe('a log output that cannot be written', () => {
  it('stdout on /dev/full (ENOSPC): msgd serves, says so on stderr, and stops on SIGTERM', async () => {
    const prep = await setup();
    const full = openSync('/dev/full', 'w');
    try {
      const c = cleanup.child(await startMsgd(prep, { stdout: full, env: { MSGD_LOG_LEVEL: 'debug' } }));
      await waitFor(() => c.output().includes('ENOSPC'), 'the notice on stderr', 5_000);
      expect(c.output()).toContain('the log output cannot be written (ENOSPC: no space left on the device)');
      await servesAndStops(prep, c);
      // One notice, not one per line.
      expect(c.output().match(/cannot be written/g)).toHaveLength(1);
    } finally {
      closeSync(full);
    }
  });

  it('stdout to a file at its size limit (EFBIG): msgd serves, and logs again once the limit is raised', async () => {
    const prep = await setup();
    const log = join(prep.dir, 'msgd.log');
    // The limit applies to every file msgd writes: the log starts just under it, the database
    // stays well below it.
    const limit = 16 * 1024 * 1024;
    writeFileSync(log, Buffer.alloc(limit - 64, 0x20));
    const fd = openSync(log, 'a');
    try {
      const c = cleanup.child(
        await startMsgd(prep, {
          stdout: fd,
          env: { MSGD_LOG_LEVEL: 'info' },
          wrap: ['prlimit', `--fsize=${limit}:unlimited`, '--'],
        }),
      );
      await waitFor(() => c.output().includes('EFBIG'), 'the notice on stderr', 5_000);
      expect(c.output()).toContain('the file-size limit is reached');
      expect(statSync(log).size).toBeLessThanOrEqual(limit);

      execFileSync('prlimit', ['--pid', String(c.child.pid), '--fsize=unlimited']);
      await waitFor(
        () => readFileSync(log, 'utf8').includes('log output works again after failing with EFBIG'),
        'msgd to log again',
        15_000,
        200,
      );
      await servesAndStops(prep, c);
      expect(readFileSync(log, 'utf8')).toContain('msgd stopped');
    } finally {
      closeSync(fd);
    }
  }, 30_000);

  it('stdout into a pipe whose reader went away (EPIPE): msgd serves and stops on SIGTERM', async () => {
    const prep = await setup();
    const c = cleanup.child(await startMsgd(prep, { env: { MSGD_LOG_LEVEL: 'debug' } }));
    c.child.stdout!.destroy();
    // Requests log at debug: the next lines meet the closed pipe.
    await waitFor(
      async () => {
        await fetch(`${c.url}/healthz`);
        return c.output().includes('EPIPE');
      },
      'the notice on stderr',
      5_000,
      100,
    );
    expect(c.output()).toContain('the reader of the output went away');
    await servesAndStops(prep, c);
  });
});
