// Login throttling, per account and per client address, in memory (one msgd per data
// directory). Failures count in a sliding window; past the limit, logins for that key are
// refused until the oldest failure leaves the window. Unknown emails count like known ones,
// so the lockout says nothing about which accounts exist.

export const WINDOW_MS = 15 * 60_000;
export const PER_ACCOUNT = 5;
export const PER_ADDRESS = 20;
const MAX_KEYS = 100_000;

export class LoginThrottle {
  private failures = new Map<string, number[]>();

  constructor(private now: () => number) {}

  private recent(key: string): number[] {
    const cutoff = this.now() - WINDOW_MS;
    const list = (this.failures.get(key) ?? []).filter((t) => t > cutoff);
    if (list.length) this.failures.set(key, list);
    else this.failures.delete(key);
    return list;
  }

  /** Milliseconds until a login may be tried again for this email and address; 0 = now. */
  waitMs(email: string, ip: string): number {
    const wait = (key: string, limit: number) => {
      const list = this.recent(key);
      return list.length >= limit ? list[list.length - limit] + WINDOW_MS - this.now() : 0;
    };
    return Math.max(wait(`a:${email.trim().toLowerCase()}`, PER_ACCOUNT), wait(`i:${ip}`, PER_ADDRESS));
  }

  fail(email: string, ip: string) {
    if (this.failures.size > MAX_KEYS) this.failures.clear();
    for (const key of [`a:${email.trim().toLowerCase()}`, `i:${ip}`]) {
      this.failures.set(key, [...this.recent(key), this.now()]);
    }
  }

  succeed(email: string) {
    this.failures.delete(`a:${email.trim().toLowerCase()}`);
  }
}
