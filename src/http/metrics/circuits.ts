import { Counter, Gauge, type Registry } from 'prom-client';
import type { CircuitBreakers } from '../../jobs/circuit-breaker.js';

// The gateways' circuit breakers, read from memory at scrape time: one series per gateway that
// has been called since msgd started.

const STATE_VALUE = { closed: 0, half_open: 1, open: 2 } as const;

export function registerCircuits(registry: Registry, breakers: CircuitBreakers): void {
  new Gauge({
    name: 'msgd_gateway_circuit_state',
    help: "Each gateway's circuit breaker: 0 closed (calls go through), 1 half-open (probing), 2 open (no calls; messages go to a fallback or wait).",
    labelNames: ['gateway'],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of breakers.snapshot()) this.set({ gateway: c.gatewayId }, STATE_VALUE[c.state]);
    },
  });
  new Counter({
    name: 'msgd_gateway_circuit_opened_total',
    help: "How many times each gateway's circuit breaker opened.",
    labelNames: ['gateway'],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of breakers.snapshot()) if (c.opened > 0) this.inc({ gateway: c.gatewayId }, c.opened);
    },
  });
}
