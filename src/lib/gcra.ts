// GCRA, the generic cell rate algorithm: per key one number, the theoretical arrival time (TAT)
// of the next request. O(1), no timers, no buckets to refill. The API's request limits
// (src/http/rate-limit.ts) refuse past it; the dispatch rate (src/queue/rate.ts) queues.

export interface GcraTake {
  now: number;
  /** ms until the request conforms: 0 or less goes now. */
  wait: number;
  /** The TAT before this request, and after it if it was let through or reserved. */
  tat: number;
  next: number;
}

export class Gcra {
  private readonly tat = new Map<string, number>();
  private takes = 0;

  /**
   * lateSlackMs: how much of a caller's lateness to keep. Plain GCRA resets the TAT to now and
   * drops it every time, so callers that come back a little late (timers, whole ms) get less
   * than the rate.
   */
  constructor(
    private readonly now: () => number,
    private readonly lateSlackMs = 0,
  ) {}

  /**
   * One request on `key`, spaced `intervalMs`, with `toleranceMs` of burst. The slot is taken
   * (reserved, for a wait) when the wait, rounded up to whole ms, is at most maxWaitMs.
   */
  take(key: string, intervalMs: number, toleranceMs: number, maxWaitMs: number): GcraTake {
    const now = this.now();
    if (++this.takes % 4096 === 0) this.prune(now);
    const tat = Math.max(this.tat.get(key) ?? now, now - Math.min(intervalMs, this.lateSlackMs));
    const next = tat + intervalMs;
    const wait = next - toleranceMs - now;
    if (Math.ceil(wait) <= maxWaitMs) this.tat.set(key, next);
    return { now, wait, tat, next };
  }

  /** Give up what is reserved on `key` beyond maxAheadMs from now. */
  rebase(key: string, maxAheadMs: number): void {
    const tat = this.tat.get(key);
    const limit = this.now() + maxAheadMs;
    if (tat !== undefined && tat > limit) this.tat.set(key, limit);
  }

  // A key whose TAT has passed is indistinguishable from a fresh one: drop it.
  private prune(now: number) {
    for (const [k, t] of this.tat) if (t <= now) this.tat.delete(k);
  }
}
