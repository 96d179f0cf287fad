import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InsufficientBalanceError, adjust, debit, refund, topup, verifyLedger } from '../../src/core/ledger.js';
import { createPartner, getPartner, setCreditLimit } from '../../src/core/partners.js';
import { AppError } from '../../src/lib/errors.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';

// 2,000 random money moves against a model. After every one: the stored balance equals
// the model, equals the sum of the entries, never sits below -credit_limit after a debit,
// and verifyLedger agrees.

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

let t: TestCtx;
beforeAll(() => {
  t = openTestCtx();
  // The invariant is about logic, not durability: skip the fsync per commit to keep this fast.
  t.ctx.db.sqlite.pragma('synchronous = OFF');
});
afterAll(() => t.close());

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
    const sumStmt = t.ctx.db.sqlite
      .prepare('SELECT COALESCE(SUM(amount), 0) FROM ledger_entries WHERE partner_id = ?')
      .pluck();
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
          t.ctx.db.sqlite.transaction(() => debit(t.ctx, m.id, amount, `msg_${i}`, 'test'))();
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
        t.ctx.db.sqlite.transaction(() => refund(t.ctx, m.id, amount, `msg_${i}`, 'failed', 'test'))();
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
      const p = await getPartner(t.ctx, slug);
      expect(p.balance, where).toBe(m.balance);
      expect(sumStmt.get(m.id), where).toBe(m.balance);
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
          t.ctx.db.sqlite.transaction(() => debit(t.ctx, m.id, unit, null, 'test'))();
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
      const rows = t.ctx.db.sqlite
        .prepare('SELECT kind, amount, balance_after FROM ledger_entries WHERE partner_id = ? ORDER BY id')
        .all(id) as any[];
      let running = 0;
      for (const r of rows) {
        running += r.amount;
        expect(r.balance_after).toBe(running);
      }
    }
  }, 30_000);

  it('refuses bad amounts without writing anything', async () => {
    const before = t.ctx.db.sqlite.prepare('SELECT COUNT(*) FROM ledger_entries').pluck().get();
    await expect(topup(t.ctx, 'p-a', 0, null, 'test')).rejects.toThrow(AppError);
    await expect(topup(t.ctx, 'p-a', -1, null, 'test')).rejects.toThrow(/positive/);
    await expect(topup(t.ctx, 'p-a', 1.5, null, 'test')).rejects.toThrow(/positive/);
    await expect(adjust(t.ctx, 'p-a', 0, 'x', 'test')).rejects.toThrow(/non-zero/);
    await expect(adjust(t.ctx, 'p-a', 5, '', 'test')).rejects.toThrow(/note/);
    await expect(topup(t.ctx, 'nobody', 5, null, 'test')).rejects.toThrow(/not found/);
    const pa = (await getPartner(t.ctx, 'p-a')).id;
    expect(() => debit(t.ctx, pa, -5, null, 'test')).toThrow(/non-negative/);
    expect(t.ctx.db.sqlite.prepare('SELECT COUNT(*) FROM ledger_entries').pluck().get()).toBe(before);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });

  it('verifyLedger catches a balance edited behind the ledger', async () => {
    t.ctx.db.sqlite.prepare("UPDATE partners SET balance = balance + 1 WHERE slug = 'p-b'").run();
    const v = await verifyLedger(t.ctx);
    expect(v.ok).toBe(false);
    expect(v.mismatches.map((m) => m.slug)).toEqual(['p-b']);
    t.ctx.db.sqlite.prepare("UPDATE partners SET balance = balance - 1 WHERE slug = 'p-b'").run();
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });
});
