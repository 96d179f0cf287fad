import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  InsufficientBalanceError,
  adjust,
  debit,
  debitIn,
  refund,
  refundIn,
  topup,
  verifyLedger,
} from '../../src/core/ledger.js';
import { createPartner, getPartner, setCreditLimit } from '../../src/core/partners.js';
import { sql } from '../../src/db/sql.js';
import { AppError } from '../../src/lib/errors.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// 2,000 random money moves against a model, on either store. After every one: the stored
// balance equals the model, equals the sum of the entries, never sits below -credit_limit
// after a debit, and verifyLedger agrees.

/** mulberry32: a seeded PRNG so a failure can be replayed with the printed seed. */
function prng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = s;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const SEED = Number(process.env.LEDGER_SEED ?? Date.now() % 1_000_000);
const OPS = 2_000;

let t: StoreCtx;
beforeAll(async () => {
  t = await openStoreCtx();
  // The invariant is about logic, not durability: skip the fsync per commit to keep this fast
  // (the PostgreSQL test cluster runs without fsync already).
  if (t.dialect === 'sqlite') t.ctx.db.sqlite.pragma('synchronous = OFF');
});
afterAll(() => t.close());

/**
 * A message's debit or refund, in a transaction of its own. Both forms move money in
 * production: on SQLite the synchronous one (inside the synchronous send and status
 * transactions) and the store one (debitIn / refundIn), picked by `rand`; on PostgreSQL the
 * store one.
 */
async function debitOnce(pick: number, partnerId: string, amount: number, messageId: string | null): Promise<void> {
  if (t.dialect === 'sqlite' && pick < 0.5) {
    t.ctx.db.sqlite.transaction(() => debit(t.ctx, partnerId, amount, messageId, 'test'))();
    return;
  }
  await t.ctx.store.transaction((tx) => debitIn(tx, t.ctx, partnerId, amount, messageId, 'test'));
}

async function refundOnce(pick: number, partnerId: string, amount: number, messageId: string): Promise<void> {
  if (t.dialect === 'sqlite' && pick < 0.5) {
    t.ctx.db.sqlite.transaction(() => refund(t.ctx, partnerId, amount, messageId, 'failed', 'test'))();
    return;
  }
  await t.ctx.store.transaction((tx) => refundIn(tx, t.ctx, partnerId, amount, messageId, 'failed', 'test'));
}

const sumOfEntries = async (partnerId: string) =>
  (await t.ctx.store.get<{ sum: number }>(
    sql`SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS sum FROM ledger_entries WHERE partner_id = ${partnerId}`,
  ))!.sum;
const entryCount = async () =>
  (await t.ctx.store.get<{ n: number }>(sql`SELECT CAST(count(*) AS BIGINT) AS n FROM ledger_entries`))!.n;

describe(`ledger property (seed ${SEED})`, () => {
  it(`keeps balance == sum(entries) and >= -credit_limit over ${OPS} random operations`, async () => {
    const rand = prng(SEED);
    const int = (max: number) => Math.floor(rand() * max);
    const slugs = ['p-a', 'p-b', 'p-c'];
    const model = new Map<string, { id: string; balance: number; credit: number }>();
    for (const slug of slugs) {
      const p = await createPartner(t.ctx, { slug, name: slug }, 'test');
      model.set(slug, { id: p.id, balance: 0, credit: 0 });
    }
    const counts = { topup: 0, debit: 0, refused: 0, refund: 0, adjust: 0, credit: 0 };

    for (let i = 0; i < OPS; i++) {
      const slug = slugs[int(slugs.length)];
      const m = model.get(slug)!;
      const op = rand();
      const amount = 1 + int(5_000_000); // up to 5.00
      const where = `op ${i} on ${slug} (seed ${SEED})`;
      if (op < 0.25) {
        await topup(t.ctx, slug, amount, 'top-up', 'test');
        m.balance += amount;
        counts.topup++;
      } else if (op < 0.65) {
        const expectOk = m.balance - amount >= -m.credit;
        let ok = true;
        try {
          await debitOnce(rand(), m.id, amount, `msg_${i}`);
        } catch (e) {
          expect(e, where).toBeInstanceOf(InsufficientBalanceError);
          ok = false;
        }
        expect(ok, where).toBe(expectOk);
        if (ok) {
          m.balance -= amount;
          counts.debit++;
          expect((await getPartner(t.ctx, slug)).balance, where).toBeGreaterThanOrEqual(-m.credit);
        } else counts.refused++;
      } else if (op < 0.75) {
        await refundOnce(rand(), m.id, amount, `msg_${i}`);
        m.balance += amount;
        counts.refund++;
      } else if (op < 0.9) {
        const signed = rand() < 0.5 ? -amount : amount;
        await adjust(t.ctx, slug, signed, 'correction', 'test');
        m.balance += signed;
        counts.adjust++;
      } else {
        m.credit = int(3) === 0 ? 0 : int(20_000_000);
        await setCreditLimit(t.ctx, slug, m.credit, 'test');
        counts.credit++;
      }
      // Both read at once: on PostgreSQL each is a round trip.
      const [p, sum] = await Promise.all([getPartner(t.ctx, slug), sumOfEntries(m.id)]);
      expect(p.balance, where).toBe(m.balance);
      expect(sum, where).toBe(m.balance);
      expect(p.credit_limit, where).toBe(m.credit);
      if (i % 50 === 0 || i === OPS - 1)
        expect(await verifyLedger(t.ctx), where).toMatchObject({ ok: true, mismatches: [] });
    }
    // Drain every partner: debits stop exactly where credit ends, whatever the history.
    for (const [slug, m] of model) {
      const unit = 1 + int(1_000_000);
      let drained = 0;
      for (;;) {
        try {
          await debitOnce(rand(), m.id, unit, null);
          m.balance -= unit;
          counts.debit++;
          drained++;
        } catch (e) {
          expect(e, `drain ${slug}`).toBeInstanceOf(InsufficientBalanceError);
          counts.refused++;
          break;
        }
      }
      const p = await getPartner(t.ctx, slug);
      expect(p.balance, `drain ${slug}`).toBe(m.balance);
      // An adjustment or a lowered credit limit may already have put it below.
      if (drained > 0) expect(p.balance, `drain ${slug}`).toBeGreaterThanOrEqual(-m.credit);
      expect(p.balance - unit, `drain ${slug}`).toBeLessThan(-m.credit);
    }
    expect(await verifyLedger(t.ctx)).toMatchObject({ ok: true, mismatches: [] });
    // Every branch ran often enough to mean something (refusals are rarer by chance).
    for (const [k, n] of Object.entries(counts))
      expect(n, `${k} (seed ${SEED})`).toBeGreaterThan(k === 'refused' ? 2 : 20);
    // Each entry's balance_after is the running sum of the entries before it.
    for (const { id } of model.values()) {
      const rows = await t.ctx.store.all<{ kind: string; amount: number; balance_after: number }>(
        sql`SELECT kind, amount, balance_after FROM ledger_entries WHERE partner_id = ${id} ORDER BY id`,
      );
      let running = 0;
      for (const r of rows) {
        running += r.amount;
        expect(r.balance_after).toBe(running);
      }
    }
  }, 60_000);

  it('refuses bad amounts without writing anything', async () => {
    const before = await entryCount();
    await expect(topup(t.ctx, 'p-a', 0, null, 'test')).rejects.toThrow(AppError);
    await expect(topup(t.ctx, 'p-a', -1, null, 'test')).rejects.toThrow(/positive/);
    await expect(topup(t.ctx, 'p-a', 1.5, null, 'test')).rejects.toThrow(/positive/);
    await expect(adjust(t.ctx, 'p-a', 0, 'x', 'test')).rejects.toThrow(/non-zero/);
    await expect(adjust(t.ctx, 'p-a', 5, '', 'test')).rejects.toThrow(/note/);
    await expect(topup(t.ctx, 'nobody', 5, null, 'test')).rejects.toThrow(/not found/);
    const pa = (await getPartner(t.ctx, 'p-a')).id;
    await expect(debitOnce(0, pa, -5, null)).rejects.toThrow(/non-negative/);
    await expect(debitOnce(1, pa, -5, null)).rejects.toThrow(/non-negative/);
    expect(await entryCount()).toBe(before);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });

  it('verifyLedger catches a balance edited behind the ledger', async () => {
    await t.exec("UPDATE partners SET balance = balance + 1 WHERE slug = 'p-b'");
    const v = await verifyLedger(t.ctx);
    expect(v.ok).toBe(false);
    expect(v.mismatches.map((m) => m.slug)).toEqual(['p-b']);
    await t.exec("UPDATE partners SET balance = balance - 1 WHERE slug = 'p-b'");
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });
});
