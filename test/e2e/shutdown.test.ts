import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startTwilioFake } from '../fakes/twilio.js';
import { waitFor, waitForExit } from '../helpers/wait.js';
import { sql } from '../../src/db/sql.js';
import { cleanupAfterEach, inspect, prepare, startMsgd } from './child.js';
import { SMS, send } from '../helpers/gateways.js';
import { messagesOf } from '../helpers/rows.js';
import { expectMoneyConsistent } from '../helpers/expectations.js';

// SIGTERM: stop taking work, finish what is at the provider, hand the rest back, exit 0.

const cleanup = cleanupAfterEach();

describe('graceful shutdown', () => {
  it('SIGTERM with provider calls in flight: they finish, nothing is left running, exit 0; a restart sends the rest once', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    fake.latencyMs = 700;
    // Five calls at a time, so most messages are still waiting when the signal comes.
    const prep = cleanup.prep(
      await prepare(
        fake,
        { jobs: { concurrency: 5, leaseSeconds: 60 }, dispatch: { timeoutMs: 5000 } },
        { balance: '10', price: '0.01' },
      ),
    );
    const first = await startMsgd(prep);
    cleanup.child(first);

    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        send(first.url, SMS, { to: '+14155550123', text: `shutdown ${i}` }, prep.partner.token),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    await waitFor(() => fake.requests.length >= 5, 'provider calls in flight', 5_000);
    const inFlight = fake.requests.filter((r) => r.reply === undefined).map((r) => r.body.Body as string);
    expect(inFlight.length).toBeGreaterThan(0);

    first.child.kill('SIGTERM');
    const exit = await waitForExit(first.child, 8_000);
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.ms).toBeLessThan(5_000);

    const view = await inspect(prep);
    try {
      const running = await view.ctx.store.get<{ n: number }>(
        sql`SELECT COUNT(*) AS n FROM jobs WHERE state = 'running'`,
      );
      expect(Number(running!.n)).toBe(0);
      const rows = await messagesOf(view.ctx, prep.partner.partnerId);
      const byText = new Map(rows.map((m) => [JSON.parse(m.content).text as string, m]));
      // What was at the provider when the signal came was waited for and recorded.
      for (const t of inFlight) expect(byText.get(t)!.status).toBe('sent');
      const answered = fake.requests.filter((r) => r.reply?.status === 201).length;
      expect(rows.filter((m) => m.status === 'sent')).toHaveLength(answered);
      // The rest wait in the queue, claimable at once by the next start.
      const waiting = rows.filter((m) => m.status !== 'sent');
      expect(waiting.length).toBeGreaterThan(0);
      const jobs = await view.ctx.store.all<{ state: string; attempts: number }>(
        sql`SELECT state, attempts FROM jobs WHERE kind = 'message.dispatch'`,
      );
      expect(jobs).toHaveLength(waiting.length);
      expect(jobs.every((j) => j.state === 'available' || j.state === 'retry')).toBe(true);
      expect(rows.every((m) => m.dispatch_uncertain === 0)).toBe(true);
    } finally {
      await view.close();
    }

    const second = await startMsgd(prep);
    cleanup.child(second);
    const again = await inspect(prep);
    try {
      await waitFor(
        async () => (await messagesOf(again.ctx, prep.partner.partnerId)).every((m) => m.status === 'sent'),
        'all sent after restart',
        15_000,
        50,
      );
      // Exactly one provider call per message: nothing was cut off mid-call.
      expect(fake.requests.map((r) => r.body.Body).sort()).toEqual(
        Array.from({ length: 20 }, (_, i) => `shutdown ${i}`).sort(),
      );
      const rows = await messagesOf(again.ctx, prep.partner.partnerId);
      expect(rows.every((m) => m.dispatch_uncertain === 0)).toBe(true);
      await expectMoneyConsistent(again.ctx, prep.partner.partnerId);
    } finally {
      await again.close();
    }
    second.child.kill('SIGTERM');
    expect((await waitForExit(second.child, 8_000)).code).toBe(0);
  }, 60_000);

  it('a provider call slower than the usual 10 s stop wait is still waited for (within dispatch.timeoutMs)', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    fake.latencyMs = 10_500;
    const prep = cleanup.prep(
      await prepare(fake, { dispatch: { timeoutMs: 15_000 } }, { balance: '1', price: '0.01' }),
    );
    const c = await startMsgd(prep);
    cleanup.child(c);
    const r = await send(c.url, SMS, { to: '+14155550123', text: 'slow provider' }, prep.partner.token);
    expect(r.status).toBe(200);
    await waitFor(() => fake.requests.length === 1, 'the provider call', 5_000);
    c.child.kill('SIGTERM');
    const exit = await waitForExit(c.child, 20_000);
    expect(exit.code).toBe(0);
    const view = await inspect(prep);
    try {
      // Handing the job back mid-call would re-send it on the next start, unflagged.
      const [m] = await messagesOf(view.ctx, prep.partner.partnerId);
      expect(m.status).toBe('sent');
      const jobs = await view.ctx.store.get<{ n: number }>(
        sql`SELECT COUNT(*) AS n FROM jobs WHERE kind = 'message.dispatch'`,
      );
      expect(Number(jobs!.n)).toBe(0);
    } finally {
      await view.close();
    }
  }, 40_000);

  it('SIGTERM while msgd is still starting (listening, not yet working) stops it cleanly once started', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    const prep = cleanup.prep(await prepare(fake, {}, { balance: '1', price: '0.01' }));
    const bin = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'msgd');
    const child = spawn(process.execPath, [bin], {
      env: {
        PATH: process.env.PATH,
        MSGD_DATA_DIR: prep.dir,
        MSGD_PORT: String(prep.port),
        MSGD_DEMO: 'false',
        MSGD_CONFIG: prep.configFile,
        MSGD_LOG_LEVEL: 'info',
        ...prep.storeEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    cleanup.child({ child, url: '', output: () => out });
    // Fastify's own line comes when the port is open, before the job loop and msgd's line.
    await waitFor(() => out.includes('Server listening at'), "fastify's listening line", 20_000, 1);
    child.kill('SIGTERM');
    const exit = await waitForExit(child, 20_000);
    expect({ code: exit.code, signal: exit.signal }, out).toEqual({ code: 0, signal: null });
    expect(out).toContain('msgd stopped');
  });

  it('SIGTERM on an idle server exits 0 at once', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    const prep = cleanup.prep(await prepare(fake, {}, { balance: '1', price: '0.01' }));
    const c = await startMsgd(prep);
    cleanup.child(c);
    c.child.kill('SIGTERM');
    const exit = await waitForExit(c.child, 5_000);
    expect(exit.code).toBe(0);
    expect(exit.ms).toBeLessThan(2_000);
  });
});
