import type { Tx } from '../db/query.js';
import { sql } from '../db/sql.js';
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

/** The row every start of an attempt locks first, so checking and recording are one step on every store. */
const LOCK_KEY = 'login_throttle';

export class LoginThrottle {
  constructor(private readonly ctx: CoreCtx) {}

  /** Milliseconds until `key` is under `limit` again (0: it is now), counting attempts after `since`. */
  private async wait(tx: Tx, column: 'account' | 'address', key: string, limit: number, since: number) {
    const nth = await tx.get<{ at: number }>(
      sql`SELECT at FROM login_attempts WHERE ${sql.raw(column)} = ${key} AND at > ${since}
          ORDER BY at DESC, id DESC LIMIT 1 OFFSET ${limit - 1}`,
    );
    return nth ? Math.max(1, nth.at + WINDOW_MS - this.ctx.now()) : 0;
  }

  /**
   * Start an attempt for this email from this address: recorded at once and admitted, or
   * refused (not recorded) with how long to wait. Check and record are one transaction that
   * first locks one row (meta's login_throttle): concurrent attempts, in this process or
   * another msgd on the same database, take turns, and cannot both take the last place.
   */
  async begin(email: string, address: string): Promise<Admission> {
    const account = accountKey(email);
    return this.ctx.store.transaction(async (tx): Promise<Admission> => {
      await tx.run(
        sql`INSERT INTO meta (key, value) VALUES (${LOCK_KEY}, '') ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
      );
      const now = this.ctx.now();
      const since = now - WINDOW_MS;
      await tx.run(sql`DELETE FROM login_attempts WHERE at <= ${since}`);
      const waitMs = Math.max(
        await this.wait(tx, 'account', account, PER_ACCOUNT, since),
        await this.wait(tx, 'address', address, PER_ADDRESS, since),
      );
      if (waitMs > 0) return { ok: false, waitMs };
      const row = await tx.get<{ id: number }>(
        sql`INSERT INTO login_attempts (account, address, at) VALUES (${account}, ${address}, ${now}) RETURNING id`,
      );
      return { ok: true, attempt: row!.id };
    });
  }

  /**
   * The account proved who it is: its count starts again, and `attempts` (the ones that made
   * up this login: the password, then the code) no longer count against their addresses.
   */
  async succeeded(email: string, attempts: number[]): Promise<void> {
    await this.ctx.store.transaction(async (tx) => {
      if (attempts.length)
        await tx.run(sql`DELETE FROM login_attempts WHERE id IN (${sql.join(attempts.map((id) => sql`${id}`))})`);
      await tx.run(sql`UPDATE login_attempts SET account = NULL WHERE account = ${accountKey(email)}`);
    });
  }
}
