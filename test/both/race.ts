import type { Sql } from '../../src/db/sql.js';
import { sql } from '../../src/db/sql.js';
import type { StoreCtx } from './helpers.js';

// Races that READ COMMITTED lets through only when the racers interleave: each racer reads a
// row, then writes it. On PostgreSQL the row is held locked (`lock`, a SELECT … FOR UPDATE) by
// a transaction of the test's own until every racer waits on it, so each racer has read the
// row as it stood before any of them wrote, whatever the timing. On SQLite the store runs the
// racers' transactions one after the other: the same calls, nothing to hold.

/** Runs `racers` side by side, each read-then-write held at `lock` until all wait there; their outcomes. */
export async function raceOnRow(
  t: StoreCtx,
  lock: Sql,
  racers: (() => Promise<unknown>)[],
): Promise<PromiseSettledResult<unknown>[]> {
  if (t.dialect === 'sqlite') return Promise.allSettled(racers.map((r) => r()));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const holder = t.ctx.store.transaction(async (tx) => {
    await tx.all(lock);
    locked();
    await released;
  });
  await isLocked;
  const outcomes = Promise.allSettled(racers.map((r) => r()));
  try {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const row = await t.ctx.store.get<{ n: number }>(
        sql`SELECT CAST(count(*) AS BIGINT) AS n FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      if (row!.n >= racers.length) break;
      if (Date.now() > deadline) throw new Error(`only ${row!.n} of ${racers.length} racers reached the locked row`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  } finally {
    release();
    await holder;
  }
  return outcomes;
}
