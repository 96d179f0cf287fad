// Retry delays: exponential with jitter and a cap. Jitter matters more than the curve:
// when a provider comes back, thousands of jobs that failed together must not all retry in
// the same millisecond (AWS Architecture Blog, "Exponential Backoff And Jitter").

export type Jitter = 'full' | 'decorrelated' | 'none';

export interface BackoffOptions {
  baseMs: number;
  capMs: number;
  /** Default 'full': uniform in [0, min(cap, base·2^(attempt-1))]. */
  jitter?: Jitter;
  /**
   * The previous delay, for 'decorrelated' (uniform in [base, 3·previous], capped). The jobs
   * table keeps no previous delay, so without it the curve's midpoint base·2^(attempt-2) stands in.
   */
  previousMs?: number;
}

/** Delay in ms before the next try, after `attempt` tries have failed (attempt ≥ 1). */
export function backoffMs(attempt: number, opts: BackoffOptions, random: () => number = Math.random): number {
  const base = Math.max(1, opts.baseMs);
  const cap = Math.max(base, opts.capMs);
  const n = Number.isFinite(attempt) ? Math.max(1, Math.floor(attempt)) : 1;
  // 2^1024 is Infinity; min() keeps it finite, but stop the exponent early anyway.
  const ceiling = Math.min(cap, base * 2 ** Math.min(n - 1, 60));
  switch (opts.jitter ?? 'full') {
    case 'none':
      return Math.round(ceiling);
    case 'decorrelated': {
      const prev = opts.previousMs ?? (n === 1 ? base : Math.min(cap, base * 2 ** Math.min(n - 2, 60)));
      const hi = Math.max(base, prev * 3);
      return Math.round(Math.min(cap, base + random() * (hi - base)));
    }
    case 'full':
      return Math.round(random() * ceiling);
  }
}
