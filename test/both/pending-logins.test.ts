import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  endPendingLogin,
  openPendingLogin,
  PENDING_LOGIN_MS,
  startPendingLogin,
} from '../../src/core/pending-logins.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The console's pending logins (password right, second factor to come), on both stores.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await t.exec(
    `INSERT INTO users (id, email, password_hash, status, sessions_valid_after, created_at, updated_at)
     VALUES ('usr_1', 'a@example.com', NULL, 'active', 0, 0, 0)`,
  );
});
afterEach(() => t.close());

describe('pending logins', () => {
  it('opens a login by its secret until it is used once or expires', async () => {
    const user = 'usr_1';
    const { secret } = await startPendingLogin(t.ctx, user, 7);
    const p = await openPendingLogin(t.ctx, secret);
    expect(p).toMatchObject({ userId: user, attempt: 7, expiresAt: t.clock.now + PENDING_LOGIN_MS });
    expect(await openPendingLogin(t.ctx, `${secret}x`)).toBeNull();
    expect(await openPendingLogin(t.ctx, undefined)).toBeNull();
    expect(await endPendingLogin(t.ctx, p!.id)).toBe(true);
    expect(await endPendingLogin(t.ctx, p!.id)).toBe(false);
    expect(await openPendingLogin(t.ctx, secret)).toBeNull();

    const second = await startPendingLogin(t.ctx, user, 8);
    t.clock.now += PENDING_LOGIN_MS;
    expect(await openPendingLogin(t.ctx, second.secret)).toBeNull();
    // The next login clears the expired ones.
    await startPendingLogin(t.ctx, user, 9);
    const left = await t.ctx.store.all<{ attempt: number }>(sql`SELECT attempt FROM ui_pending_logins`);
    expect(left).toEqual([{ attempt: 9 }]);
  });

  it('ends a login once when two requests race to use it', async () => {
    const { secret } = await startPendingLogin(t.ctx, 'usr_1', 1);
    const p = await openPendingLogin(t.ctx, secret);
    const ended = await Promise.all([endPendingLogin(t.ctx, p!.id), endPendingLogin(t.ctx, p!.id)]);
    expect(ended.sort()).toEqual([false, true]);
  });
});
