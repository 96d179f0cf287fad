import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { parseMoney } from '../../src/lib/money.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { SMS } from '../helpers/gateways.js';
import { waitFor, waitForExit } from '../helpers/wait.js';
import { migratedDatabase } from './helpers.js';
import { cleanupAfterEach, messagesOf, moneyProblems, preparePg, startPgMsgd, strandedMessages } from './msgd-child.js';

// kill -9 of msgd on PostgreSQL in the middle of a send and dispatch load, then msgd started
// again: nothing that got a 200 is lost, no money moves without its message, every message
// reaches the provider, and one whose provider call was in flight at the kill is flagged a
// possible duplicate when it goes again. On PostgreSQL no lock says the killed msgd is gone:
// its jobs come back when their lease (on the database's clock) has run out.

const CONFIG = {
  jobs: { leaseSeconds: 5, lifelineIntervalSeconds: 1, backoffBaseMs: 50, backoffCapMs: 1000, concurrency: 64 },
  // Longer than any call takes here, loaded as the machine may be: a call timed out is flagged too.
  dispatch: { timeoutMs: 30_000 },
};

const db = migratedDatabase();
const cleanup = cleanupAfterEach();
let twilio: TwilioFake;
beforeAll(async () => {
  twilio = await startTwilioFake();
});
afterAll(() => twilio?.close());

describe('kill -9 of msgd on PostgreSQL under load, then a restart', () => {
  it('every 200 survives once with one debit, each message is sent (twice only if flagged)', async () => {
    twilio.latencyMs = 300;
    const price = '0.01';
    const prep = cleanup.add(await preparePg(db.url, twilio, CONFIG, { balance: '1000', price }), (p) => p.close());
    const { token, partnerId } = prep.partner;
    const first = cleanup.child(await startPgMsgd(prep));

    // 32 clients sending back to back until the process dies under them.
    const pool = new Pool(first.url, { connections: 32, pipelining: 1 });
    const accepted = new Set<string>();
    const statuses: Record<number, number> = {};
    let sent = 0;
    let failedRequests = 0;
    const load = Promise.all(
      Array.from({ length: 32 }, async () => {
        while (sent < 5000) {
          const i = sent++;
          try {
            const res = await pool.request({
              path: SMS,
              method: 'POST',
              headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
              body: JSON.stringify({ to: '+14155550123', text: `crash ${i}` }),
            });
            const body = (await res.body.json()) as { id: string };
            statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
            if (res.statusCode === 200) accepted.add(body.id);
          } catch {
            failedRequests++;
            return;
          }
        }
      }),
    );

    // Kill once some messages are settled, others are at the provider (the fake holds each
    // call 300 ms) and sends are still arriving.
    await waitFor(
      () =>
        twilio.requests.filter((r) => r.reply !== undefined).length >= 20 &&
        accepted.size >= 100 &&
        twilio.requests.some((r) => r.reply === undefined),
      'load to be under way',
      20_000,
    );
    const inFlightAtKill = twilio.requests.filter((r) => r.reply === undefined).length;
    first.child.kill('SIGKILL');
    expect((await waitForExit(first.child)).signal).toBe('SIGKILL');
    await load;
    await pool.destroy();
    expect(inFlightAtKill).toBeGreaterThan(0);
    // Everything answered was a 200 (funds are ample); requests open at the kill died with it.
    expect(Object.keys(statuses)).toEqual(['200']);
    expect(failedRequests).toBeGreaterThan(0);

    // Right after the kill: every 200 is in the database with its debit and its job, and no
    // debit lacks its message.
    let rows = await messagesOf(prep.ctx, partnerId);
    const ids = new Set(rows.map((m) => m.id));
    for (const id of accepted) expect(ids.has(id), `accepted ${id} is missing after the kill`).toBe(true);
    expect(await moneyProblems(prep.ctx, partnerId)).toEqual([]);
    expect(await strandedMessages(prep.ctx, partnerId)).toEqual([]);
    expect(rows.some((m) => m.status === 'sending')).toBe(true);
    // The messages whose provider request may have left msgd: marked before the call.
    const marked = new Set(rows.filter((m) => m.dispatch_in_flight === 1).map((m) => m.text));
    for (const r of twilio.requests.filter((q) => q.reply === undefined))
      expect(marked.has(r.body.Body), `${r.body.Body} was at the provider unmarked`).toBe(true);

    twilio.latencyMs = 0;
    const second = cleanup.child(await startPgMsgd(prep));
    // The killed process's jobs come back once their lease (5 s) has run out.
    await waitFor(
      async () => (await messagesOf(prep.ctx, partnerId)).every((m) => m.status === 'sent'),
      'every message to be sent after the restart',
      30_000,
      100,
    );
    rows = await messagesOf(prep.ctx, partnerId);
    for (const id of accepted) expect(rows.some((m) => m.id === id)).toBe(true);

    // Provider calls per message: at least one; more than one only when flagged uncertain.
    const calls = new Map<string, number>();
    for (const r of twilio.requests) calls.set(r.body.Body, (calls.get(r.body.Body) ?? 0) + 1);
    const flagged = rows.filter((m) => m.dispatch_uncertain === 1);
    for (const m of rows) {
      const n = calls.get(m.text) ?? 0;
      expect(n, `provider calls for ${m.id}`).toBeGreaterThanOrEqual(1);
      if (n > 1) expect(m.dispatch_uncertain, `${m.id} went ${n} times unflagged`).toBe(1);
    }
    // Nothing reaches the provider that msgd did not accept.
    const texts = new Set(rows.map((m) => m.text));
    for (const t of calls.keys()) expect(texts.has(t)).toBe(true);
    // The calls that may have left at the kill were flagged, and only they are.
    expect(flagged.length).toBeGreaterThanOrEqual(1);
    expect(flagged.map((m) => m.text).sort()).toEqual([...marked].sort());
    expect(rows.every((m) => m.dispatch_in_flight === 0)).toBe(true);

    expect(await moneyProblems(prep.ctx, partnerId)).toEqual([]);
    expect(rows.filter((m) => m.refunded)).toHaveLength(0);
    const balance = await prep.ctx.store.get<{ b: string }>(
      sql`SELECT CAST(balance AS TEXT) AS b FROM partners WHERE id = ${partnerId}`,
    );
    expect(BigInt(balance!.b)).toBe(BigInt(parseMoney('1000') - rows.length * parseMoney(price)));
    const jobs = await prep.ctx.store.get<{ n: number }>(
      sql`SELECT CAST(count(*) AS BIGINT) AS n FROM jobs WHERE kind = 'message.dispatch'`,
    );
    expect(Number(jobs!.n)).toBe(0);

    second.child.kill('SIGTERM');
    expect((await waitForExit(second.child, 15_000)).code).toBe(0);
  }, 90_000);
});
