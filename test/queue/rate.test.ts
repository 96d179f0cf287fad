import { describe, expect, it } from 'vitest';
import { RateShaper } from '../../src/queue/rate.js';

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('RateShaper', () => {
  it('lets through 80/s over 10 simulated seconds when asked constantly', () => {
    const c = clock();
    const shaper = new RateShaper({ now: c.now, maxWaitMs: 0 });
    let allowed = 0;
    for (let ms = 0; ms < 10_000; ms++) {
      // many callers per millisecond: the shaper, not the callers, sets the pace
      for (let i = 0; i < 3; i++) if (shaper.take('wa', 80) === 0) allowed++;
      c.advance(1);
    }
    expect(allowed).toBeGreaterThanOrEqual(799);
    expect(allowed).toBeLessThanOrEqual(801);
  });

  it('allows a burst, then the steady rate', () => {
    const c = clock();
    const shaper = new RateShaper({ now: c.now, maxWaitMs: 0 });
    const first = Array.from({ length: 10 }, () => shaper.take('k', 10, 5));
    expect(first.filter((w) => w === 0)).toHaveLength(5);
    expect(first[5]).toBe(100);
    c.advance(1000);
    let allowed = 0;
    for (let ms = 0; ms < 2000; ms++, c.advance(1)) if (shaper.take('k', 10, 5) === 0) allowed++;
    // 5 refilled in the idle second + 20 over the next two seconds
    expect(allowed).toBeGreaterThanOrEqual(24);
    expect(allowed).toBeLessThanOrEqual(26);
  });

  it('tells the caller how long to wait, and waiting that long works', () => {
    const c = clock();
    const shaper = new RateShaper({ now: c.now, maxWaitMs: 0 });
    expect(shaper.take('k', 80)).toBe(0);
    const w = shaper.take('k', 80);
    expect(w).toBe(13); // 12.5 ms rounded up
    c.advance(w - 1);
    expect(shaper.take('k', 80)).toBeGreaterThan(0);
    c.advance(1);
    expect(shaper.take('k', 80)).toBe(0);
  });

  it('reserves short waits so concurrent waiters are spaced out, not released together', () => {
    const c = clock();
    const shaper = new RateShaper({ now: c.now });
    const waits = Array.from({ length: 30 }, () => shaper.take('wa', 80, 1, 250));
    const reserved = waits.filter((w) => w <= 250);
    // slot 0 now, then 12.5 ms apart up to 250 ms: 21 slots
    expect(reserved).toHaveLength(21);
    expect(new Set(reserved).size).toBe(21);
    for (let i = 1; i < reserved.length; i++) expect(reserved[i] - reserved[i - 1]).toBeGreaterThanOrEqual(12);
    // the rest were not booked: they all see the same first free slot after the reservations
    const rest = waits.filter((w) => w > 250);
    expect(new Set(rest)).toEqual(new Set([263]));
    // and sending on every reserved slot keeps 80/s: 21 sends over 250 ms (+1 slot of burst)
    expect(Math.max(...reserved)).toBe(250);
  });

  it('shapes by queueing under sustained overload: snoozed jobs come back and get served at the rate', () => {
    const c = clock();
    const shaper = new RateShaper({ now: c.now });
    // 2000 jobs arrive at once; each either waits (reserved ≤ 250 ms) and sends, or snoozes and retries.
    const due = new Map<number, number>(); // job -> time it asks next
    for (let j = 0; j < 2000; j++) due.set(j, 0);
    const sends: number[] = [];
    for (let t = 0; t < 30_000 && due.size; t++, c.advance(1)) {
      for (const [j, at] of due) {
        if (at > t) continue;
        const w = shaper.take('wa', 80);
        if (w <= 250) {
          sends.push(t + w);
          due.delete(j);
        } else due.set(j, t + w);
      }
    }
    expect(due.size).toBe(0);
    sends.sort((a, b) => a - b);
    // 2000 at 80/s ≈ 25 s, and never more than 81 in any one-second window
    expect(sends.at(-1)!).toBeGreaterThan(24_000);
    expect(sends.at(-1)!).toBeLessThan(25_500);
    let i = 0;
    for (let j = 0; j < sends.length; j++) {
      while (sends[j] - sends[i] >= 1000) i++;
      expect(j - i + 1).toBeLessThanOrEqual(81);
    }
  });

  it('with no limit on the wait, reserves the next free slot however far: places in line, one slot apart', () => {
    const c = clock();
    const shaper = new RateShaper({ now: c.now });
    const waits = Array.from({ length: 5 }, () => shaper.take('tw', 2, 1, Infinity));
    expect(waits).toEqual([0, 500, 1000, 1500, 2000]);
    // Whoever asks next is behind them all.
    c.advance(100);
    expect(shaper.take('tw', 2)).toBe(2400);
    expect(shaper.take('tw', 2, 1, Infinity)).toBe(2400);
  });

  it('rebase gives up the slots reserved beyond a horizon and keeps those within it', () => {
    const c = clock();
    const shaper = new RateShaper({ now: c.now });
    for (let i = 0; i < 10; i++) shaper.take('tw', 10, 1, Infinity);
    // Nine slots reserved out to 900 ms; a new line starts 250 ms from now.
    shaper.rebase('tw', 250);
    expect(shaper.take('tw', 10, 1, Infinity)).toBe(250);
    // A key with nothing reserved that far is left alone.
    shaper.take('x', 10);
    shaper.rebase('x', 250);
    expect(shaper.take('x', 10)).toBe(100);
    shaper.rebase('unknown', 250);
    expect(shaper.take('unknown', 10)).toBe(0);
  });

  it('keeps keys independent', () => {
    const c = clock();
    const shaper = new RateShaper({ now: c.now, maxWaitMs: 0 });
    expect(shaper.take('a', 1)).toBe(0);
    expect(shaper.take('a', 1)).toBe(1000);
    expect(shaper.take('b', 1)).toBe(0);
  });

  it('accepts a bare clock function and rejects a non-positive rate', () => {
    const c = clock();
    const shaper = new RateShaper(c.now);
    expect(shaper.take('a', 1)).toBe(0);
    expect(() => shaper.take('a', 0)).toThrow(/positive/);
  });
});
