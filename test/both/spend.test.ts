import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { rollUpSpend, SpendToday, spendSeries } from '../../src/core/spend.js';
import { ledgerSettleMs } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx, testStore } from './helpers.js';
import { raceOnRow } from './race.js';

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

  it('counts an entry once its ids are settled: at once on SQLite, after the margin on PostgreSQL', async () => {
    const margin = ledgerSettleMs(t.dialect);
    t.clock.now = D20;
    await entries([
      ['prt_a', 'debit', -100, D20 - margin - 1],
      ['prt_a', 'debit', -20, D20],
    ]);
    // On PostgreSQL the younger debit waits; on SQLite both are settled.
    expect(await rollUpSpend(t.ctx)).toBe(margin > 0 ? 1 : 2);
    // An older row after a younger one settles the younger one too: its id was drawn earlier.
    await entries([['prt_a', 'debit', -3, D20 - margin - 1]]);
    expect(await rollUpSpend(t.ctx)).toBe(margin > 0 ? 2 : 1);
    await entries([['prt_a', 'debit', -4_000, D20]]);
    t.clock.now = D20 + margin;
    expect(await rollUpSpend(t.ctx)).toBe(margin > 0 ? 0 : 1);
    t.clock.now = D20 + margin + 1;
    expect(await rollUpSpend(t.ctx)).toBe(margin > 0 ? 1 : 0);
    expect(await storedSpend('prt_a', '2026-11-20')).toBe('4123');
  });

  // SQLite's writer commits in id order: a second writer waits for the first, so this can only
  // happen on PostgreSQL.
  it.runIf(testStore === 'postgres')(
    'counts a debit whose transaction commits after a higher id was rolled up',
    async () => {
      const margin = ledgerSettleMs(t.dialect);
      t.clock.now = D20;
      await entries([['prt_a', 'debit', -1, D20 - margin - 1]]);
      // A send batch's transaction inserts its debit (drawing the lower id) and stays open…
      let commit!: () => void;
      const held = new Promise<void>((resolve) => (commit = resolve));
      let inserted!: () => void;
      const insertedP = new Promise<void>((resolve) => (inserted = resolve));
      const slow = t.ctx.store.transaction(async (tx) => {
        await tx.run(
          sql`INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, actor, created_at)
              VALUES ('prt_a', 'debit', -20, 0, 'msg_slow', 't', ${D20})`,
        );
        inserted();
        await held;
      });
      await insertedP;
      let first: number;
      try {
        // …while a later debit commits and the rollup runs.
        await entries([['prt_a', 'debit', -300, D20]]);
        expect(await t.ctx.store.all(sql`SELECT id FROM ledger_entries`)).toHaveLength(2);
        first = await rollUpSpend(t.ctx);
      } finally {
        commit();
        await slow;
      }
      // Then the first commits, and the rollup runs again once the margin has passed.
      t.clock.now = D20 + margin + 1;
      await rollUpSpend(t.ctx);
      expect(await rollUpSpend(t.ctx)).toBe(0);
      expect((await spendSeries(t.ctx, 'prt_a', 1))[0]).toEqual({ day: '2026-11-20', spend: 321, messages: 3 });
      // The first rollup took the settled debit only.
      expect(first).toBe(1);
    },
  );

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
  it.runIf(testStore === 'postgres')(
    'counts a debit whose transaction commits after a higher id was read',
    async () => {
      const margin = ledgerSettleMs(t.dialect);
      await entries([['prt_a', 'debit', -1, D20]]);
      const spend = new SpendToday(t.ctx);
      expect(await spend.refresh(D20 + margin + 1)).toEqual(new Map([['prt_a', 1]]));
      let commit!: () => void;
      const held = new Promise<void>((resolve) => (commit = resolve));
      let inserted!: () => void;
      const insertedP = new Promise<void>((resolve) => (inserted = resolve));
      const slow = t.ctx.store.transaction(async (tx) => {
        await tx.run(
          sql`INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, actor, created_at)
              VALUES ('prt_a', 'debit', -20, 0, 'msg_slow', 't', ${D20 + 2 * margin})`,
        );
        inserted();
        await held;
      });
      await insertedP;
      try {
        await entries([['prt_a', 'debit', -300, D20 + 2 * margin]]);
        expect(await spend.refresh(D20 + 2 * margin + 1)).toEqual(new Map([['prt_a', 301]]));
      } finally {
        commit();
        await slow;
      }
      expect(await spend.refresh(D20 + 2 * margin + 2)).toEqual(new Map([['prt_a', 321]]));
      expect(await spend.refresh(D20 + 4 * margin)).toEqual(new Map([['prt_a', 321]]));
    },
  );
});
