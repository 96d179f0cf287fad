import type { Logger } from 'pino';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import { mayHaveReachedProvider, nextRoutes, noteCircuitWait, reroute, type RouteTarget } from '../core/routes.js';
import { countsAgainstGateway, failoverVerdict } from '../providers/failover-codes.js';
import type { GatewayKind } from '../core/context.js';
import type { SendResult } from '../providers/types.js';
import type { JobResult } from '../queue/settle.js';
import type { CircuitBreakers } from './circuit-breaker.js';

// Failover for dispatch: the two hooks src/jobs/dispatch.ts calls around a provider call.
//
// Before the call (in the claim): a gateway whose circuit is open takes no call. The message
// moves to the next gateway of its partner's order that takes calls, at once; with none, it
// waits on the queue (queued, never refused) until the circuit lets a probe through.
//
// After the call: the outcome counts for or against the gateway's circuit, and a message the
// gateway certainly did not take (refused connection, a rate limit or 503 the provider documents
// as not accepted) or refused for a reason of the route (credentials, sender, account
// permissions) moves to the next gateway. A "maybe delivered" outcome (a timeout, a reset after
// sending, an unclear 5xx) never moves: it is retried on the same gateway, as is a message one of
// whose earlier attempts may have reached a provider. Moving is a snooze of no delay whose
// transaction charges the new gateway's price first (src/core/routes.ts): the next claim then
// sends it there.

export interface FailoverDeps {
  ctx: CoreCtx;
  breakers: CircuitBreakers;
  logger: Logger;
  counters?: Counters;
}

interface Gw {
  id: string;
  name: string;
  kind: GatewayKind;
}

export class Failover {
  constructor(private readonly deps: FailoverDeps) {}

  /**
   * In the claim, once the message is ready to go through `gw`: null when the gateway takes the
   * call (its circuit admitted it: record() or release() must follow), else how the message is
   * settled instead.
   */
  beforeCall(m: RouteTarget, gw: Gw, inFlightLeft: boolean): JobResult | null {
    const { breakers, ctx } = this.deps;
    const adm = breakers.admit(gw.id);
    if (adm.allowed) return null;
    if (!mayHaveReachedProvider(ctx, m.id, inFlightLeft)) {
      const next = nextRoutes(ctx, m, (id) => breakers.wouldAllow(id))[0];
      if (next)
        return this.moveOn(m, gw, next, {
          code: 'circuit_open',
          message: `the circuit of gateway ${gw.name} is ${adm.state === 'open' ? 'open' : 'half-open with its probes out'}`,
        });
    }
    const note =
      adm.state === 'open'
        ? `gateway ${gw.name} is failing (its circuit is open): the message waits until it takes calls again`
        : `gateway ${gw.name} is being probed after failing: the message waits for the outcome`;
    return { type: 'snooze', afterMs: adm.waitMs, apply: () => noteCircuitWait(ctx, m.id, note) };
  }

  /** A call admitted by beforeCall that never went out. */
  release(gatewayId: string): void {
    this.deps.breakers.release(gatewayId);
  }

  /**
   * After the call: records it on the circuit; returns how the message moves to its next
   * gateway, or null to settle the outcome as usual (sent, failed, retried on this gateway).
   */
  afterCall(m: RouteTarget, gw: Gw, result: SendResult, uncertain: boolean): JobResult | null {
    const { breakers, ctx } = this.deps;
    const verdict = failoverVerdict(gw.kind, result);
    const why = result.outcome === 'accepted' ? undefined : (result.code ?? result.message.slice(0, 80));
    breakers.record(gw.id, !countsAgainstGateway(gw.kind, result, verdict), why);
    if (verdict !== 'not_accepted' && verdict !== 'route_error') return null;
    if (result.outcome === 'accepted' || mayHaveReachedProvider(ctx, m.id, uncertain)) return null;
    const next = nextRoutes(ctx, m, (id) => breakers.wouldAllow(id))[0];
    if (!next) return null;
    return this.moveOn(m, gw, next, {
      code: result.code ?? (verdict === 'route_error' ? 'route_error' : 'not_accepted'),
      message: result.message,
    });
  }

  private moveOn(
    m: RouteTarget,
    gw: Gw,
    next: ReturnType<typeof nextRoutes>[number],
    why: { code: string; message: string },
  ): JobResult {
    const { ctx, logger, counters } = this.deps;
    return {
      type: 'snooze',
      afterMs: 0,
      apply: () => {
        const r = reroute(ctx, m, gw, next, why);
        if (r.kind === 'settled') return;
        counters?.failover(gw.id, next.gateway_id, r.kind === 'rerouted' ? 'rerouted' : 'refused');
        logger.info(
          { messageId: m.id, from: gw.name, to: next.gateway_name, reason: why.code, outcome: r.kind },
          r.kind === 'rerouted'
            ? `message ${m.id} moves from ${gw.name} to ${next.gateway_name}: ${why.code}`
            : `message ${m.id} cannot move from ${gw.name} to ${next.gateway_name}: the partner's funds do not cover its price (failed, refunded)`,
        );
      },
    };
  }
}
