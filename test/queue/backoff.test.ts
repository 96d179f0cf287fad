import { describe, expect, it } from 'vitest';
import { backoffMs } from '../../src/queue/backoff.js';
import { disabledRecheckMs } from '../../src/jobs/dispatch.js';

const opts = { baseMs: 100, capMs: 10_000 };

describe('backoffMs', () => {
  it('full jitter spans [0, base·2^(attempt-1)]', () => {
    expect(backoffMs(1, opts, () => 0)).toBe(0);
    expect(backoffMs(1, opts, () => 0.999999)).toBe(100);
    expect(backoffMs(3, opts, () => 0.999999)).toBe(400);
    expect(backoffMs(3, opts, () => 0.5)).toBe(200);
  });

  it('never exceeds the cap, even for huge attempt numbers', () => {
    expect(backoffMs(8, opts, () => 0.999999)).toBe(10_000);
    expect(backoffMs(5000, opts, () => 0.999999)).toBe(10_000);
    expect(backoffMs(5000, { ...opts, jitter: 'none' })).toBe(10_000);
  });

  it('without jitter it doubles per attempt', () => {
    const seq = [1, 2, 3, 4, 5].map((a) => backoffMs(a, { ...opts, jitter: 'none' }));
    expect(seq).toEqual([100, 200, 400, 800, 1600]);
  });

  it('spreads retries: 1000 draws at attempt 5 are not bunched', () => {
    const draws = Array.from({ length: 1000 }, () => backoffMs(5, opts));
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...draws)).toBeLessThanOrEqual(1600);
    expect(new Set(draws).size).toBeGreaterThan(500);
    const mean = draws.reduce((a, b) => a + b, 0) / draws.length;
    expect(mean).toBeGreaterThan(650);
    expect(mean).toBeLessThan(950);
  });

  it('treats attempt < 1 as the first attempt', () => {
    expect(backoffMs(0, { ...opts, jitter: 'none' })).toBe(100);
    expect(backoffMs(-3, { ...opts, jitter: 'none' })).toBe(100);
  });
});

describe('disabledRecheckMs: how often a message on a disabled gateway looks again', () => {
  const cap = 900_000;
  it('15 s at first, a tenth of the wait later, 5 min at most, spread by up to a third', () => {
    expect(disabledRecheckMs(0, cap, () => 0)).toBe(15_000);
    expect(disabledRecheckMs(60_000, cap, () => 0)).toBe(15_000);
    expect(disabledRecheckMs(20 * 60_000, cap, () => 0)).toBe(120_000);
    expect(disabledRecheckMs(24 * 3_600_000, cap, () => 0)).toBe(300_000);
    expect(disabledRecheckMs(24 * 3_600_000, cap, () => 0.999999)).toBe(400_000);
    expect(disabledRecheckMs(0, cap, () => 0.5)).toBe(17_500);
  });

  it('never past jobs.backoffCapMs', () => {
    expect(disabledRecheckMs(24 * 3_600_000, 1_000, () => 0.5)).toBe(1_000);
  });
});
