// Work counters msgd keeps in memory as the work happens: dispatch attempts per gateway and
// outcome, provider webhooks in per provider and verdict, deliveries to partner endpoints per
// outcome, endpoints disabled. One source: the heartbeat writes them to the database every few
// seconds for the console (src/jobs/heartbeat.ts), and a metrics exporter reads snapshot()
// in-process. Increments are a Map lookup and an array slot: no allocation per event.

export const DISPATCH_OUTCOMES = ['sent', 'failed', 'retried'] as const;
export type DispatchOutcome = (typeof DISPATCH_OUTCOMES)[number];
export const WEBHOOK_VERDICTS = ['verified', 'bad_signature', 'unroutable'] as const;
export type WebhookVerdict = (typeof WEBHOOK_VERDICTS)[number];
export const DELIVERY_OUTCOMES = ['ok', 'failed'] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/** The counters' names and help, as a metrics exporter publishes them. */
export const COUNTER_NAMES = {
  dispatch: 'msgd_dispatch_attempts_total',
  webhooksIn: 'msgd_provider_webhooks_total',
  deliveries: 'msgd_webhook_deliveries_total',
  endpointsDisabled: 'msgd_webhook_endpoints_disabled_total',
  dispatchErrors: 'msgd_dispatch_errors_total',
  failovers: 'msgd_dispatch_failovers_total',
} as const;

/** Distinct error codes kept per gateway; further codes count as "other". */
const MAX_CODES = 50;

export const COUNTER_HELP: Record<string, string> = {
  [COUNTER_NAMES.dispatch]: 'Provider calls to send a message, by gateway and outcome (sent, failed, retried).',
  [COUNTER_NAMES.webhooksIn]:
    'Provider webhooks received, by provider and verdict (verified, bad_signature, unroutable).',
  [COUNTER_NAMES.deliveries]: 'Delivery attempts to partner webhook endpoints, by outcome (ok, failed).',
  [COUNTER_NAMES.endpointsDisabled]: 'Partner webhook endpoints disabled for failing (or answering 410 Gone).',
  [COUNTER_NAMES.dispatchErrors]: 'Provider calls that failed or will be retried, by gateway and error code.',
  [COUNTER_NAMES.failovers]:
    "Messages moved from a gateway (gateway) to the next of its partner's order (to), by outcome (rerouted, or refused: the partner's funds did not cover the dearer route).",
};

export const FAILOVER_OUTCOMES = ['rerouted', 'refused'] as const;
export type FailoverOutcome = (typeof FAILOVER_OUTCOMES)[number];

export interface CounterSample {
  name: string;
  labels: Record<string, string>;
  /** Cumulative since this process started. */
  value: number;
}

const DISPATCH_INDEX: Record<DispatchOutcome, number> = { sent: 0, failed: 1, retried: 2 };
const VERDICT_INDEX: Record<WebhookVerdict, number> = { verified: 0, bad_signature: 1, unroutable: 2 };
const DELIVERY_INDEX: Record<DeliveryOutcome, number> = { ok: 0, failed: 1 };

function slot(map: Map<string, number[]>, key: string, size: number): number[] {
  let a = map.get(key);
  if (a === undefined) map.set(key, (a = new Array<number>(size).fill(0)));
  return a;
}

/** Each provider call's duration in seconds, by gateway kind and outcome (a metrics exporter's histogram). */
export type ProviderCallObserver = (kind: string, outcome: DispatchOutcome, seconds: number) => void;

export class Counters {
  /** Set by a metrics exporter when metrics are on; dispatch times its provider calls only then. */
  providerCalls: ProviderCallObserver | null = null;
  private readonly dispatchBy = new Map<string, number[]>();
  private readonly errorsBy = new Map<string, Map<string, number>>();
  private readonly webhooksBy = new Map<string, number[]>();
  private readonly failoversBy = new Map<string, number>();
  private readonly deliveryCounts = [0, 0];
  private disabled = 0;

  /** One provider call's outcome for a message on `gatewayId`, with the error code of one that did not succeed. */
  dispatch(gatewayId: string, outcome: DispatchOutcome, code?: string): void {
    slot(this.dispatchBy, gatewayId, 3)[DISPATCH_INDEX[outcome]]++;
    if (outcome === 'sent') return;
    let codes = this.errorsBy.get(gatewayId);
    if (codes === undefined) this.errorsBy.set(gatewayId, (codes = new Map()));
    let c = code || 'unknown';
    if (!codes.has(c)) {
      // A code is a provider's word: kept out of the label syntax, and bounded.
      c = codes.size >= MAX_CODES ? 'other' : c.replace(/[,=|]/g, '_').slice(0, 64);
    }
    codes.set(c, (codes.get(c) ?? 0) + 1);
  }

  /** A message moved from one gateway to the next of its partner's order (src/jobs/failover.ts). */
  failover(fromGatewayId: string, toGatewayId: string, outcome: FailoverOutcome): void {
    const key = `${fromGatewayId}\0${toGatewayId}\0${outcome}`;
    this.failoversBy.set(key, (this.failoversBy.get(key) ?? 0) + 1);
  }

  /** A provider webhook verified or refused at the door, or found unroutable once processed. */
  webhookIn(provider: string, verdict: WebhookVerdict): void {
    slot(this.webhooksBy, provider, 3)[VERDICT_INDEX[verdict]]++;
  }

  delivery(outcome: DeliveryOutcome): void {
    this.deliveryCounts[DELIVERY_INDEX[outcome]]++;
  }

  endpointDisabled(): void {
    this.disabled++;
  }

  /** Every series with its cumulative value, labels included (series never seen are left out). */
  snapshot(): CounterSample[] {
    const out: CounterSample[] = [];
    for (const [gateway, a] of this.dispatchBy)
      DISPATCH_OUTCOMES.forEach((outcome, i) =>
        out.push({ name: COUNTER_NAMES.dispatch, labels: { gateway, outcome }, value: a[i] }),
      );
    for (const [gateway, codes] of this.errorsBy)
      for (const [code, value] of codes)
        out.push({ name: COUNTER_NAMES.dispatchErrors, labels: { gateway, code }, value });
    for (const [key, value] of this.failoversBy) {
      const [gateway, to, outcome] = key.split('\0');
      out.push({ name: COUNTER_NAMES.failovers, labels: { gateway, to, outcome }, value });
    }
    for (const [provider, a] of this.webhooksBy)
      WEBHOOK_VERDICTS.forEach((verdict, i) =>
        out.push({ name: COUNTER_NAMES.webhooksIn, labels: { provider, verdict }, value: a[i] }),
      );
    DELIVERY_OUTCOMES.forEach((outcome, i) =>
      out.push({ name: COUNTER_NAMES.deliveries, labels: { outcome }, value: this.deliveryCounts[i] }),
    );
    out.push({ name: COUNTER_NAMES.endpointsDisabled, labels: {}, value: this.disabled });
    return out;
  }
}

/** Labels as stored: "k=v,k=v" with sorted keys; "" for none. */
export function labelKey(labels: Record<string, string>): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(',');
}

export function parseLabelKey(key: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!key) return out;
  for (const part of key.split(',')) {
    const eq = part.indexOf('=');
    out[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return out;
}
