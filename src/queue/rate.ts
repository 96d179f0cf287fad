// Per-key rate shaping with GCRA (the generic cell rate algorithm): one number per key, the
// theoretical arrival time (TAT) of the next request. Shaping means queueing, never refusing:
// the caller is told how long to wait, and either waits (short) or snoozes its job (long):
// with maxWaitMs Infinity the slot is reserved however far, a place in line (src/jobs/dispatch.ts).

import { Gcra } from '../lib/gcra.js';

export interface RateShaperOptions {
  now?: () => number;
  /** Default maxWaitMs for take(). */
  maxWaitMs?: number;
}

/** Waits up to this long are reserved by default: short enough to hold a job in flight for. */
export const DEFAULT_MAX_WAIT_MS = 250;
const LATE_SLACK_MS = 5;

export class RateShaper {
  private readonly gcra: Gcra;
  private readonly maxWaitMs: number;

  constructor(opts: RateShaperOptions | (() => number) = {}) {
    const o = typeof opts === 'function' ? { now: opts } : opts;
    // Keep up to LATE_SLACK_MS of a caller's lateness: without it, 13 ms spacing instead of
    // 12.5 at 80/s, 4% short; at most one extra request per window in exchange.
    this.gcra = new Gcra(o.now ?? Date.now, LATE_SLACK_MS);
    this.maxWaitMs = o.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
  }

  /**
   * Ask for one slot on `key` at `ratePerSecond`, allowing `burst` back-to-back (default 1).
   * - 0: go now; the slot is taken.
   * - 0 < w ≤ maxWaitMs: the slot at now + w is RESERVED for you: sleep w, then go without
   *   asking again.
   * - w > maxWaitMs: nothing reserved; ask again in w ms (snooze the job). Not reserving keeps
   *   snoozed jobs from booking slots they may never use.
   * Reserving is what makes "await the short wait, then send" hold the rate when many jobs ask
   * at once: each gets its own slot instead of all waking on the same one.
   */
  take(key: string, ratePerSecond: number, burst = 1, maxWaitMs = this.maxWaitMs): number {
    if (!(ratePerSecond > 0)) throw new Error(`rate for "${key}" must be positive`);
    const interval = 1000 / ratePerSecond;
    const { wait } = this.gcra.take(key, interval, interval * Math.max(1, burst), maxWaitMs);
    // Round up: waking early by a fraction of a millisecond would miss the slot.
    return wait <= 0 ? 0 : Math.ceil(wait);
  }

  /**
   * Give up the slots reserved on `key` more than maxAheadMs from now: the next taker gets one
   * within maxAheadMs (a line given at an old rate starts over; the slots of callers already
   * waiting within it stay theirs).
   */
  rebase(key: string, maxAheadMs: number): void {
    this.gcra.rebase(key, maxAheadMs);
  }
}
