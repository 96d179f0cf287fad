import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { adjust, ledgerEntryJson, listLedger, topup, verifyLedger } from '../../src/core/ledger.js';
import { sql } from '../../src/db/sql.js';
import { MAX_MONEY } from '../../src/lib/money.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The money an operator moves and the ledger check, on both stores: adjustments are exact,
// bounded and atomic under concurrency; the check compares sums past 2^53 exactly.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await t.exec(
    `INSERT INTO partners (id, slug, name, currency, balance, credit_limit, created_at, updated_at)
     VALUES ('prt_a', 'acme', 'Acme', 'USD', 0, 0, 0, 0), ('prt_b', 'bolt', 'Bolt', 'EUR', 0, 0, 0, 0)`,
  );
});
afterEach(() => t.close());

const balance = async (id: string) =>
  (await t.ctx.store.get<{ balance: number }>(sql`SELECT balance FROM partners WHERE id = ${id}`))!.balance;
const entries = (id: string) =>
  t.ctx.store.all<{ kind: string; amount: number; balance_after: number; note: string; actor: string }>(
    sql`SELECT kind, amount, balance_after, note, actor FROM ledger_entries WHERE partner_id = ${id} ORDER BY id`,
  );
const audits = () =>
  t.ctx.store.all<{ actor: string; action: string; target_id: string; details: string }>(
    sql`SELECT actor, action, target_id, details FROM audit_log ORDER BY id`,
  );

describe('adjust', () => {
  it('moves the balance by a signed amount, with its entry and audit row', async () => {
    const up = await adjust(t.ctx, 'acme', 2_500_000, 'goodwill', 'operator:ann');
    expect(up).toMatchObject({
      partner_id: 'prt_a',
      kind: 'adjustment',
      amount: 2_500_000,
      balance_after: 2_500_000,
      message_id: null,
      note: 'goodwill',
      actor: 'operator:ann',
      created_at: t.clock.now,
    });
    expect(typeof up.id).toBe('number');
    const down = await adjust(t.ctx, 'prt_a', -4_000_000, 'chargeback', 'operator:ann');
    expect(down.balance_after).toBe(-1_500_000);
    expect(await balance('prt_a')).toBe(-1_500_000);
    expect(await entries('prt_a')).toEqual([
      { kind: 'adjustment', amount: 2_500_000, balance_after: 2_500_000, note: 'goodwill', actor: 'operator:ann' },
      { kind: 'adjustment', amount: -4_000_000, balance_after: -1_500_000, note: 'chargeback', actor: 'operator:ann' },
    ]);
    expect((await audits()).map((a) => [a.action, a.target_id, JSON.parse(a.details)])).toEqual([
      ['balance.adjust', 'prt_a', { amount: 2_500_000, note: 'goodwill' }],
      ['balance.adjust', 'prt_a', { amount: -4_000_000, note: 'chargeback' }],
    ]);
    expect(await verifyLedger(t.ctx)).toEqual({ ok: true, partners: 2, mismatches: [] });
  });

  it('refuses a bad amount, a missing note, an unknown partner and a move past ±10^15, writing nothing', async () => {
    await expect(adjust(t.ctx, 'acme', 0, 'x', 'op')).rejects.toThrow(/non-zero/);
    await expect(adjust(t.ctx, 'acme', 5, '', 'op')).rejects.toThrow(/needs a note/);
    await expect(adjust(t.ctx, 'acme', MAX_MONEY + 1, 'x', 'op')).rejects.toThrow(/at most 1000000000\.00/);
    await expect(adjust(t.ctx, 'nobody', 5, 'x', 'op')).rejects.toThrow(/partner "nobody" not found/);
    await adjust(t.ctx, 'acme', -MAX_MONEY, 'write-off', 'op');
    await expect(adjust(t.ctx, 'acme', -1, 'one more', 'op')).rejects.toThrow(
      /would take the balance of acme from -1000000000\.00 to -1000000000\.000001 USD, past the largest balance/,
    );
    expect(await balance('prt_a')).toBe(-MAX_MONEY);
    expect(await entries('prt_a')).toHaveLength(1);
    expect(await audits()).toHaveLength(1);
  });

  it('lets exactly as many of 50 concurrent adjustments through as the bound allows', async () => {
    const UNIT = 1_000_000;
    await adjust(t.ctx, 'acme', MAX_MONEY - 20 * UNIT, 'start', 'op');
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) => adjust(t.ctx, 'acme', UNIT, `more ${i}`, `op:${i}`)),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    expect(ok).toHaveLength(20);
    for (const r of results)
      if (r.status === 'rejected') expect(String(r.reason)).toMatch(/past the largest balance msgd keeps/);
    expect(await balance('prt_a')).toBe(MAX_MONEY);
    // Each entry's balance_after is one unit above the one before: they committed one at a time.
    const after = (await entries('prt_a')).slice(1).map((e) => e.balance_after);
    expect(after).toEqual(Array.from({ length: 20 }, (_, i) => MAX_MONEY - 20 * UNIT + (i + 1) * UNIT));
    expect(await audits()).toHaveLength(21);

    // And downwards, on the other partner, with mixed signs: the bound holds at every step.
    await adjust(t.ctx, 'bolt', -(MAX_MONEY - 10 * UNIT), 'start', 'op');
    const mixed = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) => adjust(t.ctx, 'bolt', i % 5 === 0 ? UNIT : -UNIT, `m ${i}`, 'op')),
    );
    const applied = (await entries('prt_b')).slice(1);
    expect(applied).toHaveLength(mixed.filter((r) => r.status === 'fulfilled').length);
    for (const e of applied) expect(e.balance_after).toBeGreaterThanOrEqual(-MAX_MONEY);
    expect(await balance('prt_b')).toBe(applied.at(-1)!.balance_after);
    expect(await verifyLedger(t.ctx)).toEqual({ ok: true, partners: 2, mismatches: [] });
  });
});

describe('topup', () => {
  it('adds to the balance with its entry and audit row, exact up to the bound and refused one past it', async () => {
    t.clock.now = 9_000;
    const e = await topup(t.ctx, 'acme', 100_000_000, 'invoice 42', 'operator:ann');
    expect(ledgerEntryJson(e, 'USD')).toMatchObject({
      partner_id: 'prt_a',
      kind: 'topup',
      amount: { micro: 100_000_000, currency: 'USD' },
      balance_after: { micro: 100_000_000, currency: 'USD' },
      note: 'invoice 42',
      actor: 'operator:ann',
      created_at: new Date(9_000).toISOString(),
    });
    await topup(t.ctx, 'prt_a', MAX_MONEY - 100_000_001, null, 'op');
    expect((await topup(t.ctx, 'acme', 1, null, 'op')).balance_after).toBe(MAX_MONEY);
    await expect(topup(t.ctx, 'acme', 1, null, 'op')).rejects.toThrow(
      /would take the balance of acme from 1000000000\.00 to 1000000000\.000001 USD, past the largest balance/,
    );
    await expect(topup(t.ctx, 'acme', 0, null, 'op')).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(topup(t.ctx, 'acme', MAX_MONEY + 1, null, 'op')).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(topup(t.ctx, 'nobody', 5, null, 'op')).rejects.toMatchObject({ code: 'not_found' });
    expect(await balance('prt_a')).toBe(MAX_MONEY);
    expect(await entries('prt_a')).toHaveLength(3);
    expect((await audits()).map((a) => a.action)).toEqual(['balance.topup', 'balance.topup', 'balance.topup']);
    expect(await verifyLedger(t.ctx)).toEqual({ ok: true, partners: 2, mismatches: [] });
  });

  it('lets exactly as many of 30 concurrent top-ups through as the bound allows', async () => {
    await topup(t.ctx, 'bolt', MAX_MONEY - 10_000_000, 'start', 'op');
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, () => topup(t.ctx, 'bolt', 1_000_000, null, 'op')),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(10);
    expect(await balance('prt_b')).toBe(MAX_MONEY);
    expect(await verifyLedger(t.ctx)).toEqual({ ok: true, partners: 2, mismatches: [] });
  });
});

describe('listLedger', () => {
  it("lists a partner's entries newest first, in pages before an entry id", async () => {
    for (let i = 1; i <= 7; i++) {
      await topup(t.ctx, 'acme', i * 1_000_000, `t${i}`, 'op');
      await topup(t.ctx, 'bolt', 1, null, 'op');
    }
    await adjust(t.ctx, 'acme', -500_000, 'fix', 'op');
    const all = await listLedger(t.ctx, 'acme');
    expect(all.partner.id).toBe('prt_a');
    expect(all.entries.map((e) => e.note)).toEqual(['fix', 't7', 't6', 't5', 't4', 't3', 't2', 't1']);
    expect(all.entries[0].balance_after).toBe(28_000_000 - 500_000);
    const first = await listLedger(t.ctx, 'prt_a', { limit: 3 });
    expect(first.entries.map((e) => e.note)).toEqual(['fix', 't7', 't6']);
    const second = await listLedger(t.ctx, 'acme', { limit: 3, before: first.entries[2].id });
    expect(second.entries.map((e) => e.note)).toEqual(['t5', 't4', 't3']);
    const last = await listLedger(t.ctx, 'acme', { limit: 3, before: second.entries[2].id });
    expect(last.entries.map((e) => e.note)).toEqual(['t2', 't1']);
    expect((await listLedger(t.ctx, 'acme', { before: last.entries[1].id })).entries).toEqual([]);
    expect((await listLedger(t.ctx, 'bolt')).entries).toHaveLength(7);
    await expect(listLedger(t.ctx, 'nobody')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('keeps each balance exact while the entries of all partners sum past 2^53', async () => {
    // Ten partners at the bound: their entries sum to 10^16 - 1, past 2^53 (about 9.007 * 10^15).
    const more = Array.from({ length: 8 }, (_, i) => `('prt_${i}', 'p-${i}', 'P', 'USD', 0, 0, 0, 0)`);
    await t.exec(
      `INSERT INTO partners (id, slug, name, currency, balance, credit_limit, created_at, updated_at) VALUES ${more.join(', ')}`,
    );
    for (const slug of ['acme', 'bolt', ...Array.from({ length: 8 }, (_, i) => `p-${i}`)])
      await topup(t.ctx, slug, MAX_MONEY, null, 'op');
    await adjust(t.ctx, 'bolt', -1, 'one micro-unit', 'op');
    const { entries: b } = await listLedger(t.ctx, 'bolt');
    expect(b.map((e) => [e.amount, e.balance_after])).toEqual([
      [-1, MAX_MONEY - 1],
      [MAX_MONEY, MAX_MONEY],
    ]);
    // Read as text: exact on both stores (a JS number would round it).
    const sum = await t.ctx.store.get<{ total: string }>(
      sql`SELECT CAST(SUM(amount) AS TEXT) AS total FROM ledger_entries`,
    );
    expect(BigInt(sum!.total)).toBe(10n * BigInt(MAX_MONEY) - 1n);
    expect(await verifyLedger(t.ctx)).toEqual({ ok: true, partners: 10, mismatches: [] });
  });
});

describe('verifyLedger', () => {
  it('compares sums past 2^53 exactly, one micro-unit apart', async () => {
    // As a damaged or hand-edited database might hold. acme: balance 2^53, entries summing to
    // 2^53 + 1 (equal as JS numbers); bolt: balance and entries both 2^53 + 3, consistent.
    await t.exec(
      `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, actor, created_at) VALUES
         ('prt_a', 'topup', 4503599627370496, 4503599627370496, 't', 0),
         ('prt_a', 'topup', 4503599627370497, 9007199254740992, 't', 0),
         ('prt_b', 'topup', 4503599627370496, 4503599627370496, 't', 0),
         ('prt_b', 'topup', 4503599627370499, 9007199254740995, 't', 0);
       UPDATE partners SET balance = 9007199254740992 WHERE id = 'prt_a';
       UPDATE partners SET balance = 9007199254740995 WHERE id = 'prt_b';`,
    );
    expect(await verifyLedger(t.ctx)).toEqual({
      ok: false,
      partners: 2,
      mismatches: [
        {
          partner_id: 'prt_a',
          slug: 'acme',
          balance: 9007199254740992n,
          sum_of_entries: 9007199254740993n,
          last_balance_after: 9007199254740992n,
        },
      ],
    });
  });

  it('sees a last entry that disagrees with the balance, and a partner without entries', async () => {
    await adjust(t.ctx, 'acme', 5, 'x', 'op');
    expect(await verifyLedger(t.ctx)).toEqual({ ok: true, partners: 2, mismatches: [] });
    await t.exec(`UPDATE ledger_entries SET balance_after = 6 WHERE partner_id = 'prt_a'`);
    await t.exec(`UPDATE partners SET balance = 7 WHERE id = 'prt_b'`);
    expect((await verifyLedger(t.ctx)).mismatches).toEqual([
      { partner_id: 'prt_a', slug: 'acme', balance: 5n, sum_of_entries: 5n, last_balance_after: 6n },
      { partner_id: 'prt_b', slug: 'bolt', balance: 7n, sum_of_entries: 0n, last_balance_after: null },
    ]);
  });
});
