import type { Row } from '../db/rows.js';
import type { ledgerEntries, spendDaily } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
import type { CoreCtx } from './context.js';

// Spend per partner and UTC day, for the console's chart. Rolled up from the ledger rows added
// since a watermark (meta.spend_rollup_ledger_id), by a maintenance task every minute and
// before the Overview reads it: the send path writes nothing more, and a chart over a ledger
// with one debit per message reads 30 rows, not millions.

const WATERMARK = 'spend_rollup_ledger_id';
/** Rows per transaction, so a first rollup over a large ledger never holds the writer long. */
const BATCH = 20_000;

type Entry = Pick<Row<typeof ledgerEntries>, 'id' | 'partner_id' | 'kind' | 'amount' | 'created_at'>;

/** Whether the ledger has rows past the watermark: one seek on the primary key, no lock taken. */
export const SPEND_PENDING_SQL = `SELECT EXISTS (SELECT 1 FROM ledger_entries
  WHERE id > COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?), 0)) AS pending`;

/** Fold the ledger's new debits and refunds into spend_daily; returns the entries read. */
export function rollUpSpend(ctx: CoreCtx): number {
  const db = ctx.db.sqlite;
  // Every Overview folds first; most find nothing new, and a write transaction for nothing
  // would queue the page behind any writer holding the lock (msgctl, a backup, a send batch).
  const pending = stmt<[string], { pending: number }>(db, SPEND_PENDING_SQL).get(WATERMARK)?.pending;
  if (pending === 0) return 0;
  let total = 0;
  for (;;) {
    const read = db
      .transaction(() => {
        const mark = Number(
          stmt<[string], { value: string }>(db, 'SELECT value FROM meta WHERE key = ?').get(WATERMARK)?.value ?? 0,
        );
        const rows = stmt<[number, number], Entry>(
          db,
          'SELECT id, partner_id, kind, amount, created_at FROM ledger_entries WHERE id > ? ORDER BY id LIMIT ?',
        ).all(mark, BATCH);
        if (rows.length === 0) return 0;
        const sums = new Map<string, { partner: string; day: string; spend: number; messages: number }>();
        for (const r of rows) {
          if (r.kind !== 'debit' && r.kind !== 'refund') continue;
          const day = new Date(r.created_at).toISOString().slice(0, 10);
          const key = `${r.partner_id}\u0000${day}`;
          let s = sums.get(key);
          if (!s) sums.set(key, (s = { partner: r.partner_id, day, spend: 0, messages: 0 }));
          // Debits are negative amounts: spend is their opposite, and a refund takes it back.
          s.spend -= r.amount;
          if (r.kind === 'debit') s.messages++;
        }
        const upsert = stmt(
          db,
          `INSERT INTO spend_daily (partner_id, day, spend, messages) VALUES (?, ?, ?, ?)
           ON CONFLICT (partner_id, day) DO UPDATE SET spend = spend + excluded.spend, messages = messages + excluded.messages`,
        );
        for (const s of sums.values()) upsert.run(s.partner, s.day, s.spend, s.messages);
        stmt(
          db,
          'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
        ).run(WATERMARK, String(rows[rows.length - 1].id));
        return rows.length;
      })
      .immediate();
    total += read;
    if (read < BATCH) return total;
  }
}

export type SpendDay = Omit<Row<typeof spendDaily>, 'partner_id'>;

/** The last `days` UTC days up to today, oldest first, with zero for days without spend. */
export function spendSeries(ctx: CoreCtx, partnerId: string, days = 30): SpendDay[] {
  const today = Date.UTC(
    new Date(ctx.now()).getUTCFullYear(),
    new Date(ctx.now()).getUTCMonth(),
    new Date(ctx.now()).getUTCDate(),
  );
  const first = new Date(today - (days - 1) * 86_400_000).toISOString().slice(0, 10);
  const rows = stmt<[string, string], SpendDay>(
    ctx.db.sqlite,
    'SELECT day, spend, messages FROM spend_daily WHERE partner_id = ? AND day >= ? ORDER BY day',
  ).all(partnerId, first);
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
 * since the last one, so a partner with a million sends today costs one pass, once.
 */
export class SpendToday {
  private day = -1;
  private lastId = 0;
  private sums = new Map<string, number>();

  constructor(private readonly ctx: CoreCtx) {}

  /** The first ledger id written at or after `since`: ids grow with time, so a binary search. */
  private firstIdSince(since: number): number {
    const db = this.ctx.db.sqlite;
    const range = stmt<[], { lo: number | null; hi: number | null }>(
      db,
      'SELECT MIN(id) AS lo, MAX(id) AS hi FROM ledger_entries',
    ).get()!;
    if (range.lo === null || range.hi === null) return 1;
    const at = stmt<[number], { id: number; created_at: number }>(
      db,
      'SELECT id, created_at FROM ledger_entries WHERE id >= ? ORDER BY id LIMIT 1',
    );
    let lo = range.lo;
    let hi = range.hi + 1;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const row = at.get(mid);
      if (!row || row.created_at >= since) hi = mid;
      else lo = row.id + 1;
    }
    return lo;
  }

  refresh(now = this.ctx.now()): Map<string, number> {
    const day = Math.floor(now / DAY_MS);
    if (day !== this.day) {
      this.day = day;
      this.sums = new Map();
      this.lastId = this.firstIdSince(day * DAY_MS) - 1;
    }
    const rows = stmt<[number], { partner_id: string; spend: number; last: number }>(
      this.ctx.db.sqlite,
      `SELECT partner_id, -SUM(CASE WHEN kind IN ('debit', 'refund') THEN amount ELSE 0 END) AS spend, MAX(id) AS last
         FROM ledger_entries WHERE id > ? GROUP BY partner_id`,
    ).all(this.lastId);
    for (const r of rows) {
      this.sums.set(r.partner_id, (this.sums.get(r.partner_id) ?? 0) + r.spend);
      if (r.last > this.lastId) this.lastId = r.last;
    }
    return this.sums;
  }
}
