import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LoginThrottle, PER_ACCOUNT, PER_ADDRESS, WINDOW_MS } from '../../src/core/login-throttle.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The console's login throttle on both stores: the limits, the window, forgiveness after a
// login, and the concurrency rule (attempts raced at once get no more places than the limit).

let t: StoreCtx;
let throttle: LoginThrottle;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  throttle = new LoginThrottle(t.ctx);
});
afterEach(() => t.close());

/** Every connection of PostgreSQL's pool open first, so the attempts really run side by side. */
const openPool = () =>
  Promise.all(Array.from({ length: 4 }, () => t.ctx.store.transaction((tx) => tx.get(sql`SELECT 1 AS one`))));

const oks = (r: { ok: boolean }[]) => r.filter((a) => a.ok).length;

describe('login throttle', () => {
  it('admits 5 attempts at one account, refuses the 6th until the oldest leaves the window', async () => {
    const ids: number[] = [];
    for (let i = 0; i < PER_ACCOUNT; i++) {
      const a = await throttle.begin('Ann@Example.com', `192.0.2.${i}`);
      expect(a.ok).toBe(true);
      if (a.ok) ids.push(a.attempt);
      t.clock.now += 1_000;
    }
    expect(new Set(ids).size).toBe(PER_ACCOUNT);
    // Another spelling of the same address is the same account.
    const refused = await throttle.begin(' ann@example.COM ', '192.0.2.99');
    expect(refused).toEqual({ ok: false, waitMs: WINDOW_MS - PER_ACCOUNT * 1_000 });
    t.clock.now += WINDOW_MS - PER_ACCOUNT * 1_000;
    expect((await throttle.begin('ann@example.com', '192.0.2.99')).ok).toBe(true);
    // Attempts that left the window are pruned.
    const left = await t.ctx.store.get<{ n: number }>(sql`SELECT COUNT(*) AS n FROM login_attempts`);
    expect(left?.n).toBe(PER_ACCOUNT);
  });

  it('gives 30 attempts raced at one account exactly 5 places', async () => {
    await openPool();
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => throttle.begin('race@example.com', `198.51.100.${i}`)),
    );
    expect(oks(answers)).toBe(PER_ACCOUNT);
    const rows = await t.ctx.store.get<{ n: number }>(
      sql`SELECT COUNT(*) AS n FROM login_attempts WHERE account = ${'race@example.com'}`,
    );
    expect(rows?.n).toBe(PER_ACCOUNT);
  });

  it('gives 40 attempts raced from one address at many accounts exactly 20 places', async () => {
    await openPool();
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => throttle.begin(`user${i}@example.com`, '203.0.113.7')),
    );
    expect(oks(answers)).toBe(PER_ADDRESS);
  });

  it('a login clears the account count and forgives its own attempts, not the failures', async () => {
    const failed = await throttle.begin('bob@example.com', '203.0.113.1');
    const good = await throttle.begin('bob@example.com', '203.0.113.2');
    expect(failed.ok && good.ok).toBe(true);
    if (!good.ok) return;
    await throttle.succeeded('BOB@example.com', [good.attempt]);
    const rows = await t.ctx.store.all<{ account: string | null; address: string }>(
      sql`SELECT account, address FROM login_attempts ORDER BY id`,
    );
    expect(rows).toEqual([{ account: null, address: '203.0.113.1' }]);
    for (let i = 0; i < PER_ACCOUNT; i++)
      expect((await throttle.begin('bob@example.com', '203.0.113.3')).ok).toBe(true);
    await throttle.succeeded('bob@example.com', []);
    expect((await throttle.begin('bob@example.com', '203.0.113.3')).ok).toBe(true);
  });
});
