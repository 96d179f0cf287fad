import { COUNTER_NAMES } from '../../core/counters.js';
import { readCounterWindows, readHeartbeat, serverState, type ServerState } from '../../core/counter-store.js';
import type { CoreCtx } from '../../core/context.js';
import { endpointHealthCounts } from '../../core/endpoints.js';
import { listGatewaySummaries } from '../../core/gateways.js';
import { lowBalancePartners, type LowBalance } from '../../core/partners.js';

// What the overview shows, read in a handful of statements off small tables and primary keys:
// the heartbeat row, the counter buckets of the last hour, partners and endpoints. Never the
// messages table, whatever its size.

export interface Tally {
  minute: number;
  hour: number;
}

export interface GatewayFigures {
  id: string;
  name: string;
  kind: string;
  status: string;
  sent: Tally;
  failed: Tally;
  retried: Tally;
  /** Errors of the last hour by provider code, most first. */
  errors: { code: string; hour: number }[];
}

export interface Overview {
  now: number;
  server: ServerState;
  queue: { waiting: number; inFlight: number; retrying: number; dead: number; cap: number } | null;
  gateways: GatewayFigures[];
  webhooksIn: { provider: string; verified: Tally; bad_signature: Tally; unroutable: Tally }[];
  deliveries: { ok: Tally; failed: Tally; failingEndpoints: number; disabledEndpoints: number };
  lowBalance: LowBalance[];
}

const zero = (): Tally => ({ minute: 0, hour: 0 });

export async function readOverview(ctx: CoreCtx, now = ctx.now()): Promise<Overview> {
  const server = serverState((await readHeartbeat(ctx)), now);
  const windows = (await readCounterWindows(ctx, now));
  const gws = new Map<string, GatewayFigures>();
  const rows = await listGatewaySummaries(ctx);
  for (const g of rows)
    gws.set(g.id, {
      id: g.id,
      name: g.name,
      kind: g.kind,
      status: g.status,
      sent: zero(),
      failed: zero(),
      retried: zero(),
      errors: [],
    });
  const providers = new Map<string, Overview['webhooksIn'][number]>();
  const deliveries = { ok: zero(), failed: zero() };
  for (const w of windows) {
    const t = { minute: w.lastMinute, hour: w.lastHour };
    if (w.name === COUNTER_NAMES.dispatch) {
      const g = gws.get(w.labels.gateway);
      const o = w.labels.outcome as 'sent' | 'failed' | 'retried';
      if (g && (o === 'sent' || o === 'failed' || o === 'retried')) g[o] = t;
    } else if (w.name === COUNTER_NAMES.dispatchErrors) {
      gws.get(w.labels.gateway)?.errors.push({ code: w.labels.code, hour: w.lastHour });
    } else if (w.name === COUNTER_NAMES.webhooksIn) {
      const p = w.labels.provider;
      let row = providers.get(p);
      if (!row) providers.set(p, (row = { provider: p, verified: zero(), bad_signature: zero(), unroutable: zero() }));
      const v = w.labels.verdict as 'verified' | 'bad_signature' | 'unroutable';
      if (v in row) row[v] = t;
    } else if (w.name === COUNTER_NAMES.deliveries) {
      const o = w.labels.outcome as 'ok' | 'failed';
      if (o === 'ok' || o === 'failed') deliveries[o] = t;
    }
  }
  for (const g of gws.values()) g.errors.sort((a, b) => b.hour - a.hour);
  const endpoints = await endpointHealthCounts(ctx);
  const lowBalance = await lowBalancePartners(ctx);
  const g = server.hb?.gauges;
  return {
    now,
    server,
    queue:
      g && typeof g.waiting === 'number'
        ? {
            waiting: g.waiting,
            inFlight: g.inFlight ?? 0,
            retrying: g.retrying ?? 0,
            dead: g.dead ?? 0,
            cap: g.cap ?? Infinity,
          }
        : null,
    // The gateways that need a look first: most failures, then most errors, then most traffic.
    gateways: [...gws.values()].sort(
      (a, b) =>
        b.failed.hour - a.failed.hour ||
        b.failed.minute - a.failed.minute ||
        b.errors.reduce((n, e) => n + e.hour, 0) - a.errors.reduce((n, e) => n + e.hour, 0) ||
        b.sent.hour - a.sent.hour ||
        a.name.localeCompare(b.name),
    ),
    webhooksIn: [...providers.values()].sort((a, b) => a.provider.localeCompare(b.provider)),
    deliveries: { ...deliveries, failingEndpoints: endpoints.failing, disabledEndpoints: endpoints.disabled },
    lowBalance,
  };
}
