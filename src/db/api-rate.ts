import type { Store } from './query.js';
import { sql } from './sql.js';

// The API's request limits shared by several msgd on one PostgreSQL (src/http/rate-limit.ts
// decides; this file holds its statements). GCRA as src/lib/gcra.ts computes it, one row per
// key (api_rate_limits, unlogged) holding the key's theoretical arrival time (TAT). A batch of
// requests is one UPDATE for all its keys: each key takes as many of its requests as conform,
// in one row lock, whichever instance asks.

export interface RateAsk {
  key: string;
  /** Requests on this key in the batch. */
  n: number;
  /** ms between conforming requests (60,000 / the limit per minute). */
  intervalMs: number;
  /** The burst, in ms of TAT ahead of now (the window: 60,000). */
  toleranceMs: number;
}

export interface RateTaken {
  /** The key's TAT after the batch. */
  tat: number;
  /** How many of the batch's requests on the key conform (the first `taken`). */
  taken: number;
}

// floor() of a ratio that should be whole may land a hair below it in floating point: the
// epsilon keeps a request exactly on its boundary conforming, as the in-memory GCRA lets it.
const TAKE_SQL = (now: number) =>
  sql`LEAST(u.n, GREATEST(0, floor((${now}::float8 + u.tol - GREATEST(r.tat, ${now}::float8)) / u.iv + 1e-9)))`;

/**
 * Takes the batch's requests at `now` (ms): for each key asked, its TAT after them and how many
 * conform. One statement per batch, and one more first when the caller names keys it has not
 * asked before (`fresh`: their rows are made). A key missing from the answer had its row pruned
 * meanwhile: it is made and asked again.
 */
export async function takeApiRate(
  store: Store,
  now: number,
  asks: readonly RateAsk[],
  fresh: readonly string[] = [],
): Promise<Map<string, RateTaken>> {
  const out = new Map<string, RateTaken>();
  let pending = asks;
  for (let round = 0; round < 2 && pending.length > 0; round++) {
    const make = round === 0 ? fresh : pending.map((a) => a.key);
    if (make.length > 0) await ensureRows(store, make);
    const take = TAKE_SQL(now);
    const rows = await store.all<{ key: string; tat: number; taken: number }>(
      sql`UPDATE api_rate_limits r SET taken = ${take}, tat = GREATEST(r.tat, ${now}::float8) + ${take} * u.iv
            FROM unnest(${pending.map((a) => a.key)}::text[], ${pending.map((a) => a.n)}::bigint[],
                        ${pending.map((a) => a.intervalMs)}::float8[], ${pending.map((a) => a.toleranceMs)}::float8[])
                 AS u(key, n, iv, tol)
           WHERE r.key = u.key
       RETURNING r.key, r.tat, r.taken`,
    );
    for (const r of rows) out.set(r.key, { tat: Number(r.tat), taken: Number(r.taken) });
    pending = pending.filter((a) => !out.has(a.key));
  }
  if (pending.length > 0) throw new Error(`api_rate_limits: no row for ${pending.map((a) => a.key).join(', ')}`);
  return out;
}

/** Rows for keys the table may not have yet (a TAT of 0: no request before). */
export async function ensureRows(store: Store, keys: readonly string[]): Promise<void> {
  await store.run(
    sql`INSERT INTO api_rate_limits (key, tat, taken) SELECT k, 0, 0 FROM unnest(${keys}::text[]) AS k
        ON CONFLICT (key) DO NOTHING`,
  );
}

/** Deletes the keys whose TAT is before `before`: such a key conforms as a new one would. */
export async function pruneApiRate(store: Store, before: number): Promise<number> {
  return (await store.run(sql`DELETE FROM api_rate_limits WHERE tat < ${before}::float8`)).changes;
}
