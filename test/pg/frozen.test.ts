import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openStore } from '../../src/db/open-store.js';
import { JobQueue } from '../../src/queue/queue.js';
import { Worker } from '../../src/queue/worker.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { sleep, waitFor } from '../helpers/wait.js';
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

// PostgreSQL that stops answering without closing anything (every process of it stopped, as
// behind a dropped network or on a paused VM: the connections stay open, nothing comes back).
// msgd bounds its wait (database.queryTimeoutMs): a send answers 503 storage_unavailable with
// Retry-After instead of hanging, /readyz says 503, and once the server answers again msgd
// serves again, with every answer true to what was kept, and dispatch goes on by itself.

const QUERY_TIMEOUT_MS = 2_000;
const CONFIG = {
  database: { queryTimeoutMs: QUERY_TIMEOUT_MS },
  jobs: { leaseSeconds: 5, lifelineIntervalSeconds: 1, backoffBaseMs: 50, backoffCapMs: 1000 },
};
/** A request may wait out a statement and a new connection's connect timeout (5 s), not more. */
const BOUND_MS = 15_000;

const cluster = ownCluster();
const db = freshDatabase({ cluster });
const cleanup = cleanupAfterEach();
let twilio: TwilioFake;
beforeAll(async () => {
  twilio = await startTwilioFake();
});
afterAll(() => twilio?.close());

describe('PostgreSQL frozen under msgd', () => {
  it('sends are answered 503 with Retry-After within a bound, and msgd serves again once it answers', async () => {
    const prep = cleanup.add(await preparePg(db.url, twilio, CONFIG, { balance: '100', price: '0.01' }), (p) =>
      p.close(),
    );
    const { token, partnerId } = prep.partner;
    const m = cleanup.child(await startPgMsgd(prep));
    // The pool holds open connections when the server stops answering.
    const warm = await Promise.all([1, 2, 3, 4].map((i) => sendSms(m.url, token, `frozen ${i}`, `k${i}`)));
    for (const w of warm) expect(w.status).toBe(200);
    const outcomes = new Map<number, SendOutcome>(warm.map((w, i) => [i + 1, w]));

    cluster.freeze();
    try {
      const answers = await Promise.all(
        [5, 6, 7, 8, 9, 10, 11, 12].map(async (i) => {
          const o = await sendSms(m.url, token, `frozen ${i}`, `k${i}`, BOUND_MS).catch((e: Error) => e);
          return [i, o] as const;
        }),
      );
      for (const [i, o] of answers) {
        if (o instanceof Error) throw new Error(`send ${i} had no answer within ${BOUND_MS} ms: ${o.message}`);
        expect(o.status, JSON.stringify(o.body)).toBe(503);
        expect(o.body.error.code).toBe('storage_unavailable');
        expect(o.retryAfter).toBe('30');
        outcomes.set(i, o);
      }
      const ready = await fetch(`${m.url}/readyz`, { signal: AbortSignal.timeout(BOUND_MS) });
      expect(ready.status).toBe(503);
    } finally {
      cluster.thaw();
    }

    // Back by itself: a new send is accepted again.
    await waitFor(
      async () => (await sendSms(m.url, token, 'frozen 13', 'k13', BOUND_MS)).status === 200,
      'a send to be accepted again',
      30_000,
      200,
    );
    outcomes.set(13, await sendSms(m.url, token, 'frozen 13', 'k13', BOUND_MS));
    // What a 503 said was not kept is not there.
    for (const r of await messagesOf(prep.ctx, partnerId)) {
      const o = outcomes.get(Number(r.text.split(' ')[1]))!;
      if (o.status === 200) expect(r.id).toBe(o.body.id);
      else expect(o.body.error.message, `${r.text} was kept`).toMatch(/may have been kept/);
    }
    // The refused sends repeated with their keys: one message each, its 200 naming it.
    for (const [i, o] of outcomes) {
      if (o.status === 200) continue;
      const again = await sendSms(m.url, token, `frozen ${i}`, `k${i}`, BOUND_MS);
      expect(again.status, JSON.stringify(again.body)).toBe(200);
      outcomes.set(i, again);
    }
    const rows = await messagesOf(prep.ctx, partnerId);
    expect(rows.map((r) => r.id).sort()).toEqual([...outcomes.values()].map((o) => o.body.id).sort());
    expect(await strandedMessages(prep.ctx, partnerId)).toEqual([]);
    expect(await moneyProblems(prep.ctx, partnerId)).toEqual([]);
    await waitFor(
      async () => {
        const left = (await messagesOf(prep.ctx, partnerId)).filter((r) => r.status !== 'sent');
        // On a timeout the error names the messages still waiting and where they stand.
        if (left.length) throw new Error(left.map((r) => `${r.text}: ${r.status}`).join(', '));
        return true;
      },
      'every message to be sent',
      60_000,
      100,
    );
    // Each message went to the provider once.
    const calls = new Map<string, number>();
    for (const r of twilio.requests) calls.set(r.body.Body, (calls.get(r.body.Body) ?? 0) + 1);
    expect([...calls].filter(([, n]) => n > 1)).toEqual([]);
    expect(calls.size).toBe(outcomes.size);
    expect(m.child.exitCode).toBeNull();
  }, 120_000);

  it('the job loop goes on after a read the frozen server never answered, with a job finished meanwhile', async () => {
    const { queue, store } = await openQueue(1_000);
    const worker = cleanup.add(new Worker({ queue, concurrency: 4, leaseMs: 30_000, maxSleepMs: 200 }), (w) =>
      w.stop({ timeoutMs: 1_000 }),
    );
    const ran: number[] = [];
    worker.register('frozen.probe', (job) => {
      ran.push(job.id);
      // The first job freezes the server as soon as its claim has committed: the worker's read of
      // when to look next goes unanswered, and this job finishes while it waits for that answer.
      if (ran.length === 1) cluster.freeze();
      return { type: 'ok' };
    });
    const enqueue = () => store.transaction((tx) => queue.enqueue(tx, { kind: 'frozen.probe' }));
    const first = await enqueue();
    try {
      worker.start();
      await waitFor(() => ran.length > 0, 'the first job to run', 10_000, 10);
      await sleep(2_500); // past the query timeout
    } finally {
      cluster.thaw();
    }
    const second = await enqueue();
    await waitFor(
      async () => (await queue.get(first.id)) === null && (await queue.get(second.id)) === null,
      'both jobs to be done',
      15_000,
      50,
    );
    expect(ran).toEqual([first.id, second.id]);
  }, 60_000);

  it("a finished job whose result waits past its lease to commit is not taken back by the worker's own lifeline", async () => {
    const { queue, store } = await openQueue(15_000);
    const worker = cleanup.add(
      new Worker({ queue, concurrency: 4, leaseMs: 600, lifelineIntervalMs: 100, maxSleepMs: 200 }),
      (w) => w.stop({ timeoutMs: 1_000 }),
    );
    // The turn that would commit b's result stays open (a's write waits, as a statement on a
    // server that stopped answering would) for longer than b's lease.
    let holding = false;
    let letGo!: () => void;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const runs: string[] = [];
    worker.register('frozen.lease', async (job) => {
      const name = (job.payload as { name: string }).name;
      runs.push(name);
      if (name === 'a') {
        await worker.durably(async () => {
          holding = true;
          await held;
        });
      } else {
        await waitFor(() => holding, "a's write to hold the turn open", 10_000, 5);
      }
      return { type: 'ok' };
    });
    const ids = await store.transaction(async (tx) => [
      (await queue.enqueue(tx, { kind: 'frozen.lease', payload: { name: 'a' } })).id,
      (await queue.enqueue(tx, { kind: 'frozen.lease', payload: { name: 'b' } })).id,
    ]);
    worker.start();
    await waitFor(() => holding, "a's write to hold the turn open", 10_000, 5);
    await sleep(2_000); // b finished, its lease (600 ms) run out several lifelines ago
    letGo();
    await waitFor(
      async () => (await queue.get(ids[0]!)) === null && (await queue.get(ids[1]!)) === null,
      'both jobs to be done',
      15_000,
      50,
    );
    expect(runs.sort()).toEqual(['a', 'b']);
    expect(worker.counters).toMatchObject({ completed: 2, reclaimed: 0, lost: 0 });
  }, 60_000);
});

/** A job queue on the file's database, migrated, its statements given up on after `queryTimeoutMs`. */
async function openQueue(queryTimeoutMs: number) {
  const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex') };
  const cfg = loadConfig({ env });
  const opened = cleanup.add(await openStore({ ...cfg, database: { ...cfg.database, queryTimeoutMs } }, { env }), (o) =>
    o.close(),
  );
  return { queue: new JobQueue(opened.store), store: opened.store };
}
