import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { parseMoney } from '../../src/lib/money.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { SMS } from '../helpers/gateways.js';
import { migratedDatabase } from './helpers.js';
import { waitForExit } from '../helpers/wait.js';
import {
  addPartner,
  messagesOf,
  moneyProblems,
  type PgMsgd,
  type PgPrepared,
  preparePg,
  startPgMsgd,
} from './msgd-child.js';

// The overspend race and the idempotency race through HTTP, on msgd (a process of its own) on
// PostgreSQL: 1000 sends at once on funds for exactly 100 are 100 accepted and 900 refused 402,
// with or without a credit limit; one Idempotency-Key sent 50 times at once is one message
// and one debit, every answer naming it.

const db = migratedDatabase();
let twilio: TwilioFake;
let prep: PgPrepared;
let m: PgMsgd;
// A connection per request, all open at msgd at once; new ones for each test (msgd closes idle
// connections after 5 s, and a request sent as the close arrives would fail in the client).
let agent: Agent;
beforeEach(() => {
  agent = new Agent({ connections: 1000, pipelining: 1 });
});
afterEach(() => agent.close());
beforeAll(async () => {
  twilio = await startTwilioFake();
  prep = await preparePg(db.url, twilio, {}, { balance: '0', price: '0.01' });
  m = await startPgMsgd(prep);
}, 60_000);
afterAll(async () => {
  if (m && m.child.exitCode === null) {
    m.child.kill('SIGTERM');
    await waitForExit(m.child, 15_000);
  }
  await prep?.close();
  await twilio?.close();
});

interface Answer {
  status: number;
  body: { id?: string; error?: { code: string } };
}

async function post(base: string, token: string, body: unknown, key?: string): Promise<Answer> {
  const res = await fetch(`${base}${SMS}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${token}`,
      ...(key ? { 'idempotency-key': key } : {}),
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
    // @ts-expect-error: undici's dispatcher option, which Node's fetch takes and its types leave out
    dispatcher: agent,
  });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

async function balanceAndDebits(partnerId: string) {
  const row = await prep.ctx.store.get<{ balance: string; debits: string; n: string }>(
    sql`SELECT CAST(p.balance AS TEXT) AS balance,
               CAST(COALESCE((SELECT SUM(amount) FROM ledger_entries l WHERE l.partner_id = p.id AND l.kind = 'debit'), 0) AS TEXT) AS debits,
               CAST((SELECT count(*) FROM ledger_entries l WHERE l.partner_id = p.id AND l.kind = 'debit') AS TEXT) AS n
          FROM partners p WHERE p.id = ${partnerId}`,
  );
  return { balance: BigInt(row!.balance), debits: BigInt(row!.debits), count: Number(row!.n) };
}

describe('msgd on PostgreSQL under concurrent sends', () => {
  for (const [name, funds] of [
    ['funds for exactly 100', { balance: '1', credit: undefined }],
    ['a credit limit making up part of them', { balance: '0.6', credit: '0.4' }],
  ] as const) {
    it(`1000 sends at once on ${name}: exactly 100 accepted, the others 402`, async () => {
      const price = '0.01';
      const { token, partnerId } = await addPartner(prep.ctx, twilio, { ...funds, price });

      const answers = await Promise.all(
        Array.from({ length: 1000 }, (_, i) =>
          post(m.url, token, { to: `+1415555${String(i).padStart(4, '0')}`, text: `race ${i}` }),
        ),
      );
      const ok = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status !== 200);
      expect(ok).toHaveLength(100);
      for (const a of refused)
        expect(a).toMatchObject({ status: 402, body: { error: { code: 'insufficient_balance' } } });

      const credit = funds.credit ? parseMoney(funds.credit) : 0;
      const money = await balanceAndDebits(partnerId);
      expect(money.balance).toBe(BigInt(-credit));
      expect(money.debits).toBe(BigInt(-100 * parseMoney(price)));
      expect(money.count).toBe(100);
      const rows = await messagesOf(prep.ctx, partnerId);
      expect(rows.map((r) => r.id).sort()).toEqual(ok.map((a) => a.body.id).sort());
      expect(await moneyProblems(prep.ctx, partnerId)).toEqual([]);
    }, 90_000);
  }

  it('one Idempotency-Key sent 50 times at once: one message, one debit, every 200 names it', async () => {
    const { token, partnerId } = await addPartner(prep.ctx, twilio, { balance: '10', price: '0.01' });
    const body = { to: '+14155550101', text: 'once' };

    const answers = await Promise.all(Array.from({ length: 50 }, () => post(m.url, token, body, 'race-key')));
    const accepted = answers.filter((a) => a.status === 200);
    expect(accepted).toHaveLength(50);
    const ids = new Set(accepted.map((a) => a.body.id));
    expect(ids.size).toBe(1);

    const rows = await messagesOf(prep.ctx, partnerId);
    expect(rows.map((r) => r.id)).toEqual([...ids]);
    const money = await balanceAndDebits(partnerId);
    expect(money.count).toBe(1);
    expect(money.balance).toBe(BigInt(parseMoney('10') - parseMoney('0.01')));
    expect(await moneyProblems(prep.ctx, partnerId)).toEqual([]);
    // Later repeats are the replay.
    const again = await post(m.url, token, body, 'race-key');
    expect(again).toEqual({ status: 200, body: accepted[0].body });
  }, 60_000);
});
