import type { Logger } from 'pino';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import {
  mayHaveReachedProvider,
  mayHaveReachedProviderIn,
  nextRoutes,
  nextRoutesIn,
  noteCircuitWait,
  noteCircuitWaitIn,
  reroute,
  rerouteIn,
  type RerouteOutcome,
  type RouteTarget,
} from '../core/routes.js';
import type { ChannelWithGateway } from '../core/channels.js';
import type { Queryable } from '../db/query.js';
import { countsAgainstGateway, failoverVerdict } from '../providers/failover-codes.js';
import type { GatewayKind } from '../core/context.js';
import type { SendResult } from '../providers/types.js';
import type { JobResult } from '../queue/settle.js';
import type { Admission, CircuitBreakers } from './circuit-breaker.js';

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
//
// On SQLite (`onConnection`) the reads and writes run synchronously on the connection, inside
// the claim or the worker's batch; on PostgreSQL the claim's reads go through its Tx
// (beforeCallIn), the reads after a call through the store (afterCallIn, outside any
// transaction), and a move is written through the batch's Tx.

export interface FailoverDeps {
  ctx: CoreCtx;
  breakers: CircuitBreakers;
  logger: Logger;
  counters?: Counters;
  /** SQLite: the synchronous forms on the connection; else the store's, through the Tx given. */
  onConnection: boolean;
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
    const adm = this.admit(gw);
    return adm ? this.heldNow(m, gw, adm, inFlightLeft) : null;
  }

  /** beforeCall for a refused admission, its reads on the SQLite connection. */
  heldNow(m: RouteTarget, gw: Gw, adm: Admission, inFlightLeft: boolean): JobResult {
    const { breakers, ctx } = this.deps;
    const next = mayHaveReachedProvider(ctx, m.id, inFlightLeft)
      ? undefined
      : nextRoutes(ctx, m, (id) => breakers.wouldAllow(id))[0];
    return this.held(m, gw, adm, next);
  }

  /** The circuit's refusal of a call through `gw`, or null when it takes it (beforeCallIn's first half). */
  admit(gw: Gw): Admission | null {
    const adm = this.deps.breakers.admit(gw.id);
    return adm.allowed ? null : adm;
  }

  /** beforeCall for a refused admission, its reads in the claim's transaction `q`. */
  async heldIn(q: Queryable, m: RouteTarget, gw: Gw, adm: Admission, inFlightLeft: boolean): Promise<JobResult> {
    const { breakers } = this.deps;
    const next = (await mayHaveReachedProviderIn(q, m.id, inFlightLeft))
      ? undefined
      : (await nextRoutesIn(q, m, (id) => breakers.wouldAllow(id)))[0];
    return this.held(m, gw, adm, next);
  }

  private held(m: RouteTarget, gw: Gw, adm: Admission, next: ChannelWithGateway | undefined): JobResult {
    if (next)
      return this.moveOn(m, gw, next, {
        code: 'circuit_open',
        message: `the circuit of gateway ${gw.name} is ${adm.state === 'open' ? 'open' : 'half-open with its probes out'}`,
      });
    const note =
      adm.state === 'open'
        ? `gateway ${gw.name} is failing (its circuit is open): the message waits until it takes calls again`
        : `gateway ${gw.name} is being probed after failing: the message waits for the outcome`;
    const { ctx } = this.deps;
    return {
      type: 'snooze',
      afterMs: adm.waitMs,
      apply: this.deps.onConnection
        ? () => noteCircuitWait(ctx, m.id, note)
        : (tx) => noteCircuitWaitIn(tx, ctx, m.id, note),
    };
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
    if (!this.mayMove(gw, result) || mayHaveReachedProvider(this.deps.ctx, m.id, uncertain)) return null;
    const { breakers, ctx } = this.deps;
    return this.movedAfter(m, gw, result, nextRoutes(ctx, m, (id) => breakers.wouldAllow(id))[0]);
  }

  /** afterCall, its reads through the store (outside any transaction), on either store. */
  async afterCallIn(m: RouteTarget, gw: Gw, result: SendResult, uncertain: boolean): Promise<JobResult | null> {
    if (!this.mayMove(gw, result)) return null;
    const { breakers, ctx } = this.deps;
    if (await mayHaveReachedProviderIn(ctx.store, m.id, uncertain)) return null;
    return this.movedAfter(m, gw, result, (await nextRoutesIn(ctx.store, m, (id) => breakers.wouldAllow(id)))[0]);
  }

  /** Records the call on the circuit; whether its outcome may move the message on. */
  private mayMove(gw: Gw, result: SendResult): boolean {
    const verdict = failoverVerdict(gw.kind, result);
    const why = result.outcome === 'accepted' ? undefined : (result.code ?? result.message.slice(0, 80));
    this.deps.breakers.record(gw.id, !countsAgainstGateway(gw.kind, result, verdict), why);
    return result.outcome !== 'accepted' && (verdict === 'not_accepted' || verdict === 'route_error');
  }

  private movedAfter(
    m: RouteTarget,
    gw: Gw,
    result: SendResult,
    next: ChannelWithGateway | undefined,
  ): JobResult | null {
    if (!next || result.outcome === 'accepted') return null;
    const verdict = failoverVerdict(gw.kind, result);
    return this.moveOn(m, gw, next, {
      code: result.code ?? (verdict === 'route_error' ? 'route_error' : 'not_accepted'),
      message: result.message,
    });
  }

  private moveOn(m: RouteTarget, gw: Gw, next: ChannelWithGateway, why: { code: string; message: string }): JobResult {
    const { ctx } = this.deps;
    return {
      type: 'snooze',
      afterMs: 0,
      apply: this.deps.onConnection
        ? () => this.moved(m, gw, next, why, reroute(ctx, m, gw, next, why))
        : async (tx) => this.moved(m, gw, next, why, await rerouteIn(tx, ctx, m, gw, next, why)),
    };
  }

  private moved(
    m: RouteTarget,
    gw: Gw,
    next: ChannelWithGateway,
    why: { code: string; message: string },
    r: RerouteOutcome,
  ): void {
    if (r.kind === 'settled') return;
    const { logger, counters } = this.deps;
    counters?.failover(gw.id, next.gateway_id, r.kind === 'rerouted' ? 'rerouted' : 'refused');
    logger.info(
      { messageId: m.id, from: gw.name, to: next.gateway_name, reason: why.code, outcome: r.kind },
      r.kind === 'rerouted'
        ? `message ${m.id} moves from ${gw.name} to ${next.gateway_name}: ${why.code}`
        : `message ${m.id} cannot move from ${gw.name} to ${next.gateway_name}: the partner's funds do not cover its price (failed, refunded)`,
    );
  }
}
