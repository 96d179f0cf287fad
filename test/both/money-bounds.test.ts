import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { adjust, debit, debitIn, InsufficientBalanceError, topup, verifyLedger } from '../../src/core/ledger.js';
import { createPartner, getPartner, setCreditLimit, setPartnerLimits } from '../../src/core/partners.js';
import { setPrice } from '../../src/core/prices.js';
import { sql } from '../../src/db/sql.js';
import { AppError } from '../../src/lib/errors.js';
import { MAX_MONEY } from '../../src/lib/money.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// Money is exact at every size: balances, credit limits, prices and amounts stay within
// ±10^15 micro-units, so no sum leaves the range where JS numbers are exact; a move that
// would leave it is refused with nothing written; and the ledger check is exact whatever is stored.
// On both stores.

let t: StoreCtx;
let pid: string;
beforeEach(async () => {
  t = await openStoreCtx();
  pid = (await createPartner(t.ctx, { slug: 'acme', name: 'Acme' }, 'test')).id;
});
afterEach(() => t.close());

const counts = () =>
  t.ctx.store.get(
    sql`SELECT (SELECT CAST(count(*) AS BIGINT) FROM ledger_entries) AS entries,
               (SELECT CAST(count(*) AS BIGINT) FROM audit_log) AS audits,
               (SELECT balance FROM partners WHERE id = ${pid}) AS balance`,
  );

async function refusedAsync(fn: () => Promise<unknown>, message: RegExp) {
  const before = await counts();
  await expect(fn()).rejects.toThrow(message);
  expect(await counts()).toEqual(before);
}

type DebitForm = (partnerId: string, amount: number) => Promise<unknown>;
/**
 * A message's debit in a transaction of its own, in each form that moves money on the store:
 * on SQLite the synchronous one its send transaction calls, and the store one (debitIn) both
 * stores' status changes call.
 */
const debitForms = (): [string, DebitForm][] => [
  ...(t.dialect === 'sqlite'
    ? [
        [
          'debit',
          async (partnerId: string, amount: number) =>
            t.ctx.db.sqlite.transaction(() => debit(t.ctx, partnerId, amount, null, 'send'))(),
        ] as [string, DebitForm],
      ]
    : []),
  [
    'debitIn',
    (partnerId, amount) => t.ctx.store.transaction((tx) => debitIn(tx, t.ctx, partnerId, amount, null, 'send')),
  ],
];

describe('balances stay within ±10^15 micro-units', () => {
  it('a top-up may fill the balance to the bound exactly, and not one micro-unit past it', async () => {
    await topup(t.ctx, pid, MAX_MONEY - 1, null, 'test');
    const last = await topup(t.ctx, pid, 1, null, 'test');
    expect(last.balance_after).toBe(MAX_MONEY);
    await refusedAsync(
      () => topup(t.ctx, pid, 1, null, 'test'),
      /would take the balance of acme from 1000000000\.00 to 1000000000\.000001 USD, past the largest balance/,
    );
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });

  it('a top-up larger than the bound is refused before anything is read', async () => {
    await refusedAsync(() => topup(t.ctx, pid, MAX_MONEY + 1, null, 'test'), /a top-up can be at most 1000000000\.00/);
    // The case that used to commit and then fail: a balance pushed past 2^53.
    await topup(t.ctx, pid, MAX_MONEY, null, 'test');
    for (let i = 0; i < 9; i++)
      await refusedAsync(() => topup(t.ctx, pid, MAX_MONEY, null, 'test'), /past the largest/);
    expect((await getPartner(t.ctx, pid)).balance).toBe(MAX_MONEY);
  });

  it('an adjustment is bounded both ways', async () => {
    await adjust(t.ctx, pid, -MAX_MONEY, 'write-off', 'test');
    await refusedAsync(() => adjust(t.ctx, pid, -1, 'one more', 'test'), /from -1000000000\.00 to -1000000000\.000001/);
    await refusedAsync(() => adjust(t.ctx, pid, -(MAX_MONEY + 1), 'x', 'test'), /an adjustment can be at most/);
    await adjust(t.ctx, pid, 2 * 1, 'back', 'test');
    expect((await getPartner(t.ctx, pid)).balance).toBe(-MAX_MONEY + 2);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });

  it('credit limits, prices and low-balance thresholds are bounded too', async () => {
    expect((await setCreditLimit(t.ctx, pid, MAX_MONEY, 'test')).credit_limit).toBe(MAX_MONEY);
    await expect(setCreditLimit(t.ctx, pid, MAX_MONEY + 1, 'test')).rejects.toThrow(/credit limit can be at most/);
    await expect(
      createPartner(t.ctx, { slug: 'big', name: 'Big', creditLimit: MAX_MONEY + 1 }, 'test'),
    ).rejects.toThrow(AppError);
    expect((await setPrice(t.ctx, { channel: 'sms', amount: MAX_MONEY }, 'test')).amount).toBe(MAX_MONEY);
    await expect(setPrice(t.ctx, { channel: 'sms', amount: MAX_MONEY + 1 }, 'test')).rejects.toThrow(
      /price can be at most/,
    );
    await expect(setPartnerLimits(t.ctx, pid, { lowBalanceThreshold: MAX_MONEY + 1 }, 'test')).rejects.toThrow(
      /low-balance threshold can be at most/,
    );
  });

  it('a message costing more than the bound (a maximal SMS price times its segments) is a 402, with nothing written', async () => {
    await topup(t.ctx, pid, MAX_MONEY, null, 'test');
    await setCreditLimit(t.ctx, pid, MAX_MONEY, 'test');
    const before = await counts();
    const price = 3 * MAX_MONEY;
    const forms = debitForms();
    for (const [name, debitOnce] of forms) {
      await expect(debitOnce(pid, price), name).rejects.toThrow(InsufficientBalanceError);
      await expect(debitOnce(pid, price), name).rejects.toThrow(/more than the largest amount msgd handles/);
    }
    expect(await counts()).toEqual(before);
    // The whole of balance and credit can be spent, exactly.
    await forms[0][1](pid, MAX_MONEY);
    await forms[forms.length - 1][1](pid, MAX_MONEY);
    expect((await getPartner(t.ctx, pid)).balance).toBe(-MAX_MONEY);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });
});

describe('the ledger check is exact', () => {
  it('sees a one micro-unit difference past 2^53, where JS numbers cannot', async () => {
    await topup(t.ctx, pid, 1, null, 'test');
    // As a damaged or hand-edited database might hold: balance 2^53 + 1, entries summing to 2^53.
    await t.ctx.store.run(
      sql`UPDATE ledger_entries SET amount = ${2n ** 53n}, balance_after = ${2n ** 53n + 1n} WHERE partner_id = ${pid}`,
    );
    await t.ctx.store.run(sql`UPDATE partners SET balance = ${2n ** 53n + 1n} WHERE id = ${pid}`);
    const v = await verifyLedger(t.ctx);
    expect(v.ok).toBe(false);
    expect(v.mismatches).toEqual([
      {
        partner_id: pid,
        slug: 'acme',
        balance: 2n ** 53n + 1n,
        sum_of_entries: 2n ** 53n,
        last_balance_after: 2n ** 53n + 1n,
      },
    ]);
  });
});
