import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { rollUpSpend, SpendToday, spendSeries } from '../../src/core/spend.js';
import { sql } from '../../src/db/sql.js';
import { insertPartner } from './fixtures.js';
import { raceOnRow } from './race.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The spend rollup on both stores: debits less refunds per partner and UTC day, each ledger
// entry counted once however often (and however concurrently) it runs, exact past 2^53.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await insertPartner(t, { id: 'prt_a', slug: 'acme' });
  await insertPartner(t, { id: 'prt_b', slug: 'bolt' });
});
afterEach(() => t.close());

const DAY = 86_400_000;
const D20 = Date.UTC(2026, 10, 20, 12, 0, 0);

/** Ledger rows as the send path writes them (amounts signed: a debit is negative). */
async function entries(rows: [partner: string, kind: string, amount: bigint | number, at: number][]) {
  const values = rows.map(([p, k, a, at]) => `('${p}', '${k}', ${a}, 0, 'msg', 't', ${at})`).join(', ');
  await t.exec(
    `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, actor, created_at) VALUES ${values}`,
  );
}

const storedSpend = async (partner: string, day: string) =>
  (
    await t.ctx.store.get<{ spend: string; messages: number }>(
      sql`SELECT CAST(spend AS TEXT) AS spend, messages FROM spend_daily WHERE partner_id = ${partner} AND day = ${day}`,
    )
  )?.spend;

describe('spend rollup', () => {
  it('sums debits less refunds per partner and UTC day, each entry once, and zero-fills the series', async () => {
    await entries([
      ['prt_a', 'topup', 10_000_000, D20],
      ['prt_a', 'debit', -7_500, D20],
      ['prt_b', 'debit', -1_000_000, D20],
      ['prt_a', 'debit', -7_500, D20 + DAY],
      ['prt_a', 'debit', -15_000, D20 + DAY],
    ]);
    expect(await rollUpSpend(t.ctx)).toBe(5);
    await entries([['prt_a', 'refund', 15_000, D20 + DAY + 1]]);
    expect(await rollUpSpend(t.ctx)).toBe(1);
    expect(await rollUpSpend(t.ctx)).toBe(0);
    t.clock.now = D20 + 3 * DAY;
    expect(await spendSeries(t.ctx, 'prt_a', 5)).toEqual([
      { day: '2026-11-19', spend: 0, messages: 0 },
      { day: '2026-11-20', spend: 7_500, messages: 1 },
      { day: '2026-11-21', spend: 7_500, messages: 2 },
      { day: '2026-11-22', spend: 0, messages: 0 },
      { day: '2026-11-23', spend: 0, messages: 0 },
    ]);
    expect((await spendSeries(t.ctx, 'prt_b', 4))[0]).toEqual({ day: '2026-11-20', spend: 1_000_000, messages: 1 });
  });

  it('counts each entry once when two rollups run at once', async () => {
    await entries([['prt_a', 'debit', -10, D20]]);
    expect(await rollUpSpend(t.ctx)).toBe(1);
    await entries(Array.from({ length: 50 }, () => ['prt_a', 'debit', -10, D20] as [string, string, number, number]));
    // On PostgreSQL both rollups reach the watermark before either moves it.
    const runs = await raceOnRow(t, sql`SELECT key FROM meta WHERE key = 'spend_rollup_ledger_id' FOR UPDATE`, [
      () => rollUpSpend(t.ctx),
      () => rollUpSpend(t.ctx),
    ]);
    expect(
      runs.map((r) => (r.status === 'fulfilled' ? (r.value as number) : r.reason)).reduce((x, y) => x + y, 0),
    ).toBe(50);
    t.clock.now = D20;
    expect((await spendSeries(t.ctx, 'prt_a', 1))[0]).toEqual({ day: '2026-11-20', spend: 510, messages: 51 });
  });

  it('keeps a day past 2^53 micro-units exact', async () => {
    // Ten debits of 10^15 in one day: 10^16, past 2^53 (about 9.007 * 10^15), and one more micro-unit.
    await entries([
      ...Array.from({ length: 10 }, () => ['prt_a', 'debit', -(10n ** 15n), D20] as [string, string, bigint, number]),
      ['prt_a', 'debit', -1, D20],
    ]);
    expect(await rollUpSpend(t.ctx)).toBe(11);
    expect(BigInt((await storedSpend('prt_a', '2026-11-20'))!)).toBe(10n ** 16n + 1n);
    t.clock.now = D20;
    expect((await spendSeries(t.ctx, 'prt_a', 1))[0]).toMatchObject({ spend: 1e16, messages: 11 });
  });
});

describe('SpendToday', () => {
  it("sums today's spend per partner, reading only the entries since the last refresh", async () => {
    await entries([
      ['prt_a', 'debit', -500, D20 - DAY],
      ['prt_a', 'debit', -7_500, D20],
      ['prt_b', 'debit', -2_000, D20],
    ]);
    const spend = new SpendToday(t.ctx);
    expect(await spend.refresh(D20 + 1)).toEqual(
      new Map([
        ['prt_a', 7_500],
        ['prt_b', 2_000],
      ]),
    );
    await entries([
      ['prt_a', 'refund', 7_500, D20 + 2],
      ['prt_b', 'debit', -3_000, D20 + 2],
    ]);
    expect(await spend.refresh(D20 + 3)).toEqual(
      new Map([
        ['prt_a', 0],
        ['prt_b', 5_000],
      ]),
    );
    // The next UTC day starts from zero.
    expect(await spend.refresh(D20 + DAY)).toEqual(new Map());
  });
});
