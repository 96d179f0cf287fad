import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/core/ledger.js';
import { sql } from '../../src/db/sql.js';
import { parseMoney } from '../../src/lib/money.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { twilioGateway } from '../helpers/gateways.js';
import { setupPartner } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { migratedDatabase, withClient } from '../pg/helpers.js';
import { type MsgdCluster, startMsgdCluster } from './harness.js';

// Three msgd on one PostgreSQL behind a round-robin proxy: what one process guarantees holds
// for the cluster. Concurrent sends spread over the instances never spend more than the
// partner has (the partner's row is locked in every accept transaction, whichever instance runs
// it); an Idempotency-Key raced on three instances makes one message and one debit; a retry
// while the first is uncommitted on another instance waits for it and gets its answer; a
// token's rate limit is the cluster's, not each instance's; a change made by msgctl is seen by
// every instance on its next request.

const db = migratedDatabase();
let fake: TwilioFake;
let c: MsgdCluster;

beforeAll(async () => {
  fake = await startTwilioFake();
  // The tests that hold a send uncommitted keep the statements behind it waiting for as long as
  // a loaded machine takes to go through their steps: longer than msgd's default bound.
  c = await startMsgdCluster({ databaseUrl: db.url, config: { database: { queryTimeoutMs: 120_000 } } });
}, 180_000);
afterAll(async () => {
  await c?.close();
  await fake?.close();
});

interface Answer {
  status: number;
  body: any;
  replayed: boolean;
  instance: string | null;
}

// The partners' side: a client with as many connections as a busy partner's pool would open;
// the requests beyond them wait for one, all in flight at once.
const client = new Agent({ connections: 64 });
afterAll(() => client.close());

async function post(base: string, path: string, token: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await request(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    dispatcher: client,
  });
  const header = (name: string) => {
    const v = r.headers[name];
    return typeof v === 'string' ? v : null;
  };
  return {
    status: r.statusCode,
    body: (await r.body.json()) as any,
    replayed: header('idempotent-replayed') === 'true',
    instance: header('x-cluster-instance'),
  } satisfies Answer;
}

async function partnerWithSms(opts: { balance: string; credit?: string; price: string; rateLimitPerMinute?: number }) {
  const p = await setupPartner(c.ctx, {
    balance: opts.balance,
    credit: opts.credit,
    prices: { sms: opts.price },
    rateLimitPerMinute: opts.rateLimitPerMinute ?? 1_000_000,
  });
  await twilioGateway(c.ctx, p.partnerId, fake);
  return p;
}

/** Messages, debits and the balance of a partner, read from the database. */
async function moneyOf(partnerId: string) {
  const s = c.ctx.store;
  const messages = await s.all<{ id: string }>(sql`SELECT id FROM messages WHERE partner_id = ${partnerId}`);
  const debits = await s.all<{ message_id: string; amount: number }>(
    sql`SELECT message_id, amount FROM ledger_entries WHERE partner_id = ${partnerId} AND kind = 'debit'`,
  );
  const partner = await s.get<{ balance: number }>(sql`SELECT balance FROM partners WHERE id = ${partnerId}`);
  return { messages, debits, balance: partner!.balance };
}

// Three msgd, PostgreSQL and the test share two cores: the thousand sends take a few seconds on
// a quiet machine and several times that on a busy one.
describe('sends spread over three instances', { timeout: 120_000 }, () => {
  it('1000 concurrent sends on funds for exactly 100, with a credit limit: exactly 100 accepted', async () => {
    // 0.70 of balance and 0.30 of credit at 0.01 a message: exactly 100 messages.
    const p = await partnerWithSms({ balance: '0.70', credit: '0.30', price: '0.01' });
    const answers = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        post(c.url, '/api/send-sms.php', p.token, { to: '+14155550123', text: `race ${i}` }),
      ),
    );
    expect(c.proxy.errors).toEqual([]);
    const byStatus = new Map<number, number>();
    for (const a of answers) byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1);
    expect(Object.fromEntries(byStatus)).toEqual({ 200: 100, 402: 900 });
    for (const a of answers.filter((x) => x.status === 402)) expect(a.body.error.code).toBe('insufficient_balance');
    // The proxy spread them: every instance answered a third of them, and accepted some.
    const perInstance = [0, 1, 2].map((i) => answers.filter((a) => a.instance === String(i)));
    for (const mine of perInstance) expect(mine.length).toBeGreaterThanOrEqual(333);
    expect(perInstance.filter((mine) => mine.some((a) => a.status === 200)).length).toBeGreaterThanOrEqual(2);

    const m = await moneyOf(p.partnerId);
    expect(m.messages).toHaveLength(100);
    expect(m.debits).toHaveLength(100);
    expect(new Set(m.debits.map((d) => d.message_id)).size).toBe(100);
    expect(m.debits.every((d) => d.amount === -parseMoney('0.01'))).toBe(true);
    expect(m.balance).toBe(-parseMoney('0.30'));
    const accepted = answers.filter((a) => a.status === 200).map((a) => a.body.id);
    expect(accepted.sort()).toEqual(m.messages.map((x) => x.id).sort());
    const ledger = await verifyLedger(c.ctx);
    expect(ledger.mismatches).toEqual([]);
  });

  it('one Idempotency-Key raced on three instances: one message, one debit, the same answer thrice', async () => {
    const p = await partnerWithSms({ balance: '10.00', price: '0.01' });
    const keys = Array.from({ length: 20 }, (_, k) => `race-key-${k}`);
    const rounds = await Promise.all(
      keys.map((key) =>
        Promise.all(
          c.instances.map((inst) =>
            post(inst.url, '/api/send-sms.php', p.token, { to: '+14155550123', text: key }, { 'idempotency-key': key }),
          ),
        ),
      ),
    );
    for (const answers of rounds) {
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
      expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1);
      expect(answers.filter((a) => a.replayed)).toHaveLength(2);
    }
    const m = await moneyOf(p.partnerId);
    expect(m.messages.map((x) => x.id).sort()).toEqual(rounds.map((a) => a[0].body.id).sort());
    expect(m.debits).toHaveLength(keys.length);
    expect(m.balance).toBe(parseMoney('10.00') - keys.length * parseMoney('0.01'));
  });
});

// The first send of a key held uncommitted inside PostgreSQL: a trigger on idempotency_keys
// waits on an advisory lock this test holds, so instance 0's accept transaction stops after
// writing its debit and message and before its COMMIT, holding the partner's row lock.
const HOLD = 7_340_001;

async function holdIdempotencyInserts<T>(fn: (released: () => Promise<void>) => Promise<T>): Promise<T> {
  await withClient(db.url, (a) =>
    a.query(`
      CREATE FUNCTION test_hold_idempotency() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_advisory_xact_lock(${HOLD}); RETURN NEW; END $$;
      CREATE TRIGGER test_hold_idempotency BEFORE INSERT ON idempotency_keys
        FOR EACH ROW EXECUTE FUNCTION test_hold_idempotency();`),
  );
  try {
    return await withClient(db.url, async (holder) => {
      await holder.query('SELECT pg_advisory_lock($1)', [HOLD]);
      return fn(async () => {
        await holder.query('SELECT pg_advisory_unlock($1)', [HOLD]);
      });
    });
  } finally {
    await withClient(db.url, (a) =>
      a.query('DROP TRIGGER test_hold_idempotency ON idempotency_keys; DROP FUNCTION test_hold_idempotency();'),
    );
  }
}

/** Backends of msgd waiting on a lock of the given kind (advisory; transactionid/tuple: a row lock). */
async function waiting(kinds: string[]): Promise<number> {
  return withClient(db.url, async (a) => {
    const r = await a.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'msgd'
          AND wait_event_type = 'Lock' AND wait_event = ANY($1::text[])`,
      [kinds],
    );
    return Number(r.rows[0].n);
  });
}

describe('a retry while the first send of its key is uncommitted on another instance', { timeout: 90_000 }, () => {
  it('waits for the first to commit and answers with its answer', async () => {
    const p = await partnerWithSms({ balance: '1.00', price: '0.01' });
    const body = { to: '+14155550123', text: 'held' };
    const key = { 'idempotency-key': 'held-1' };
    const settled: string[] = [];
    await holdIdempotencyInserts(async (release) => {
      const first = post(c.instances[0].url, '/api/send-sms.php', p.token, body, key).finally(() =>
        settled.push('first'),
      );
      await waitFor(
        async () => (await waiting(['advisory'])) === 1,
        'the first send to stop before its COMMIT',
        20_000,
      );
      const retry = post(c.instances[1].url, '/api/send-sms.php', p.token, body, key).finally(() =>
        settled.push('retry'),
      );
      // The retry's accept waits on the partner's row, which the first holds.
      await waitFor(
        async () => (await waiting(['transactionid', 'tuple'])) === 1,
        "the retry to wait on the partner's row",
        20_000,
      );
      expect(settled).toEqual([]);
      await release();
      const [a, b] = await Promise.all([first, retry]);
      expect([a.status, a.replayed]).toEqual([200, false]);
      expect([b.status, b.replayed]).toEqual([200, true]);
      expect(b.body).toEqual(a.body);
    });
    const m = await moneyOf(p.partnerId);
    expect(m.messages).toHaveLength(1);
    expect(m.debits).toHaveLength(1);
  });

  it('is accepted as new when the instance holding the first dies before its COMMIT', async () => {
    const p = await partnerWithSms({ balance: '1.00', price: '0.01' });
    const body = { to: '+14155550123', text: 'held then killed' };
    const key = { 'idempotency-key': 'held-2' };
    await holdIdempotencyInserts(async (release) => {
      const first = post(c.instances[0].url, '/api/send-sms.php', p.token, body, key).then(
        (a) => a,
        (e: Error) => e,
      );
      await waitFor(
        async () => (await waiting(['advisory'])) === 1,
        'the first send to stop before its COMMIT',
        20_000,
      );
      await c.kill(0);
      // The client of the first sees its connection cut: no answer, so it retries.
      expect(await first).toBeInstanceOf(Error);
      const retry = post(c.instances[1].url, '/api/send-sms.php', p.token, body, key);
      await waitFor(
        async () => (await waiting(['transactionid', 'tuple'])) === 1,
        "the retry to wait on the partner's row",
        20_000,
      );
      // The dead instance's transaction goes on to its end and finds no one to COMMIT it.
      await release();
      const b = await retry;
      expect([b.status, b.replayed]).toEqual([200, false]);
      const m = await moneyOf(p.partnerId);
      expect(m.messages.map((x) => x.id)).toEqual([b.body.id]);
      expect(m.debits).toHaveLength(1);
    });
    await c.restart(0);
  });
});

describe('API rate limits', { timeout: 60_000 }, () => {
  it("are the cluster's: 6 a minute is 6 over three instances, not 6 on each", async () => {
    const p = await partnerWithSms({ balance: '1.00', price: '0.01', rateLimitPerMinute: 6 });
    const answers = await Promise.all(
      Array.from({ length: 30 }, async () => {
        const r = await request(`${c.url}/v1/channels`, {
          headers: { authorization: `Bearer ${p.token}` },
          dispatcher: client,
        });
        const body = (await r.body.json()) as { error?: { code: string } };
        return {
          status: r.statusCode,
          headers: r.headers,
          code: body.error?.code,
          instance: r.headers['x-cluster-instance'],
        };
      }),
    );
    expect(new Set(answers.map((a) => a.instance)).size).toBe(3);
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    expect([ok.length, refused.length]).toEqual([6, 24]);
    // The burst counted down across the instances, from 5 left to none (time passing between
    // two instances' batches may give one back a fraction of a request: the same count twice).
    const remaining = ok.map((a) => Number(a.headers['ratelimit-remaining'])).sort();
    expect([remaining[0], remaining[5]]).toEqual([0, 5]);
    for (const a of refused) {
      expect(a.code).toBe('rate_limited');
      expect(a.headers['ratelimit-limit']).toBe('6');
      expect(a.headers['ratelimit-remaining']).toBe('0');
      expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(a.headers['retry-after'])).toBeLessThanOrEqual(10);
    }
  });
});

describe('a change made by msgctl, seen by every instance on its next request', { timeout: 60_000 }, () => {
  /** The same request to each instance directly, in turn. */
  const onEach = (fn: (base: string) => Promise<Answer>) => Promise.all(c.instances.map((inst) => fn(inst.url)));
  const channels = async (base: string, token: string): Promise<Answer> => {
    const r = await fetch(`${base}/v1/channels`, { headers: { authorization: `Bearer ${token}` } });
    return { status: r.status, body: await r.json(), replayed: false, instance: null };
  };

  it('a token revoked is refused by every instance', async () => {
    const p = await partnerWithSms({ balance: '1.00', price: '0.01' });
    // Every instance has the token in its cache.
    expect((await onEach((u) => channels(u, p.token))).map((a) => a.status)).toEqual([200, 200, 200]);
    const r = await c.msgctl(['token', 'revoke', p.token.slice(0, 16), '--yes']);
    expect(r.code, r.stderr).toBe(0);
    const after = await onEach((u) => channels(u, p.token));
    expect(after.map((a) => [a.status, a.body.error?.code])).toEqual([
      [401, 'unauthorized'],
      [401, 'unauthorized'],
      [401, 'unauthorized'],
    ]);
  });

  it('a partner suspended is refused by every instance, and served again once activated', async () => {
    const p = await partnerWithSms({ balance: '1.00', price: '0.01' });
    expect((await onEach((u) => channels(u, p.token))).map((a) => a.status)).toEqual([200, 200, 200]);
    expect((await c.msgctl(['partner', 'suspend', p.slug])).code).toBe(0);
    const send = (u: string) => post(u, '/api/send-sms.php', p.token, { to: '+14155550123', text: 'suspended?' });
    expect((await onEach(send)).map((a) => [a.status, a.body.error?.code])).toEqual([
      [403, 'partner_suspended'],
      [403, 'partner_suspended'],
      [403, 'partner_suspended'],
    ]);
    expect((await c.msgctl(['partner', 'activate', p.slug])).code).toBe(0);
    expect((await onEach(send)).map((a) => a.status)).toEqual([200, 200, 200]);
  });

  it('a price changed is quoted and debited by every instance', async () => {
    const p = await partnerWithSms({ balance: '1.00', price: '0.01' });
    const quote = (u: string) =>
      post(u, '/v1/messages/quote', p.token, { channel: 'sms', to: '+14155550123', body: 'hi' });
    expect((await onEach(quote)).map((a) => a.body.unit_price.amount)).toEqual(['0.01', '0.01', '0.01']);
    expect((await c.msgctl(['price', 'set', 'sms', '0.02', '--partner', p.slug])).code).toBe(0);
    expect((await onEach(quote)).map((a) => a.body.unit_price.amount)).toEqual(['0.02', '0.02', '0.02']);
    const sent = await onEach((u) => post(u, '/api/send-sms.php', p.token, { to: '+14155550123', text: 'hi' }));
    expect(sent.map((a) => a.status)).toEqual([200, 200, 200]);
    const m = await moneyOf(p.partnerId);
    expect(m.debits.map((d) => d.amount)).toEqual([-20_000, -20_000, -20_000]);
  });
});
