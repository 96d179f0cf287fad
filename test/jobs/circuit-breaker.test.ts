import { describe, expect, it } from 'vitest';
import type { Circuit } from '../../src/core/circuits.js';
import { pickPrice } from '../../src/core/prices.js';
import { CircuitBreakers, type BreakerConfig } from '../../src/jobs/circuit-breaker.js';

// The breaker's states against a clock the test moves; the price precedence failover charges by.

const CONFIG: BreakerConfig = {
  consecutiveFailures: 3,
  failureRate: 0.5,
  minCalls: 6,
  windowMs: 60_000,
  openMs: 1000,
  maxOpenMs: 4000,
  halfOpenProbes: 2,
};

function breakers(config: Partial<BreakerConfig> = {}) {
  let t = 1_000_000;
  const published: Circuit[] = [];
  const b = new CircuitBreakers(
    { ...CONFIG, ...config },
    () => t,
    undefined,
    (c) => published.push(c),
  );
  return { b, published, advance: (ms: number) => (t += ms) };
}

describe('circuit breaker', () => {
  it('opens after N failures in a row, half-opens after the back-off, closes after its probes succeed', () => {
    const { b, published, advance } = breakers();
    for (let i = 0; i < 2; i++) b.record('gw', false, 'network_error');
    expect(b.state('gw')).toBe('closed');
    b.record('gw', true);
    for (let i = 0; i < 3; i++) b.record('gw', false, 'network_error');
    expect(b.state('gw')).toBe('open');
    expect(b.admit('gw')).toEqual({ allowed: false, waitMs: 1000, state: 'open' });
    expect(published.at(-1)).toMatchObject({
      state: 'open',
      opened: 1,
      reason: '3 failed calls in a row (last: network_error)',
    });
    advance(1000);
    expect(b.state('gw')).toBe('half_open');
    // Two probes, no more until they report.
    expect(b.admit('gw').allowed).toBe(true);
    expect(b.admit('gw').allowed).toBe(true);
    expect(b.admit('gw')).toMatchObject({ allowed: false, state: 'half_open' });
    expect(b.wouldAllow('gw')).toBe(false);
    b.record('gw', true);
    expect(b.state('gw')).toBe('half_open');
    b.record('gw', true);
    expect(b.state('gw')).toBe('closed');
    // A first failure and its reset are published (the consoles see a gateway begin to fail), then each transition.
    expect(published.map((c) => [c.state, c.failures])).toEqual([
      ['closed', 1],
      ['closed', 0],
      ['closed', 1],
      ['open', 3],
      ['half_open', 3],
      ['closed', 0],
    ]);
  });

  it('a failed probe opens it again for twice as long, up to the cap', () => {
    const { b, advance } = breakers();
    for (let i = 0; i < 3; i++) b.record('gw', false);
    for (const wait of [2000, 4000, 4000]) {
      advance(10_000);
      expect(b.admit('gw').allowed).toBe(true);
      b.record('gw', false);
      expect(b.admit('gw')).toEqual({ allowed: false, waitMs: wait, state: 'open' });
    }
  });

  it('opens on the failure rate over the window once it holds minCalls', () => {
    const { b } = breakers({ consecutiveFailures: 100 });
    for (const ok of [false, true, false, true, false]) b.record('gw', ok);
    expect(b.state('gw')).toBe('closed');
    b.record('gw', true);
    expect(b.state('gw')).toBe('closed'); // 3 of 6
    b.record('gw', false);
    expect(b.state('gw')).toBe('open'); // 4 of 7
  });

  it('a probe handed back (never sent) frees its place', () => {
    const { b, advance } = breakers({ halfOpenProbes: 1 });
    for (let i = 0; i < 3; i++) b.record('gw', false);
    advance(1000);
    expect(b.admit('gw').allowed).toBe(true);
    expect(b.admit('gw').allowed).toBe(false);
    b.release('gw');
    expect(b.admit('gw').allowed).toBe(true);
  });
});

describe('price precedence', () => {
  const rows = [
    { partner_id: '', gateway_id: '', amount: 10 },
    { partner_id: 'p1', gateway_id: '', amount: 20 },
    { partner_id: '', gateway_id: 'g1', amount: 30 },
    { partner_id: 'p1', gateway_id: 'g1', amount: 40 },
    { partner_id: 'p2', gateway_id: 'g2', amount: 50 },
  ];
  it('partner+gateway, then gateway, then partner, then the default, else free', () => {
    expect(pickPrice(rows, 'p1', 'g1')).toBe(40);
    expect(pickPrice(rows, 'p2', 'g1')).toBe(30);
    expect(pickPrice(rows, 'p1', 'g2')).toBe(20);
    expect(pickPrice(rows, 'p3', 'g2')).toBe(10);
    expect(pickPrice(rows, 'p2', 'g2')).toBe(50);
    expect(pickPrice([], 'p1', 'g1')).toBe(0);
  });
});
