import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPg, type PgStore } from '../../src/db/pg/store.js';
import { sql } from '../../src/db/sql.js';
import { RateLimiter, SharedRateLimiter, type Verdict } from '../../src/http/rate-limit.js';
import { migratedDatabase } from './helpers.js';

// The API's request limits on PostgreSQL (src/http/rate-limit.ts, src/db/api-rate.ts): the same
// GCRA as one msgd's in-memory limiter, its state in api_rate_limits, so that several msgd on the
// database share each limit. Two limiters over two pools stand for two instances; a clock the
// test moves stands for time.

const db = migratedDatabase();
const stores: PgStore[] = [];
const logger = { warn: () => {} };
beforeAll(() => {
  stores.push(openPg(db.url, { logger, poolSize: 2 }), openPg(db.url, { logger, poolSize: 2 }));
});
afterAll(async () => {
  for (const s of stores) await s.close();
});

let keys = 0;
const newKey = () => `tok:test_${++keys}`;

/** `n` requests on `key` read in one turn, by the shared limiter. */
const together = (l: SharedRateLimiter, key: string, perMinute: number, n: number) =>
  Promise.all(Array.from({ length: n }, () => l.take(key, perMinute)));
/** The same, one after the other, by the in-memory limiter. */
const inMemory = (l: RateLimiter, key: string, perMinute: number, n: number) =>
  Array.from({ length: n }, () => l.take(key, perMinute));
const allowed = (vs: Verdict[]) => vs.filter((v) => v.allowed).length;

describe('the shared limiter', () => {
  it('answers every request as the in-memory limiter does: verdicts and headers', async () => {
    const clock = { now: Date.now() };
    const now = () => clock.now;
    const shared = new SharedRateLimiter(stores[0], now);
    const memory = new RateLimiter(now);
    const a = newKey();
    const b = newKey();
    // 10 a minute (one each 6 s, a burst of 10), and 8 a minute (one each 7.5 s).
    const steps: [key: string, perMinute: number, n: number, advanceMs: number][] = [
      [a, 10, 15, 0],
      [a, 10, 3, 6_000],
      [b, 8, 9, 0],
      [a, 10, 1, 5_999],
      [a, 10, 2, 1],
      [b, 8, 4, 15_000],
      [a, 10, 12, 120_000],
    ];
    for (const [key, perMinute, n, advanceMs] of steps) {
      clock.now += advanceMs;
      const got = await together(shared, key, perMinute, n);
      expect(got, `${key} after ${advanceMs} ms`).toEqual(inMemory(memory, key, perMinute, n));
    }
    // Whole batches: one statement (and one more for each batch with a key new to it).
    expect(shared.stats).toEqual({ batches: steps.length, requests: 46 });
  });

  it('shares a limit between instances: 10 a minute is 10 whichever instance takes them', async () => {
    const clock = { now: Date.now() };
    const one = new SharedRateLimiter(stores[0], () => clock.now);
    const two = new SharedRateLimiter(stores[1], () => clock.now);
    const key = newKey();
    const [x, y] = await Promise.all([together(one, key, 10, 8), together(two, key, 10, 8)]);
    expect(allowed(x) + allowed(y)).toBe(10);
    // Which instance got there first took its 8; the other the 2 left.
    expect([allowed(x), allowed(y)].sort()).toEqual([2, 8]);
    const refused = [...x, ...y].filter((v) => !v.allowed);
    for (const v of refused) expect(v).toMatchObject({ remaining: 0, retryAfterS: 6, resetS: 60 });
    clock.now += 6_000;
    expect((await together(two, key, 10, 2)).map((v) => v.allowed)).toEqual([true, false]);
  });

  it("counts Retry-After from the key's time when another instance's later batch took the last request first", async () => {
    // Instance one's batch began 5 ms after instance two's, but reached the key's row first (two
    // was still making its rows, or waiting for the row) and took all 6 of 6 a minute.
    const t = Date.now();
    const one = new SharedRateLimiter(stores[0], () => t + 5);
    const two = new SharedRateLimiter(stores[1], () => t);
    const key = newKey();
    expect(allowed(await together(one, key, 6, 6))).toBe(6);
    const [v] = await together(two, key, 6, 1);
    // One request every 10 s: the next conforms 10 s after the key's last one, not 10 s and the
    // 5 ms two's batch began earlier.
    expect(v).toMatchObject({ allowed: false, remaining: 0, retryAfterS: 10, resetS: 60 });
  });

  it('takes the requests of a busy turn in one statement', async () => {
    const shared = new SharedRateLimiter(stores[0]);
    const keys = Array.from({ length: 20 }, newKey);
    const got = await Promise.all(Array.from({ length: 500 }, (_, i) => shared.take(keys[i % keys.length], 600)));
    expect(allowed(got)).toBe(500);
    expect(shared.stats).toEqual({ batches: 1, requests: 500 });
  });

  it('makes a key again when its row was pruned meanwhile by another instance', async () => {
    const clock = { now: Date.now() };
    const shared = new SharedRateLimiter(stores[0], () => clock.now);
    const key = newKey();
    expect(allowed(await together(shared, key, 2, 3))).toBe(2);
    // Another instance prunes the row (its TAT long passed by its clock).
    await stores[1].run(sql`DELETE FROM api_rate_limits WHERE key = ${key}`);
    expect(allowed(await together(shared, key, 2, 3))).toBe(2);
    const row = await stores[1].get<{ tat: number }>(sql`SELECT tat FROM api_rate_limits WHERE key = ${key}`);
    expect(row!.tat).toBe(clock.now + 60_000);
  });

  it('prunes the rows whose time has passed, once a minute', async () => {
    const clock = { now: Date.now() };
    const shared = new SharedRateLimiter(stores[0], () => clock.now);
    const old = newKey();
    await together(shared, old, 600, 1);
    clock.now += 2 * 60_000 + 1;
    const live = newKey();
    await together(shared, live, 600, 1);
    const keysLeft = async () =>
      (
        await stores[0].all<{ key: string }>(
          sql`SELECT key FROM api_rate_limits WHERE key = ANY(${[old, live]}::text[]) ORDER BY key`,
        )
      ).map((r) => r.key);
    await expect.poll(keysLeft).toEqual([live]);
  });
});
