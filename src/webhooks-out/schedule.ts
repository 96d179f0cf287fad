// The retry schedule of a delivery (Svix's): the delay before each attempt, counted from the
// previous failure. The defaults live in config (webhooksOut.retryScheduleMs) so tests can
// shrink them; docs/webhooks-out.md documents them.

export const DEFAULT_SCHEDULE_MS: readonly number[] = [
  0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
];

/** ±10%: receivers that failed together do not all get retried in the same second. */
export const JITTER = 0.1;

/** Longest Retry-After we honour; beyond it a receiver could park a delivery for good. */
export const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/**
 * Delay before the next attempt once `done` attempts (of this run) have failed, or null when
 * the schedule is used up and the delivery is dead. A Retry-After from the receiver can only
 * lengthen the wait, never shorten it below the schedule.
 */
export function nextDelayMs(
  schedule: readonly number[],
  done: number,
  opts: { retryAfterMs?: number | null; random?: () => number } = {},
): number | null {
  if (done >= schedule.length) return null;
  const base = schedule[done];
  const random = opts.random ?? Math.random;
  const jittered = Math.round(base * (1 + JITTER * (2 * random() - 1)));
  const after = opts.retryAfterMs ?? 0;
  return Math.max(jittered, Math.min(after, MAX_RETRY_AFTER_MS));
}

/** Retry-After is either delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return null;
  const s = v.trim();
  if (/^\d+$/.test(s)) return Number(s) * 1000;
  const t = Date.parse(s);
  return Number.isNaN(t) ? null : Math.max(0, t - now);
}

/** Total time a delivery keeps being retried, without jitter, for docs and `msgctl` output. */
export function scheduleSpanMs(schedule: readonly number[]): number {
  return schedule.reduce((a, b) => a + b, 0);
}
