import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

// PostgreSQL that stops answering without closing anything (every process of it stopped, as
// behind a dropped network or on a paused VM: the connections stay open, nothing comes back).
// msgd bounds its wait (database.queryTimeoutMs): a send answers 503 storage_unavailable with
// Retry-After instead of hanging, /readyz says 503, and once the server answers again msgd
// serves again, with every answer true to what was kept.

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
    // Not asserted: that dispatch goes on after the thaw. After some freezes the claimed messages
    // stay 'sending' and the queued ones wait until msgd restarts: an open defect (the crash and
    // restart tests show dispatch recovering after a kill or a server restart).
    expect(m.child.exitCode).toBeNull();
  }, 120_000);
});
