import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { debit, refund, topup } from '../../src/core/ledger.js';
import { createPartner } from '../../src/core/partners.js';
import { rollUpSpend, spendSeries } from '../../src/core/spend.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';

// The daily spend rollup: debits minus refunds per UTC day, folded in from the ledger's new
// rows since a watermark, each row once however often it runs.

let t: TestCtx;
afterEach(() => t?.close());

const DAY = 86_400_000;

describe('spend rollup', () => {
  it('with nothing new in the ledger, reads without waiting for a writer', async () => {
    t = openTestCtx();
    const { ctx } = t;
    const p = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
    await topup(ctx, p.id, 1_000_000, null, 'test');
    debit(ctx, p.id, 7_500, 'msg_a', 'test');
    expect(await rollUpSpend(ctx)).toBe(2);
    // Another connection (msgctl, a backup) holds the write lock: the Overview must not queue
    // behind it when there is nothing to fold.
    const other = new Database(join(t.dir, 'msgd.db'));
    other.pragma('busy_timeout = 0');
    other.exec('BEGIN IMMEDIATE');
    try {
      ctx.db.sqlite.pragma('busy_timeout = 0');
      expect(await rollUpSpend(ctx)).toBe(0);
      expect((await spendSeries(ctx, p.id, 1))[0].spend).toBe(7_500);
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
  });

  it('sums debits minus refunds per UTC day, counts each entry once, and zero-fills the series', async () => {
    t = openTestCtx({ clock: true });
    const { ctx, clock } = t;
    clock.now = Date.UTC(2026, 10, 20, 23, 59, 0);
    const p = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
    const q = await createPartner(ctx, { slug: 'other', name: 'Other' }, 'test');
    await topup(ctx, p.id, 10_000_000, null, 'test');
    await topup(ctx, q.id, 10_000_000, null, 'test');
    debit(ctx, p.id, 7_500, 'msg_a', 'test');
    debit(ctx, q.id, 1_000_000, 'msg_q', 'test');
    clock.now += 2 * 60_000; // past midnight: 2026-11-21
    debit(ctx, p.id, 7_500, 'msg_b', 'test');
    debit(ctx, p.id, 15_000, 'msg_c', 'test');
    expect(await rollUpSpend(ctx)).toBe(6);
    refund(ctx, p.id, 15_000, 'msg_c', 'failed', 'test');
    expect(await rollUpSpend(ctx)).toBe(1);
    expect(await rollUpSpend(ctx)).toBe(0);

    clock.now += 3 * DAY;
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
    t = openTestCtx();
    const { ctx } = t;
    const p = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
    await topup(ctx, p.id, 1_000_000_000, null, 'test');
    ctx.db.sqlite.transaction(() => {
      for (let i = 0; i < 25_000; i++) debit(ctx, p.id, 10, null, 'test');
    })();
    expect(await rollUpSpend(ctx)).toBe(25_001);
    expect((await spendSeries(ctx, p.id, 1))[0]).toMatchObject({ spend: 250_000, messages: 25_000 });
  });
});
