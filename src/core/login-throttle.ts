import { stmt } from '../db/stmt.js';
import { loginEmail } from '../lib/email.js';
import type { CoreCtx } from './context.js';

// The console's throttle on proofs of identity (a password at login or on Your account, a
// second-factor code), per account and per client address, kept in the database so that every
// msgd on it holds the same count. An attempt is recorded when it starts, before the slow
// password hash: attempts still being checked count against the limit, so a burst of parallel
// guesses gets no more checks than a patient guesser. Past the limit an attempt is refused
// without being checked until the oldest counted attempt leaves the window. A successful login
// clears the account's count and forgives its own attempts' addresses; failures stay counted
// against the address. Unknown emails count like known ones, so a lockout says nothing about
// which accounts exist.

export const WINDOW_MS = 15 * 60_000;
export const PER_ACCOUNT = 5;
export const PER_ADDRESS = 20;

export type Admission = { ok: true; attempt: number } | { ok: false; waitMs: number };

/** Every spelling of one address (case, spaces, a Unicode or punycode domain) is one account. */
export const accountKey = (email: string) => loginEmail(email);

export class LoginThrottle {
  constructor(private readonly ctx: CoreCtx) {}

  /** Milliseconds until `key` is under `limit` again (0: it is now), counting attempts after `since`. */
  private wait(column: 'account' | 'address', key: string, limit: number, since: number): number {
    const nth = stmt<[string, number, number], { at: number }>(
      this.ctx.db.sqlite,
      `SELECT at FROM login_attempts WHERE ${column} = ? AND at > ? ORDER BY at DESC LIMIT 1 OFFSET ?`,
    ).get(key, since, limit - 1);
    return nth ? Math.max(1, nth.at + WINDOW_MS - this.ctx.now()) : 0;
  }

  /**
   * Start an attempt for this email from this address: recorded at once and admitted, or
   * refused (not recorded) with how long to wait. Check and record are one write transaction,
   * so concurrent attempts, in this process or another, cannot both take the last place.
   */
  begin(email: string, address: string): Admission {
    const account = accountKey(email);
    return this.ctx.db.sqlite
      .transaction((): Admission => {
        const now = this.ctx.now();
        const since = now - WINDOW_MS;
        stmt(this.ctx.db.sqlite, 'DELETE FROM login_attempts WHERE at <= ?').run(since);
        const waitMs = Math.max(
          this.wait('account', account, PER_ACCOUNT, since),
          this.wait('address', address, PER_ADDRESS, since),
        );
        if (waitMs > 0) return { ok: false, waitMs };
        const { lastInsertRowid } = stmt(
          this.ctx.db.sqlite,
          'INSERT INTO login_attempts (account, address, at) VALUES (?, ?, ?)',
        ).run(account, address, now);
        return { ok: true, attempt: Number(lastInsertRowid) };
      })
      .immediate();
  }

  /**
   * The account proved who it is: its count starts again, and `attempts` (the ones that made
   * up this login: the password, then the code) no longer count against their addresses.
   */
  succeeded(email: string, attempts: number[]): void {
    this.ctx.db.sqlite
      .transaction(() => {
        const del = stmt(this.ctx.db.sqlite, 'DELETE FROM login_attempts WHERE id = ?');
        for (const id of attempts) del.run(id);
        stmt(this.ctx.db.sqlite, 'UPDATE login_attempts SET account = NULL WHERE account = ?').run(accountKey(email));
      })
      .immediate();
  }
}
