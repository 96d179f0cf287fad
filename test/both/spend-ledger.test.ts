import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CoreCtx } from '../../src/core/context.js';
import { debitIn, refundIn, topup } from '../../src/core/ledger.js';
import { createPartner } from '../../src/core/partners.js';
import { rollUpSpend, spendSeries } from '../../src/core/spend.js';
import { ledgerSettleMs } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The daily spend rollup over the ledger the money moves write, on both stores: debits minus
// refunds per UTC day, folded in from the ledger's new rows since a watermark, each row once
// however often it runs. On PostgreSQL a row is folded once the settle margin has passed
// (ledgerSettleMs): the tests move their clock past it before each rollup.

let t: StoreCtx;
afterEach(() => t?.close());

const NOON = Date.UTC(2026, 10, 20, 12, 0, 0);

const debit = (ctx: CoreCtx, partnerId: string, amount: number, messageId: string | null) =>
  ctx.store.transaction((tx) => debitIn(tx, ctx, partnerId, amount, messageId, 'test'));
const refund = (ctx: CoreCtx, partnerId: string, amount: number, messageId: string) =>
  ctx.store.transaction((tx) => refundIn(tx, ctx, partnerId, amount, messageId, 'failed', 'test'));

/** Moves the clock past the settle margin, so what the ledger holds now can be folded. */
const settle = () => {
  const margin = ledgerSettleMs(t.dialect);
  if (margin > 0) t.clock.now += margin + 1;
};

/**
 * Another connection holding the lock a rollup's write transaction would wait for: SQLite's
 * write lock (msgctl, a backup), or on PostgreSQL the watermark's row (a rollup under way).
 */
async function holdTheLock(ctx: CoreCtx): Promise<() => Promise<void>> {
  if (t.dialect === 'sqlite') {
    const other = new Database(join(t.target, 'msgd.db'));
    other.pragma('busy_timeout = 0');
    other.exec('BEGIN IMMEDIATE');
    ctx.db.sqlite.pragma('busy_timeout = 0');
    return async () => {
      other.exec('ROLLBACK');
      other.close();
    };
  }
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const holder = ctx.store.transaction(async (tx) => {
    await tx.all(sql`SELECT value FROM meta WHERE key = 'spend_rollup_ledger_id' FOR UPDATE`);
    locked();
    await released;
  });
  await isLocked;
  return async () => {
    release();
    await holder;
  };
}

describe('spend rollup', () => {
  it('with nothing new in the ledger, reads without waiting for a writer', async () => {
    t = await openStoreCtx({ clock: true });
    const { ctx } = t;
    t.clock.now = NOON; // the day does not change while the clock moves on
    const p = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
    await topup(ctx, p.id, 1_000_000, null, 'test');
    await debit(ctx, p.id, 7_500, 'msg_a');
    settle();
    expect(await rollUpSpend(ctx)).toBe(2);
    // Another connection holds the lock: the Overview must not queue behind it when there is
    // nothing to fold.
    const release = await holdTheLock(ctx);
    try {
      const quick = Promise.all([rollUpSpend(ctx), spendSeries(ctx, p.id, 1)]);
      const late = new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 5_000).unref());
      const r = await Promise.race([quick, late]);
      expect(r).not.toBe('waited');
      const [folded, series] = r as Awaited<typeof quick>;
      expect(folded).toBe(0);
      expect(series[0].spend).toBe(7_500);
    } finally {
      await release();
    }
  });

  it('sums debits minus refunds per UTC day, counts each entry once, and zero-fills the series', async () => {
    t = await openStoreCtx({ clock: true });
    const { ctx, clock } = t;
    clock.now = Date.UTC(2026, 10, 20, 23, 58, 0);
    const p = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
    const q = await createPartner(ctx, { slug: 'other', name: 'Other' }, 'test');
    await topup(ctx, p.id, 10_000_000, null, 'test');
    await topup(ctx, q.id, 10_000_000, null, 'test');
    await debit(ctx, p.id, 7_500, 'msg_a');
    await debit(ctx, q.id, 1_000_000, 'msg_q');
    clock.now += 2 * 60_000; // past midnight: 2026-11-21
    await debit(ctx, p.id, 7_500, 'msg_b');
    await debit(ctx, p.id, 15_000, 'msg_c');
    settle();
    expect(await rollUpSpend(ctx)).toBe(6);
    await refund(ctx, p.id, 15_000, 'msg_c');
    settle();
    expect(await rollUpSpend(ctx)).toBe(1);
    expect(await rollUpSpend(ctx)).toBe(0);

    clock.now = Date.UTC(2026, 10, 24, 12, 0, 0);
    const series = await spendSeries(ctx, p.id, 5);
    expect(series).toEqual([
      { day: '2026-11-20', spend: 7_500, messages: 1 },
      { day: '2026-11-21', spend: 7_500, messages: 2 },
      { day: '2026-11-22', spend: 0, messages: 0 },
      { day: '2026-11-23', spend: 0, messages: 0 },
      { day: '2026-11-24', spend: 0, messages: 0 },
    ]);
    expect((await spendSeries(ctx, q.id, 5))[0]).toEqual({ day: '2026-11-20', spend: 1_000_000, messages: 1 });
  });

  it('catches up over more rows than one batch', async () => {
    t = await openStoreCtx({ clock: true });
    const { ctx } = t;
    t.clock.now = NOON; // the day does not change while the clock moves on
    const p = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
    const funds = 1_000_000_000;
    await topup(ctx, p.id, funds, null, 'test');
    // 25,000 debits of 10 as the send path writes them (balance and entries), in multi-row
    // statements: one by one they would take a round trip each on PostgreSQL.
    const n = 25_000;
    for (let from = 0; from < n; from += 1_000) {
      const rows = Array.from(
        { length: 1_000 },
        (_, i) => `('${p.id}', 'debit', -10, ${funds - (from + i + 1) * 10}, NULL, 'test', ${t.clock.now})`,
      );
      await t.exec(
        `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, actor, created_at) VALUES ${rows.join(', ')}`,
      );
    }
    await t.exec(`UPDATE partners SET balance = ${funds - n * 10} WHERE id = '${p.id}'`);
    settle();
    expect(await rollUpSpend(ctx)).toBe(n + 1);
    expect((await spendSeries(ctx, p.id, 1))[0]).toMatchObject({ spend: 250_000, messages: n });
  });
});
