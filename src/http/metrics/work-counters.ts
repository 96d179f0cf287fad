import { Counter, type Registry } from 'prom-client';
import { COUNTER_HELP, COUNTER_NAMES, type Counters } from '../../core/counters.js';

// msgd's work counters (src/core/counters.ts) as Prometheus counters: the same figures the
// console's overview shows, read from memory at scrape time, so there is one source of them.

const LABELS: Record<string, string[]> = {
  [COUNTER_NAMES.dispatch]: ['gateway', 'outcome'],
  [COUNTER_NAMES.dispatchErrors]: ['gateway', 'code'],
  [COUNTER_NAMES.failovers]: ['gateway', 'to', 'outcome'],
  [COUNTER_NAMES.webhooksIn]: ['provider', 'verdict'],
  [COUNTER_NAMES.deliveries]: ['outcome'],
  [COUNTER_NAMES.endpointsDisabled]: [],
};

export function registerWorkCounters(registry: Registry, counters: Counters): void {
  for (const [name, labelNames] of Object.entries(LABELS)) {
    new Counter({
      name,
      help: COUNTER_HELP[name],
      labelNames,
      registers: [registry],
      collect() {
        this.reset();
        for (const s of counters.snapshot()) if (s.name === name && s.value > 0) this.inc(s.labels, s.value);
      },
    });
  }
}
