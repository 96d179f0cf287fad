import type { Metric, Registry } from 'prom-client';
import { DISPATCH_OUTCOMES, type Counters, type DispatchOutcome } from '../../core/counters.js';
import { gatewayKinds } from '../../providers/kinds.js';

// How long providers take to answer a send, per gateway kind and outcome, timed around the
// provider call in dispatch (src/jobs/dispatch.ts). Every series is made here, once, and a
// call adds to its arrays: no labels object, no key string, nothing allocated. prom-client's
// own Histogram builds both on every observe (some 2.4 µs a call on a loaded machine, against
// 0.1 µs here); the scrape writes the same text it would.

const NAME = 'msgd_provider_request_duration_seconds';
const HELP =
  'Provider calls to send a message, by gateway kind and outcome (sent, failed, retried), with their duration';
/** From a fast API answer to dispatch.timeoutMs (15 s by default, up to 120 s). */
const BOUNDS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120];

class Series {
  /** Calls per bucket (not cumulative); the last slot is above every bound. */
  readonly counts = new Float64Array(BOUNDS.length + 1);
  sum = 0;
  count = 0;
  constructor(readonly labels: { kind: string; outcome: DispatchOutcome }) {}

  observe(seconds: number): void {
    let i = 0;
    while (i < BOUNDS.length && seconds > BOUNDS[i]) i++;
    this.counts[i]++;
    this.sum += seconds;
    this.count++;
  }
}

export function registerProviderLatency(registry: Registry, counters: Counters): void {
  const byKind = new Map<string, Record<DispatchOutcome, Series>>();
  const bind = (kind: string) => {
    const series = Object.fromEntries(DISPATCH_OUTCOMES.map((outcome) => [outcome, new Series({ kind, outcome })]));
    byKind.set(kind, series as Record<DispatchOutcome, Series>);
    return series as Record<DispatchOutcome, Series>;
  };
  for (const { kind } of gatewayKinds.specs) bind(kind);
  counters.providerCalls = (kind, outcome, seconds) => (byKind.get(kind) ?? bind(kind))[outcome].observe(seconds);

  const get = async () => {
    const values = [];
    for (const series of byKind.values())
      for (const s of Object.values(series)) {
        // A kind and outcome with no call yet shows no series (7 kinds, 3 outcomes, 16 lines each).
        if (s.count === 0) continue;
        let acc = 0;
        for (let i = 0; i < BOUNDS.length; i++) {
          acc += s.counts[i];
          values.push({ metricName: `${NAME}_bucket`, labels: { le: BOUNDS[i] }, sharedLabels: s.labels, value: acc });
        }
        values.push({ metricName: `${NAME}_bucket`, labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count });
        values.push({ metricName: `${NAME}_sum`, labels: {}, sharedLabels: s.labels, value: s.sum });
        values.push({ metricName: `${NAME}_count`, labels: {}, sharedLabels: s.labels, value: s.count });
      }
    return { name: NAME, help: HELP, type: 'histogram', values, aggregator: 'sum' };
  };
  // The shape a registry reads from a metric: its name, type, get() and reset().
  const metric = {
    name: NAME,
    help: HELP,
    type: 'histogram',
    aggregator: 'sum',
    get,
    reset() {
      byKind.clear();
      for (const { kind } of gatewayKinds.specs) bind(kind);
    },
  };
  registry.registerMetric(metric as unknown as Metric);
}
