import { describe, expect, it } from 'vitest';
import { LinePace } from '../../src/jobs/line-pace.js';

// The calls of a shared gateway line (PostgreSQL) as one msgd makes them once their claim has
// committed: at their slots, in the order of their slots, spaced even when the commit came late.

/** Asks for each slot in turn, in this order, and records when each call was let go. */
async function calls(pace: LinePace, key: string, slots: number[], intervalMs: number) {
  const went: { at: number; when: number }[] = [];
  await Promise.all(slots.map((at) => pace.turn(key, at, intervalMs).then(() => went.push({ at, when: Date.now() }))));
  return went;
}

describe('LinePace', () => {
  it('lets calls whose slots have passed go in the order of their slots, spaced, not at once', async () => {
    const pace = new LinePace(Date.now);
    const t = Date.now();
    // A claim's calls, in the order the claim found them, reaching their handlers after their slots.
    const went = await calls(pace, 'gw_a', [t - 50, t - 150, t - 100], 50);
    expect(went.map((w) => w.at)).toEqual([t - 150, t - 100, t - 50]);
    // A line that fell behind catches up at most a fifth of a slot a call: 40 ms apart at least.
    for (let i = 1; i < went.length; i++) expect(went[i]!.when - went[i - 1]!.when).toBeGreaterThanOrEqual(39);
  });

  it('lets a call go at its slot, not before, and one on time after an idle line at its slot', async () => {
    const pace = new LinePace(Date.now);
    const t = Date.now();
    const [first] = await calls(pace, 'gw_a', [t + 80], 50);
    expect(first!.when).toBeGreaterThanOrEqual(t + 79);
    const u = Date.now() + 100;
    const [second] = await calls(pace, 'gw_a', [u], 50);
    expect(second!.when - u).toBeGreaterThanOrEqual(-1);
    expect(second!.when - u).toBeLessThan(40);
  });

  it('keeps lines apart', async () => {
    const pace = new LinePace(Date.now);
    const t = Date.now();
    const [a, b] = await Promise.all([calls(pace, 'gw_a', [t - 10], 1000), calls(pace, 'gw_b', [t - 10], 1000)]);
    // Neither waits for the other's slot.
    expect(Math.abs(a[0]!.when - b[0]!.when)).toBeLessThan(100);
  });
});
