import { ledgerSettleMs } from '../db/dialect.js';
import type { Row } from '../db/rows.js';
import type { ledgerEntries, spendDaily } from '../db/schema.js';
import { render, sql } from '../db/sql.js';
import type { CoreCtx } from './context.js';

// Spend per partner and UTC day, for the console's chart. Rolled up from the ledger rows added
// since a watermark (meta.spend_rollup_ledger_id), by a maintenance task every minute and
// before the Overview reads it: the send path writes nothing more, and a chart over a ledger
// with one debit per message reads 30 rows, not millions.
//
// The watermark only moves past settled ids. On PostgreSQL ids come from a sequence as rows are
// inserted, and transactions commit in any order: a debit with a lower id can become visible
// after a higher one was rolled up, and a watermark past it would skip it forever. A row older
// than the settle margin (db/dialect.ts `ledgerSettleMs`) had its id drawn more than the margin
// ago, and so had every lower id: their transactions are over. So a rollup reads the rows past
// the watermark in id order and takes them up to the last one older than the margin (a younger
// row before it is taken too: it is settled, by its id). On SQLite the margin is 0 and every
// visible row is settled. The send path writes nothing for it.

const WATERMARK = 'spend_rollup_ledger_id';
/** Rows per transaction, so a first rollup over a large ledger never holds the writer long. */
const BATCH = 20_000;

type Entry = Pick<Row<typeof ledgerEntries>, 'id' | 'partner_id' | 'kind' | 'amount' | 'created_at'>;

/** Whether the ledger has rows past the watermark: one seek on the primary key, no lock taken. */
const pendingQuery = (settledBefore: number | null) =>
  sql`SELECT CASE WHEN EXISTS (SELECT 1 FROM ledger_entries
        WHERE id > COALESCE((SELECT CAST(value AS BIGINT) FROM meta WHERE key = ${WATERMARK}), 0)
        ${settledBefore === null ? sql`` : sql`AND created_at < ${settledBefore}`}) THEN 1 ELSE 0 END AS pending`;
/** The pending check's text on SQLite, for its query plan (test/core/query-plans.test.ts). */
export const SPEND_PENDING_SQL = render(pendingQuery(null), 'sqlite').text;

/** Fold the ledger's new debits and refunds into spend_daily; returns the entries read. */
export async function rollUpSpend(ctx: CoreCtx): Promise<number> {
  const margin = ledgerSettleMs(ctx.store.dialect);
  // Rows at or after this are not settled by their own age (null: every visible row is).
  const settledBefore = margin > 0 ? ctx.now() - margin : null;
  // Every Overview folds first; most find nothing new, and a write transaction for nothing
  // would queue the page behind any writer holding the lock (msgctl, a backup, a send batch).
  const pending = (await ctx.store.get<{ pending: number }>(pendingQuery(settledBefore)))?.pending;
  if (pending === 0) return 0;
  let total = 0;
  for (;;) {
    const { taken, more } = await ctx.store.transaction(async (tx) => {
      // The watermark's row, written first: on PostgreSQL that holds it locked until commit, so
      // two rollups at once (the minute's task and an Overview) take turns, and the second reads
      // the watermark the first moved: no entry is counted twice. SQLite's transactions take
      // turns already.
      await tx.run(
        sql`INSERT INTO meta (key, value) VALUES (${WATERMARK}, '0') ON CONFLICT (key) DO UPDATE SET value = meta.value`,
      );
      const mark = (await tx.get<{ value: string }>(sql`SELECT value FROM meta WHERE key = ${WATERMARK}`))!.value;
      const read = await tx.all<Entry>(
        sql`SELECT id, partner_id, kind, amount, created_at FROM ledger_entries
             WHERE id > ${Number(mark)} ORDER BY id LIMIT ${BATCH}`,
      );
      let settled = read.length;
      if (settledBefore !== null) while (settled > 0 && read[settled - 1].created_at >= settledBefore) settled--;
      const rows = read.slice(0, settled);
      if (rows.length === 0) return { taken: 0, more: false };
      // Summed as BigInt and bound as integers: a day's spend is exact past 2^53.
      const sums = new Map<string, { partner: string; day: string; spend: bigint; messages: number }>();
      for (const r of rows) {
        if (r.kind !== 'debit' && r.kind !== 'refund') continue;
        const day = new Date(r.created_at).toISOString().slice(0, 10);
        const key = `${r.partner_id}\u0000${day}`;
        let s = sums.get(key);
        if (!s) sums.set(key, (s = { partner: r.partner_id, day, spend: 0n, messages: 0 }));
        // Debits are negative amounts: spend is their opposite, and a refund takes it back.
        s.spend -= BigInt(r.amount);
        if (r.kind === 'debit') s.messages++;
      }
      for (const s of sums.values()) {
        await tx.run(
          sql`INSERT INTO spend_daily (partner_id, day, spend, messages) VALUES (${s.partner}, ${s.day}, ${s.spend}, ${s.messages})
              ON CONFLICT (partner_id, day) DO UPDATE
                SET spend = spend_daily.spend + excluded.spend, messages = spend_daily.messages + excluded.messages`,
        );
      }
      await tx.run(sql`UPDATE meta SET value = ${String(rows[rows.length - 1].id)} WHERE key = ${WATERMARK}`);
      return { taken: rows.length, more: rows.length === BATCH };
    });
    total += taken;
    if (!more) return total;
  }
}

export type SpendDay = Omit<Row<typeof spendDaily>, 'partner_id'>;

/** The last `days` UTC days up to today, oldest first, with zero for days without spend. */
export async function spendSeries(ctx: CoreCtx, partnerId: string, days = 30): Promise<SpendDay[]> {
  const today = Date.UTC(
    new Date(ctx.now()).getUTCFullYear(),
    new Date(ctx.now()).getUTCMonth(),
    new Date(ctx.now()).getUTCDate(),
  );
  const first = new Date(today - (days - 1) * 86_400_000).toISOString().slice(0, 10);
  // The sum read as text: a day past 2^53 micro-units is exact in the table, and reads on both
  // stores (as a number, for the chart) rather than failing on PostgreSQL.
  const rows = (
    await ctx.store.all<{ day: string; spend: string; messages: number }>(
      sql`SELECT day, CAST(spend AS TEXT) AS spend, messages FROM spend_daily
           WHERE partner_id = ${partnerId} AND day >= ${first} ORDER BY day`,
    )
  ).map((r) => ({ day: r.day, spend: Number(r.spend), messages: r.messages }));
  const byDay = new Map(rows.map((r) => [r.day, r]));
  const out: SpendDay[] = [];
  for (let i = days - 1; i >= 0; i--) {
    const day = new Date(today - i * 86_400_000).toISOString().slice(0, 10);
    out.push(byDay.get(day) ?? { day, spend: 0, messages: 0 });
  }
  return out;
}

const DAY_MS = 86_400_000;

/**
 * Today's spend per partner (debits less refunds since 00:00 UTC), for msgctl's console, which
 * polls it. Summed incrementally by ledger id: each refresh reads only the entries written
 * since the last one (and, on PostgreSQL, those of the last minute again: see the refresh), so
 * a partner with a million sends today costs one pass, once.
 */
export class SpendToday {
  private day = -1;
  private lastId = 0;
  /** Exact (BigInt): read as text from SQL, where a sum past 2^53 stays exact on both stores. */
  private sums = new Map<string, bigint>();

  constructor(private readonly ctx: CoreCtx) {}

  /** The first ledger id written at or after `since`: ids grow with time, so a binary search. */
  private async firstIdSince(since: number): Promise<number> {
    const store = this.ctx.store;
    const range = (await store.get<{ lo: number | null; hi: number | null }>(
      sql`SELECT MIN(id) AS lo, MAX(id) AS hi FROM ledger_entries`,
    ))!;
    if (range.lo === null || range.hi === null) return 1;
    let lo = range.lo;
    let hi = range.hi + 1;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const row = await store.get<{ id: number; created_at: number }>(
        sql`SELECT id, created_at FROM ledger_entries WHERE id >= ${mid} ORDER BY id LIMIT 1`,
      );
      if (!row || row.created_at >= since) hi = mid;
      else lo = row.id + 1;
    }
    return lo;
  }

  /** Today's spend per partner id, in micro-units. */
  async refresh(now = this.ctx.now()): Promise<Map<string, number>> {
    const day = Math.floor(now / DAY_MS);
    if (day !== this.day) {
      this.day = day;
      this.sums = new Map();
      this.lastId = (await this.firstIdSince(day * DAY_MS)) - 1;
    }
    // Only settled ids join the running sums (as for the rollup above): on PostgreSQL an entry
    // with a lower id can become visible after a higher one. The entries past the last settled
    // one are summed again at each refresh, so today's figure is current all the same.
    const margin = ledgerSettleMs(this.ctx.store.dialect);
    const settled = (await this.ctx.store.get<{ last: number | null }>(
      sql`SELECT MAX(id) AS last FROM ledger_entries
           WHERE id > ${this.lastId} ${margin > 0 ? sql`AND created_at < ${now - margin}` : sql``}`,
    ))!.last;
    const mark = settled ?? this.lastId;
    const rows = await this.ctx.store.all<{ partner_id: string; spend: string; settled: number }>(
      sql`SELECT partner_id, CAST(-SUM(CASE WHEN kind IN ('debit', 'refund') THEN amount ELSE 0 END) AS TEXT) AS spend, settled
            FROM (SELECT partner_id, kind, amount, CASE WHEN id <= ${mark} THEN 1 ELSE 0 END AS settled
                    FROM ledger_entries WHERE id > ${this.lastId}) AS e
           GROUP BY partner_id, settled`,
    );
    const out = new Map(this.sums);
    for (const r of rows) {
      if (r.settled === 1) this.sums.set(r.partner_id, (this.sums.get(r.partner_id) ?? 0n) + BigInt(r.spend));
      out.set(r.partner_id, (out.get(r.partner_id) ?? 0n) + BigInt(r.spend));
    }
    this.lastId = mark;
    return new Map([...out].map(([id, v]) => [id, Number(v)]));
  }
}
