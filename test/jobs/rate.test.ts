import { describe, expect, it } from 'vitest';
import { RateShaper } from '../../src/jobs/rate.js';

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

  it('hands out places in line one interval apart, after the next slot; a new rate starts a new line', () => {
    const c = clock();
    const shaper = new RateShaper({ now: c.now });
    expect(shaper.hasLine('tw', 2)).toBe(false);
    expect(shaper.place('tw', 2, 700)).toBe(700);
    expect(shaper.hasLine('tw', 2)).toBe(true);
    expect([shaper.place('tw', 2), shaper.place('tw', 2)]).toEqual([1200, 1700]);
    c.advance(1000);
    // Later places follow the last one handed out, whatever wait is given.
    expect(shaper.place('tw', 2, 300)).toBe(1200);
    // Another key, or the same key at another rate, has no line.
    expect(shaper.hasLine('other', 2)).toBe(false);
    expect(shaper.hasLine('tw', 5)).toBe(false);
    expect(shaper.place('tw', 5, 100)).toBe(100);
    expect(shaper.place('tw', 5)).toBe(300);
    // Once its last place has come, there is no line.
    c.advance(300);
    expect(shaper.hasLine('tw', 5)).toBe(false);
    shaper.place('tw', 5, 100);
    shaper.reset('tw');
    expect(shaper.hasLine('tw', 5)).toBe(false);
  });

  it('a deep backlog waits in line: each job asks about once, and they go out in order at the rate', () => {
    // dispatch's rule (src/jobs/dispatch.ts): a job that has not waited joins the end of the
    // line if there is one; otherwise it asks for a slot (a job that has waited may wait a slot
    // longer), and goes or takes a place in line.
    const c = clock();
    const shaper = new RateShaper({ now: c.now });
    const rate = 20;
    const due = new Map<number, { at: number; waited: boolean }>();
    for (let j = 0; j < 600; j++) due.set(j, { at: 0, waited: false });
    const sends: { job: number; at: number }[] = [];
    let asks = 0;
    for (let t = 0; t < 60_000 && due.size; t++, c.advance(1)) {
      // 5 newcomers a second for the first 10 s, behind the backlog.
      if (t < 10_000 && t % 200 === 0) due.set(600 + t / 200, { at: t, waited: false });
      for (const [j, d] of due) {
        if (d.at > t) continue;
        asks++;
        let after: number;
        if (!d.waited && shaper.hasLine('tw', rate)) after = shaper.place('tw', rate);
        else {
          const max = d.waited ? 250 + 1000 / rate : 250;
          const w = shaper.take('tw', rate, 1, max);
          if (w <= max) {
            sends.push({ job: j, at: t + w });
            due.delete(j);
            continue;
          }
          after = shaper.place('tw', rate, w);
        }
        due.set(j, { at: t + after, waited: true });
      }
    }
    expect(due.size).toBe(0);
    // Asking again at every slot would be ~650 jobs × hundreds of slots.
    expect(asks).toBeLessThan(650 * 2);
    // First come, first served: the backlog in order, then the newcomers.
    sends.sort((a, b) => a.at - b.at);
    const order = sends.map((x) => x.job);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    // 650 at 20/s ≈ 32.5 s, and never more than 21 in any one-second window.
    expect(sends.at(-1)!.at).toBeGreaterThan(32_000);
    expect(sends.at(-1)!.at).toBeLessThan(33_500);
    let i = 0;
    for (let j = 0; j < sends.length; j++) {
      while (sends[j].at - sends[i].at >= 1000) i++;
      expect(j - i + 1).toBeLessThanOrEqual(21);
    }
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
