// Retry delays: exponential with jitter and a cap. Jitter matters more than the curve:
// when a provider comes back, thousands of jobs that failed together must not all retry in
// the same millisecond (AWS Architecture Blog, "Exponential Backoff And Jitter").

export type Jitter = 'full' | 'none';

export interface BackoffOptions {
  baseMs: number;
  capMs: number;
  /** Default 'full': uniform in [0, min(cap, base·2^(attempt-1))]; 'none' for exact schedules in tests. */
  jitter?: Jitter;
}

/** Delay in ms before the next try, after `attempt` tries have failed (attempt ≥ 1). */
export function backoffMs(attempt: number, opts: BackoffOptions, random: () => number = Math.random): number {
  const base = Math.max(1, opts.baseMs);
  const cap = Math.max(base, opts.capMs);
  const n = Number.isFinite(attempt) ? Math.max(1, Math.floor(attempt)) : 1;
  // 2^1024 is Infinity; min() keeps it finite, but stop the exponent early anyway.
  const ceiling = Math.min(cap, base * 2 ** Math.min(n - 1, 60));
  return Math.round(opts.jitter === 'none' ? ceiling : random() * ceiling);
}
