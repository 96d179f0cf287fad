import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { waitFor } from '../helpers/wait.js';
import { freshDatabase, ownCluster } from './helpers.js';
import {
  cleanupAfterEach,
  messagesOf,
  moneyProblems,
  preparePg,
  type SendOutcome,
  sendSms,
  startPgMsgd,
  strandedMessages,
} from './msgd-child.js';

// PostgreSQL restarted under send load (`pg_ctl restart -m immediate`: every connection cut
// at once, as in a crash): msgd, a process of its own, answers the sends that meet the gap
// 503 storage_unavailable with Retry-After (never a 500, never a request left hanging),
// /readyz says 503, and msgd serves again by itself. Afterwards every 200 is there exactly
// once with one debit, the ledger balances, nothing is half-written, and a send answered
// "may have been kept" gets its answer again with the same Idempotency-Key.

const CONFIG = {
  jobs: { leaseSeconds: 5, lifelineIntervalSeconds: 1, backoffBaseMs: 50, backoffCapMs: 1000 },
  dispatch: { timeoutMs: 5000 },
};
/** Longer than any request may take: the pool's connect timeout (5 s) and then some. */
const BOUND_MS = 20_000;

const cluster = ownCluster();
const db = freshDatabase({ cluster });
const cleanup = cleanupAfterEach();
let twilio: TwilioFake;
beforeAll(async () => {
  twilio = await startTwilioFake();
});
afterAll(() => twilio?.close());

describe('PostgreSQL restarted under send load', () => {
  it('503 with Retry-After in the gap, /readyz 503, msgd back by itself, every 200 kept once', async () => {
    const prep = cleanup.add(await preparePg(db.url, twilio, CONFIG, { balance: '1000', price: '0.01' }), (p) =>
      p.close(),
    );
    const m = cleanup.child(await startPgMsgd(prep));
    const { token, partnerId } = prep.partner;

    // 16 clients send back to back, each send with a key and a text of its own, until told to stop.
    const outcomes = new Map<string, SendOutcome>();
    const thrown: string[] = [];
    let n = 0;
    let stop = false;
    const send = async (i: number) => {
      try {
        outcomes.set(`k${i}`, await sendSms(m.url, token, `restart ${i}`, `k${i}`, BOUND_MS));
      } catch (e) {
        thrown.push(`send ${i}: ${String(e)}`);
      }
    };
    const load = Promise.all(
      Array.from({ length: 16 }, async () => {
        while (!stop) await send(n++);
      }),
    );
    const ok = () => [...outcomes.values()].filter((o) => o.status === 200).length;
    await waitFor(() => ok() >= 100, '100 sends accepted before the restart', 20_000);

    // /readyz watched through the restart, as a load balancer would.
    const ready: number[] = [];
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const r = await fetch(`${m.url}/readyz`, { signal: AbortSignal.timeout(BOUND_MS) });
        ready.push(r.status);
        await r.arrayBuffer();
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();

    const before = ok();
    await cluster.restart();
    // msgd takes sends again without being restarted: 50 more accepted after the server is back.
    await waitFor(() => ok() >= before + 50, 'sends accepted again after the restart', 30_000, 50);
    stop = true;
    await load;

    expect(thrown).toEqual([]);
    const all = [...outcomes.values()];
    const refused = all.filter((o) => o.status !== 200);
    // The gap was met, and met only with 503 storage_unavailable and a Retry-After.
    expect(refused.length).toBeGreaterThan(0);
    for (const o of refused) {
      expect(o.status, JSON.stringify(o.body)).toBe(503);
      expect(o.body.error.code).toBe('storage_unavailable');
      expect(o.retryAfter).toBe('30');
    }
    for (const o of all) expect(o.ms).toBeLessThan(BOUND_MS);
    expect(m.child.exitCode).toBeNull();

    // Nothing half-written: what a 503 said was not kept is not there; every message is a send
    // answered 200 (or 503 "may have been kept"), with its debit and its job or its outcome.
    const byText = new Map([...outcomes].map(([key, o]) => [`restart ${key.slice(1)}`, o]));
    for (const r of await messagesOf(prep.ctx, partnerId)) {
      const o = byText.get(r.text)!;
      if (o.status === 200) expect(r.id).toBe(o.body.id);
      else expect(o.body.error.message, `${r.text} was kept`).toMatch(/may have been kept/);
    }
    expect(await strandedMessages(prep.ctx, partnerId)).toEqual([]);
    expect(await moneyProblems(prep.ctx, partnerId)).toEqual([]);

    // A client that got a 503 repeats the send with the same key: one that was kept gets its
    // first answer, the others are accepted now.
    for (const [key] of [...outcomes].filter(([, x]) => x.status !== 200)) {
      const again = await sendSms(m.url, token, `restart ${key.slice(1)}`, key, BOUND_MS);
      expect(again.status, JSON.stringify(again.body)).toBe(200);
      outcomes.set(key, again);
    }
    // Every send is one message, and its 200 names it.
    const texts = new Map([...outcomes].map(([key, o]) => [`restart ${key.slice(1)}`, o.body.id as string]));
    const rows = await messagesOf(prep.ctx, partnerId);
    expect(rows.length).toBe(outcomes.size);
    for (const r of rows) expect(r.id, `${r.text} is not the message its 200 named`).toBe(texts.get(r.text));
    expect(await strandedMessages(prep.ctx, partnerId)).toEqual([]);
    expect(await moneyProblems(prep.ctx, partnerId)).toEqual([]);
    // Dispatch went on too: every message reaches the provider.
    await waitFor(
      async () => (await messagesOf(prep.ctx, partnerId)).every((r) => r.status === 'sent'),
      'every message to be sent',
      30_000,
      100,
    );
    expect(await moneyProblems(prep.ctx, partnerId)).toEqual([]);
    // A provider call whose settling met the gap is made again only flagged as a possible duplicate.
    const calls = new Map<string, number>();
    for (const r of twilio.requests) calls.set(r.body.Body, (calls.get(r.body.Body) ?? 0) + 1);
    for (const r of await messagesOf(prep.ctx, partnerId)) {
      const sent = calls.get(r.text) ?? 0;
      expect(sent, `provider calls for ${r.text}`).toBeGreaterThanOrEqual(1);
      if (sent > 1) expect(r.dispatch_uncertain, `${r.text} went ${sent} times unflagged`).toBe(1);
    }
    // /readyz said 503 in the gap, and says 200 again (10 s after the last refused write).
    await waitFor(() => ready.at(-1) === 200, '/readyz to answer 200 again', 30_000, 50);
    watching = false;
    await watch;
    expect(ready).toContain(503);
    const doctor = await runCli(['--json', 'doctor'], {
      env: { MSGD_DATABASE_URL: prep.url, MSGD_MASTER_KEY: prep.key },
    });
    const report = JSON.parse(doctor.stdout) as { checks: { name: string; status: string; message: string }[] };
    expect(report.checks.filter((c) => c.status === 'fail')).toEqual([]);
    expect(report.checks.find((c) => c.name === 'ledger')?.status).toBe('ok');
    expect(m.output()).not.toMatch(/"level":(50|60).*unhandled error/);
  }, 120_000);
});
