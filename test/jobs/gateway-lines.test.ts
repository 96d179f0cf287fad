import { describe, expect, it } from 'vitest';
import { GatewayLines, type LineGateway } from '../../src/jobs/gateway-lines.js';
import { RateShaper } from '../../src/queue/rate.js';

function setup(start = 1_000_000) {
  let t = start;
  const now = () => t;
  const shaper = new RateShaper({ now });
  const lines = new GatewayLines({ shaper, now });
  return { lines, advance: (ms: number) => (t += ms), at: now };
}

/** Claims a job as dispatch does: out of line, then its turn. */
function claim(lines: GatewayLines, jobId: number, gatewayId: string, rate: number) {
  return lines.turn(jobId, gatewayId, rate, lines.leave(jobId, gatewayId));
}

describe('GatewayLines: places in line', () => {
  it('lets messages go within the inline wait, then gives places one slot apart', async () => {
    const { lines } = await setup();
    const turns = [1, 2, 3, 4, 5].map((id) => claim(lines, id, 'gw_a', 10));
    expect(turns).toEqual([
      { go: true, wait: 0 },
      { go: true, wait: 100 },
      { go: true, wait: 200 },
      { go: false, wait: 300 },
      { go: false, wait: 400 },
    ]);
  });

  it('sends a message at its place without asking the rate again', async () => {
    const { lines, advance } = await setup();
    for (const id of [1, 2, 3]) claim(lines, id, 'gw_a', 10);
    expect(claim(lines, 4, 'gw_a', 10)).toEqual({ go: false, wait: 300 });
    advance(300);
    // A newcomer asks the rate and queues behind the places already given.
    expect(claim(lines, 4, 'gw_a', 10)).toEqual({ go: true, wait: 0 });
    expect(claim(lines, 9, 'gw_a', 10)).toEqual({ go: true, wait: 100 });
  });

  it('sends a place claimed early (its snooze rolled back) back to wait for it', async () => {
    const { lines, advance } = await setup();
    for (const id of [1, 2, 3]) claim(lines, id, 'gw_a', 10);
    expect(claim(lines, 4, 'gw_a', 10)).toEqual({ go: false, wait: 300 });
    advance(10);
    expect(claim(lines, 4, 'gw_a', 10)).toEqual({ go: false, wait: 290 });
    // Within the inline wait of its place, it goes after the rest of it.
    advance(90);
    expect(claim(lines, 4, 'gw_a', 10)).toEqual({ go: true, wait: 200 });
  });

  it('lets a line that fell behind catch up one slot apart, not in a burst', async () => {
    const { lines, advance } = await setup();
    for (const id of [1, 2, 3]) claim(lines, id, 'gw_a', 10);
    expect(claim(lines, 4, 'gw_a', 10).wait).toBe(300);
    expect(claim(lines, 5, 'gw_a', 10).wait).toBe(400);
    expect(claim(lines, 6, 'gw_a', 10).wait).toBe(500);
    // The event loop stalled: all three places are long past when they are claimed.
    advance(5000);
    expect([4, 5, 6].map((id) => claim(lines, id, 'gw_a', 10))).toEqual([
      { go: true, wait: 0 },
      { go: true, wait: 100 },
      { go: true, wait: 200 },
    ]);
  });

  it('moves late places back one slot apart, and keeps each at its new slot', async () => {
    const { lines, advance } = await setup();
    // At 2/s: job 1 goes, jobs 2-4 hold places 500 ms apart.
    expect([1, 2, 3, 4].map((id) => claim(lines, id, 'gw_a', 2).wait)).toEqual([0, 500, 1000, 1500]);
    // Claimed late, together: the first goes, the others are moved back 500 ms apart.
    advance(2000);
    expect(claim(lines, 2, 'gw_a', 2)).toEqual({ go: true, wait: 0 });
    expect(claim(lines, 3, 'gw_a', 2)).toEqual({ go: false, wait: 500 });
    expect(claim(lines, 4, 'gw_a', 2)).toEqual({ go: false, wait: 1000 });
    // At their new places they go, not pushed back again by the slots handed out meanwhile.
    advance(500);
    expect(claim(lines, 3, 'gw_a', 2)).toEqual({ go: true, wait: 0 });
    expect(claim(lines, 4, 'gw_a', 2)).toEqual({ go: false, wait: 500 });
    advance(500);
    expect(claim(lines, 4, 'gw_a', 2)).toEqual({ go: true, wait: 0 });
  });

  it('forgets a place held on another gateway', async () => {
    const { lines } = await setup();
    for (const id of [1, 2, 3]) claim(lines, id, 'gw_a', 10);
    expect(claim(lines, 4, 'gw_a', 10).go).toBe(false);
    expect(lines.leave(4, 'gw_b')).toBeUndefined();
    expect(lines.leave(4, 'gw_a')).toBeUndefined();
  });

  it('keeps gateways apart: each has its own line', async () => {
    const { lines } = await setup();
    for (const id of [1, 2, 3]) claim(lines, id, 'gw_a', 10);
    expect(claim(lines, 4, 'gw_a', 10).go).toBe(false);
    expect(claim(lines, 5, 'gw_b', 10)).toEqual({ go: true, wait: 0 });
  });
});

describe('GatewayLines: watching the gateways', () => {
  const gw = (id: string, over: Partial<LineGateway> = {}): LineGateway => ({
    id,
    name: id.replace('gw_', ''),
    active: true,
    rate: 10,
    ...over,
  });

  async function watcher() {
    const s = await setup();
    const woken: [string | null, string, string | undefined][] = [];
    let gateways = [gw('gw_a'), gw('gw_b')];
    let generation = 1;
    const look = () =>
      s.lines.watch(
        generation,
        () => gateways,
        (id, why, then) => woken.push([id, why, then]),
      );
    return {
      ...s,
      woken,
      look,
      change(next: LineGateway[]) {
        gateways = next;
        generation++;
      },
    };
  }

  it('wakes every line once when it first looks (msgd started), then only on a change', async () => {
    const w = await watcher();
    w.look();
    w.look();
    expect(w.woken).toEqual([[null, 'msgd started', undefined]]);
    w.change([gw('gw_a'), gw('gw_b', { name: 'renamed' })]);
    w.look();
    expect(w.woken).toHaveLength(1);
  });

  it('wakes a gateway disabled, enabled, given another rate or removed', async () => {
    const w = await watcher();
    w.look();
    w.change([gw('gw_a', { active: false }), gw('gw_b')]);
    w.look();
    w.change([gw('gw_a'), gw('gw_b', { rate: 1 })]);
    w.look();
    w.change([gw('gw_a')]);
    w.look();
    expect(w.woken.slice(1)).toEqual([
      ['gw_a', 'gateway a disabled', 'its waiting messages wait until it is enabled'],
      ['gw_a', 'gateway a enabled', undefined],
      ['gw_b', 'gateway b rate changed to 1/s', undefined],
      ['gw_b', 'gateway b removed', 'its waiting messages fail and are refunded'],
    ]);
  });

  it('starts a changed gateway line over: places given in the old line are forgotten', async () => {
    const w = await watcher();
    w.look();
    for (const id of [1, 2, 3]) claim(w.lines, id, 'gw_a', 10);
    expect(claim(w.lines, 4, 'gw_a', 10)).toEqual({ go: false, wait: 300 });
    expect(claim(w.lines, 5, 'gw_b', 10)).toEqual({ go: true, wait: 0 });
    w.change([gw('gw_a', { rate: 2 }), gw('gw_b')]);
    w.look();
    // Job 4 lost its place; the slots already reserved within the inline wait stay taken.
    expect(w.lines.leave(4, 'gw_a')).toBeUndefined();
    expect(claim(w.lines, 4, 'gw_a', 2)).toEqual({ go: true, wait: 250 });
    expect(claim(w.lines, 7, 'gw_a', 2)).toEqual({ go: false, wait: 750 });
    // gw_b did not change: its line holds.
    expect(claim(w.lines, 6, 'gw_b', 10)).toEqual({ go: true, wait: 100 });
  });

  it('looks at a change again when waking its line failed', async () => {
    const s = await setup();
    let fail = true;
    const woken: (string | null)[] = [];
    const wake = (id: string | null) => {
      if (id !== null && fail) throw new Error('database is locked');
      woken.push(id);
    };
    s.lines.watch(1, () => [gw('gw_a')], wake);
    expect(() => s.lines.watch(2, () => [gw('gw_a', { active: false })], wake)).toThrow('database is locked');
    fail = false;
    s.lines.watch(2, () => [gw('gw_a', { active: false })], wake);
    expect(woken).toEqual([null, 'gw_a']);
  });
});
