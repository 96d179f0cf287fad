import type { Tx } from '../db/query.js';
import type { Row } from '../db/rows.js';
import type { ledgerEntries, partners } from '../db/schema.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { AppError, invalid } from '../lib/errors.js';
import { formatMoney, inMoneyRange, MAX_MONEY, moneyJson } from '../lib/money.js';
import { iso } from '../lib/time.js';
import type { Queryable } from '../db/query.js';
import type { CoreCtx } from './context.js';
import { auditIn } from './audit.js';
import { type Partner, readPartner } from './partners.js';

// The ledger is append-only. partner.balance moves in the same transaction as its entry, so
// balance == sum(entries) always; verifyLedger() proves it. A debit is one conditional
// UPDATE: it cannot take the balance below -credit_limit, whatever runs concurrently.
// Amounts are bound as SQLite integers (BigInt): a JS number binds as a REAL, and the sum in
// the UPDATE would then be floating-point arithmetic.

export type LedgerKind = 'topup' | 'debit' | 'refund' | 'adjustment';
export type LedgerEntry = Row<typeof ledgerEntries>;

type Funds = Pick<Row<typeof partners>, 'balance' | 'credit_limit'>;
type Balance = Pick<Row<typeof partners>, 'balance'>;

// Exhausted (balance + credit <= 0) refuses even a free message, as the send API's rule 3 says.
const DEBIT_SQL = `UPDATE partners SET balance = balance - ?, updated_at = ?
  WHERE id = ? AND balance + credit_limit > 0 AND balance - ? >= -credit_limit RETURNING balance`;
const CREDIT_SQL = 'UPDATE partners SET balance = balance + ?, updated_at = ? WHERE id = ? RETURNING balance';
const FUNDS_SQL = 'SELECT balance, credit_limit FROM partners WHERE id = ?';
const INSERT_SQL = `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, note, actor, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;

const funds = (ctx: CoreCtx, partnerId: string) => stmt<[string], Funds>(ctx.db.sqlite, FUNDS_SQL).get(partnerId);
const credit = (ctx: CoreCtx, partnerId: string, amount: bigint, now: number) =>
  stmt<[bigint, number, string], Balance>(ctx.db.sqlite, CREDIT_SQL).get(amount, now, partnerId)!;
const insertEntry = (
  ctx: CoreCtx,
  e: [string, LedgerKind, bigint, number, string | null, string | null, string, number],
) => stmt(ctx.db.sqlite, INSERT_SQL).run(...e);

export class InsufficientBalanceError extends AppError {
  constructor(message = 'balance and credit limit do not cover this message', data?: Record<string, unknown>) {
    super('insufficient_balance', message, [], data);
  }
}

/** The 402 for a partner whose balance and credit limit are used up (balance + credit <= 0), whatever the price. */
export function exhaustedError(balance: number, creditLimit: number): InsufficientBalanceError {
  return new InsufficientBalanceError('balance and credit limit are exhausted; top up to send', {
    balance,
    credit_limit: creditLimit,
  });
}

/**
 * 402 when the partner's balance and credit limit are used up (balance + credit <= 0), whatever
 * a message would cost: the send API's rule 3. Reads the partner's funds.
 */
export function refuseIfExhausted(ctx: CoreCtx, partnerId: string): void {
  const f = funds(ctx, partnerId);
  if (f && f.balance + f.credit_limit <= 0) throw exhaustedError(f.balance, f.credit_limit);
}

/**
 * Debit `amount` (>= 0) for a message. Must run inside the caller's transaction (the send
 * transaction). Changes nothing and throws a 402 insufficient_balance if balance and credit are
 * exhausted (even for a free message: exhaustedError) or do not cover the amount
 * (InsufficientBalanceError, which both are).
 */
export function debit(
  ctx: CoreCtx,
  partnerId: string,
  amount: number,
  messageId: string | null,
  actor: string,
  note: string | null = null,
): number {
  if (!Number.isSafeInteger(amount) || amount < 0)
    throw new Error(`debit amount must be a non-negative integer: ${amount}`);
  if (amount > MAX_MONEY) {
    refuseIfExhausted(ctx, partnerId);
    throw new InsufficientBalanceError(
      `this message costs ${formatMoney(amount)}, more than the largest amount msgd handles (${formatMoney(MAX_MONEY)})`,
      { price: amount },
    );
  }
  const now = ctx.now();
  const big = BigInt(amount);
  const row = stmt<[bigint, number, string, bigint], Balance>(ctx.db.sqlite, DEBIT_SQL).get(big, now, partnerId, big);
  if (!row) {
    refuseIfExhausted(ctx, partnerId);
    throw shortOfFunds(ctx, partnerId, amount);
  }
  insertEntry(ctx, [partnerId, 'debit', -big, row.balance, messageId, note, actor, now]);
  return row.balance;
}

/**
 * What a debit of `amount` would answer, without writing: null when the partner's funds cover
 * it, else the 402 the debit would throw (exhausted funds first, as debit does). For a price
 * quote (POST /v1/messages/quote); the send's own debit stays the check that counts.
 */
export function debitRefusal(ctx: CoreCtx, partnerId: string, amount: number): InsufficientBalanceError | null {
  const f = funds(ctx, partnerId);
  if (!f) return new InsufficientBalanceError();
  if (f.balance + f.credit_limit <= 0) return exhaustedError(f.balance, f.credit_limit);
  if (amount > MAX_MONEY || f.balance - amount < -f.credit_limit) return shortOfFunds(ctx, partnerId, amount);
  return null;
}

/**
 * The funds rule of a send, over the partner's funds as they stand before it: null when they
 * cover `price` (balance + credit_limit > 0 AND balance - price >= -credit_limit), else the 402
 * the debit answers: exhausted funds first, then a price past MAX_MONEY, then the shortfall.
 * `f` undefined: no such partner. The send accept decides with it (src/core/accept.ts), and its
 * debit repeats it in SQL.
 */
export function fundsRefusal(f: Funds | undefined, price: number): InsufficientBalanceError | null {
  if (!f) return new InsufficientBalanceError();
  if (f.balance + f.credit_limit <= 0) return exhaustedError(f.balance, f.credit_limit);
  if (price > MAX_MONEY) {
    // Past 2^53 (a maximal SMS price times its segments) the number is no longer exact: no figure.
    const costs = Number.isSafeInteger(price) ? `costs ${formatMoney(price)}, ` : 'costs ';
    return new InsufficientBalanceError(
      `this message ${costs}more than the largest amount msgd handles (${formatMoney(MAX_MONEY)})`,
      { price },
    );
  }
  if (f.balance - price < -f.credit_limit) return shortOfFundsError(f, price);
  return null;
}

/** The 402 for a price the partner's funds do not cover, saying by how much. */
function shortOfFunds(ctx: CoreCtx, partnerId: string, price: number): InsufficientBalanceError {
  const f = funds(ctx, partnerId);
  if (!f) return new InsufficientBalanceError();
  return shortOfFundsError(f, price);
}

function shortOfFundsError(f: Funds, price: number): InsufficientBalanceError {
  const available = f.balance + f.credit_limit;
  return new InsufficientBalanceError(
    `balance and credit limit do not cover this message: it costs ${formatMoney(price)} and ${formatMoney(available)} is available (balance ${formatMoney(f.balance)} plus credit limit ${formatMoney(f.credit_limit)}); top up to send`,
    { price, balance: f.balance, credit_limit: f.credit_limit },
  );
}

/** Credit a refund for a message; inside the caller's transaction. */
export function refund(
  ctx: CoreCtx,
  partnerId: string,
  amount: number,
  messageId: string,
  note: string,
  actor: string,
): number {
  if (!Number.isSafeInteger(amount) || amount < 0)
    throw new Error(`refund amount must be a non-negative integer: ${amount}`);
  const now = ctx.now();
  const big = BigInt(amount);
  const row = credit(ctx, partnerId, big, now);
  insertEntry(ctx, [partnerId, 'refund', big, row.balance, messageId, note, actor, now]);
  return row.balance;
}

// The same debit and refund inside a store transaction (`q`), on either store: for status
// changes that move money (src/core/message-status.ts). The synchronous forms above stay for
// the synchronous transactions that still call them.

/** debit(), in the caller's store transaction: the same refusals (402), nothing written when refused. */
export async function debitIn(
  q: Queryable,
  ctx: CoreCtx,
  partnerId: string,
  amount: number,
  messageId: string | null,
  actor: string,
  note: string | null = null,
): Promise<number> {
  if (!Number.isSafeInteger(amount) || amount < 0)
    throw new Error(`debit amount must be a non-negative integer: ${amount}`);
  const now = ctx.now();
  const big = BigInt(amount);
  const row =
    amount > MAX_MONEY
      ? undefined
      : await q.get<Balance>(
          sql`UPDATE partners SET balance = balance - ${big}, updated_at = ${now}
               WHERE id = ${partnerId} AND balance + credit_limit > 0 AND balance - ${big} >= -credit_limit
           RETURNING balance`,
        );
  if (!row) {
    const f = await q.get<Funds>(sql`SELECT balance, credit_limit FROM partners WHERE id = ${partnerId}`);
    throw fundsRefusal(f, amount) ?? new InsufficientBalanceError();
  }
  await insertEntryIn(q, [partnerId, 'debit', -big, row.balance, messageId, note, actor, now]);
  return row.balance;
}

/** refund(), in the caller's store transaction. */
export async function refundIn(
  q: Queryable,
  ctx: CoreCtx,
  partnerId: string,
  amount: number,
  messageId: string,
  note: string,
  actor: string,
): Promise<number> {
  if (!Number.isSafeInteger(amount) || amount < 0)
    throw new Error(`refund amount must be a non-negative integer: ${amount}`);
  const now = ctx.now();
  const big = BigInt(amount);
  const row = (await q.get<Balance>(
    sql`UPDATE partners SET balance = balance + ${big}, updated_at = ${now} WHERE id = ${partnerId} RETURNING balance`,
  ))!;
  await insertEntryIn(q, [partnerId, 'refund', big, row.balance, messageId, note, actor, now]);
  return row.balance;
}

async function insertEntryIn(
  q: Queryable,
  [partnerId, kind, amount, balanceAfter, messageId, note, actor, now]: [
    string,
    LedgerKind,
    bigint,
    number,
    string | null,
    string | null,
    string,
    number,
  ],
): Promise<void> {
  await q.run(
    sql`INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, note, actor, created_at)
        VALUES (${partnerId}, ${kind}, ${amount}, ${balanceAfter}, ${messageId}, ${note}, ${actor}, ${now})`,
  );
}

export function topup(
  ctx: CoreCtx,
  partnerRef: string,
  amount: number,
  note: string | null,
  actor: string,
): Promise<LedgerEntry> {
  return ctx.store.transaction((tx) => topupIn(ctx, tx, partnerRef, amount, note, actor));
}

/**
 * topup inside the caller's store transaction (the demo seed's). The balance moves in one
 * conditional UPDATE, so concurrent top-ups never pass the bound whatever their order; refused,
 * with nothing written, if it would take the balance past ±MAX_MONEY.
 */
export async function topupIn(
  ctx: CoreCtx,
  tx: Tx,
  partnerRef: string,
  amount: number,
  note: string | null,
  actor: string,
): Promise<LedgerEntry> {
  if (!Number.isSafeInteger(amount) || amount <= 0) {
    throw invalid('a top-up must be a positive amount', [{ field: 'amount', message: 'must be greater than zero' }]);
  }
  if (amount > MAX_MONEY) throw tooLarge('a top-up', amount);
  const p = await readPartner(tx, partnerRef);
  const entry = await creditEntry(ctx, tx, p, 'topup', amount, note, actor);
  await auditIn(ctx, tx, actor, 'balance.topup', 'partner', p.id, { amount, note });
  return entry;
}

/**
 * A signed correction by the operator (may take the balance anywhere within ±MAX_MONEY; it is
 * audited). One transaction through the store: the balance moves in one conditional UPDATE, so
 * concurrent adjustments never pass the bound whatever their order.
 */
export async function adjust(
  ctx: CoreCtx,
  partnerRef: string,
  amount: number,
  note: string | null,
  actor: string,
): Promise<LedgerEntry> {
  if (!Number.isSafeInteger(amount) || amount === 0) {
    throw invalid('an adjustment must be a non-zero amount', [
      { field: 'amount', message: 'use a negative amount to take money off' },
    ]);
  }
  if (!inMoneyRange(amount)) throw tooLarge('an adjustment', amount);
  if (!note) throw invalid('an adjustment needs a note saying why', [{ field: 'note', message: 'required' }]);
  return ctx.store.transaction(async (tx) => {
    const p = await readPartner(tx, partnerRef);
    const entry = await creditEntry(ctx, tx, p, 'adjustment', amount, note, actor);
    await auditIn(ctx, tx, actor, 'balance.adjust', 'partner', p.id, { amount, note });
    return entry;
  });
}

function tooLarge(what: string, amount: number) {
  return invalid(`${what} can be at most ${formatMoney(MAX_MONEY)} either way`, [
    { field: 'amount', message: `${formatMoney(amount)} is out of range` },
  ]);
}

/** The 400 for a top-up or adjustment that would take `balance` past ±MAX_MONEY. */
function pastBound(p: { slug: string; currency: string }, kind: LedgerKind, amount: number, balance: number) {
  const room = amount > 0 ? MAX_MONEY - balance : MAX_MONEY + balance;
  return invalid(
    `this ${kind} would take the balance of ${p.slug} from ${formatMoney(balance)} to ${formatMoney(balance + amount)} ${p.currency}, past the largest balance msgd keeps (${formatMoney(MAX_MONEY)} either way)`,
    [
      {
        field: 'amount',
        message: `at most ${formatMoney(Math.max(0, room))} ${amount > 0 ? 'can be added' : 'can be taken off'}`,
      },
    ],
  );
}

/**
 * A top-up's or adjustment's entry, in `tx`: the balance moves by `amount` in one conditional
 * UPDATE; refused, with nothing written, if that would take it past ±MAX_MONEY.
 */
async function creditEntry(
  ctx: CoreCtx,
  tx: Tx,
  p: { id: string; slug: string; currency: string },
  kind: 'topup' | 'adjustment',
  amount: number,
  note: string | null,
  actor: string,
): Promise<LedgerEntry> {
  const now = ctx.now();
  const big = BigInt(amount);
  const row = await tx.get<Balance>(
    sql`UPDATE partners SET balance = balance + ${big}, updated_at = ${now}
         WHERE id = ${p.id} AND balance + ${big} BETWEEN ${sql.raw(String(-MAX_MONEY))} AND ${sql.raw(String(MAX_MONEY))}
     RETURNING balance`,
  );
  if (!row) {
    const f = (await tx.get<Balance>(sql`SELECT balance FROM partners WHERE id = ${p.id}`))!;
    throw pastBound(p, kind, amount, f.balance);
  }
  return (await tx.get<LedgerEntry>(
    sql`INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, note, actor, created_at)
        VALUES (${p.id}, ${kind}, ${big}, ${row.balance}, NULL, ${note}, ${actor}, ${now})
        RETURNING *`,
  ))!;
}

/**
 * A partner's entries, newest first (by id, which only grows): at most `limit` (50, up to
 * 1000), before the entry id `before` when given (the next, older page).
 */
export async function listLedger(
  ctx: CoreCtx,
  partnerRef: string,
  opts: { limit?: number; before?: number } = {},
): Promise<{ partner: Partner; entries: LedgerEntry[] }> {
  const p = await readPartner(ctx.store, partnerRef);
  const limit = Math.max(1, Math.min(opts.limit ?? 50, 1000));
  const entries = opts.before
    ? await ctx.store.all<LedgerEntry>(
        sql`SELECT * FROM ledger_entries WHERE partner_id = ${p.id} AND id < ${opts.before} ORDER BY id DESC LIMIT ${limit}`,
      )
    : await ctx.store.all<LedgerEntry>(
        sql`SELECT * FROM ledger_entries WHERE partner_id = ${p.id} ORDER BY id DESC LIMIT ${limit}`,
      );
  return { partner: p, entries };
}

export function ledgerEntryJson(e: LedgerEntry, currency: string) {
  return {
    id: e.id,
    partner_id: e.partner_id,
    kind: e.kind,
    amount: moneyJson(e.amount, currency),
    balance_after: moneyJson(e.balance_after, currency),
    message_id: e.message_id,
    note: e.note,
    actor: e.actor,
    created_at: iso(e.created_at),
  };
}

export interface LedgerMismatch {
  partner_id: string;
  slug: string;
  balance: bigint;
  sum_of_entries: bigint;
  last_balance_after: bigint | null;
}

interface MismatchRow {
  partner_id: string;
  slug: string;
  balance: string;
  sum_of_entries: string;
  last_balance_after: string | null;
}

/**
 * Every partner's balance must equal the sum of its entries and its last entry's balance_after.
 * Compared in SQL (64-bit integers on SQLite, bigint and numeric on PostgreSQL), and the
 * mismatches read as text into BigInt: a sum can pass 2^53, where a JS number would round a
 * difference of one micro-unit away.
 */
export async function verifyLedger(
  ctx: CoreCtx,
): Promise<{ ok: boolean; partners: number; mismatches: LedgerMismatch[] }> {
  const partners = (await ctx.store.get<{ n: number }>(sql`SELECT COUNT(*) AS n FROM partners`))!.n;
  const rows = await ctx.store.all<MismatchRow>(
    sql`SELECT p.id AS partner_id, p.slug,
               CAST(p.balance AS TEXT) AS balance,
               CAST(COALESCE(s.total, 0) AS TEXT) AS sum_of_entries,
               CAST(l.balance_after AS TEXT) AS last_balance_after
          FROM partners p
          LEFT JOIN (SELECT partner_id, SUM(amount) AS total FROM ledger_entries GROUP BY partner_id) s
            ON s.partner_id = p.id
          LEFT JOIN ledger_entries l
            ON l.id = (SELECT MAX(e.id) FROM ledger_entries e WHERE e.partner_id = p.id)
         WHERE p.balance <> COALESCE(s.total, 0) OR (l.balance_after IS NOT NULL AND l.balance_after <> p.balance)
         ORDER BY p.slug, p.id`,
  );
  const mismatches = rows.map((r) => ({
    partner_id: r.partner_id,
    slug: r.slug,
    balance: BigInt(r.balance),
    sum_of_entries: BigInt(r.sum_of_entries),
    last_balance_after: r.last_balance_after === null ? null : BigInt(r.last_balance_after),
  }));
  return { ok: mismatches.length === 0, partners, mismatches };
}
