import type { RateShaper } from '../queue/rate.js';

// The gateways' lines. A message that cannot go within maxInlineWaitMs reserves the next free
// slot of its gateway's rate (the shaper's TAT moves past it, so whoever asks next gets the
// slot after) and is snoozed until then: a place in line, first come first served, one slot
// apart. At its place it goes without asking again. Kept in memory, as the shaper is: a place
// whose snooze was rolled back is found again here, and when msgd starts every waiting message
// is woken to take a new place in the order it was accepted (see watch()).

/** Waits up to this long in-process for the gateway's rate; longer waits take a place in line. */
export const MAX_INLINE_WAIT_MS = 250;

interface Place {
  gatewayId: string;
  at: number;
  /** The gateway's line it was given in: a rate change or re-enable starts a new line. */
  line: number;
  /** Moved back behind others that fell due with it (a line that fell behind). */
  respaced?: boolean;
}

/** A gateway as the lines see it: a change of status or rate starts its line over. */
export interface LineGateway {
  id: string;
  name: string;
  active: boolean;
  /** Messages per second. */
  rate: number;
}

/** The messages waiting for a gateway (null: every active one) must take new places. */
export type WakeLine = (gatewayId: string | null, why: string, then?: string) => void;

/** A message's turn: go after `wait` ms, or wait `wait` ms at the place it now holds. */
export interface Turn {
  go: boolean;
  wait: number;
  /**
   * Lines kept on another clock than msgd's (the database's: src/jobs/shared-lines.ts): when
   * the wait ends on msgd's clock (a call goes, a place's job falls due), and a place's job's
   * run_at on the database's clock, which the claim compares it with.
   */
  localAt?: number;
  runAt?: number;
}

export interface GatewayLinesOptions {
  shaper: RateShaper;
  now: () => number;
  maxInlineWaitMs?: number;
}

export class GatewayLines {
  private readonly shaper: RateShaper;
  private readonly now: () => number;
  private readonly maxInlineWaitMs: number;
  private readonly places = new Map<number, Place>();
  private readonly lineOf = new Map<string, number>();
  // Per gateway, the earliest a message from its line may go: places that come due together
  // (claimed late, after a stall or with every slot busy) go one slot apart, not in a burst.
  private readonly nextGo = new Map<string, number>();
  private seen = new Map<string, LineGateway>();
  private seenGeneration = -1;

  constructor(opts: GatewayLinesOptions) {
    this.shaper = opts.shaper;
    this.now = opts.now;
    this.maxInlineWaitMs = opts.maxInlineWaitMs ?? MAX_INLINE_WAIT_MS;
  }

  /** Takes the job out of line: its place if it holds one in the gateway's current line. */
  leave(jobId: number, gatewayId: string | null): Place | undefined {
    const p = this.places.get(jobId);
    if (p === undefined) return undefined;
    this.places.delete(jobId);
    if (p.gatewayId === gatewayId && p.line === (this.lineOf.get(p.gatewayId) ?? 0)) return p;
    return undefined;
  }

  /**
   * When the job goes on the gateway at `rate`/s, given the place leave() returned. A wait
   * beyond maxInlineWaitMs gives it a place that far ahead, which leave() hands back when the
   * job is claimed again.
   */
  turn(jobId: number, gatewayId: string, rate: number, place: Place | undefined): Turn {
    const now = this.now();
    const interval = 1000 / rate;
    if (place) {
      // At its place: it goes. Early (a snooze rolled back with its batch): back to it. Late,
      // with others: one slot after the last, so a line that fell behind catches up at the rate.
      // A place handed out again below is a slot of its own already: only a first place can find
      // others ahead of it.
      const at = Math.max(place.at, place.respaced ? 0 : (this.nextGo.get(gatewayId) ?? 0), now);
      const wait = Math.ceil(at - now);
      if (wait <= this.maxInlineWaitMs || at > place.at) this.spaceAfter(gatewayId, at, interval);
      if (wait <= this.maxInlineWaitMs) return { go: true, wait };
      this.places.set(jobId, { ...place, at, respaced: at > place.at || place.respaced });
      return { go: false, wait };
    }
    const wait = this.shaper.take(gatewayId, rate, 1, Infinity);
    if (wait <= this.maxInlineWaitMs) {
      this.spaceAfter(gatewayId, now + wait, interval);
      return { go: true, wait };
    }
    this.places.set(jobId, { gatewayId, at: now + wait, line: this.lineOf.get(gatewayId) ?? 0 });
    return { go: false, wait };
  }

  /**
   * Compares the gateways with those last seen when their generation moves: the first look
   * (msgd started) wakes every line; a gateway disabled, enabled, removed or given another rate
   * starts its line over and wakes it. Only once every wake succeeded is the generation marked
   * seen: a throw has the same changes looked at again next time.
   */
  watch(generation: number, gateways: () => LineGateway[], wake: WakeLine): void {
    if (generation === this.seenGeneration) return;
    const first = this.seenGeneration === -1;
    if (first) wake(null, 'msgd started');
    const next = new Map<string, LineGateway>();
    for (const gw of gateways()) {
      next.set(gw.id, gw);
      const was = this.seen.get(gw.id);
      if (first || !was) continue;
      if (was.active && !gw.active)
        this.restart(gw.id, wake, `gateway ${gw.name} disabled`, 'its waiting messages wait until it is enabled');
      else if (!was.active && gw.active) this.restart(gw.id, wake, `gateway ${gw.name} enabled`);
      else if (gw.active && was.rate !== gw.rate)
        this.restart(gw.id, wake, `gateway ${gw.name} rate changed to ${gw.rate}/s`);
    }
    for (const [id, was] of this.seen) {
      if (!next.has(id))
        this.restart(id, wake, `gateway ${was.name} removed`, 'its waiting messages fail and are refunded');
    }
    this.seen = next;
    this.seenGeneration = generation;
  }

  /** The next message from the gateway's line goes no sooner than one slot after `at`. */
  private spaceAfter(gatewayId: string, at: number, interval: number) {
    this.nextGo.set(gatewayId, Math.max(this.nextGo.get(gatewayId) ?? 0, at + interval));
  }

  private restart(gatewayId: string, wake: WakeLine, why: string, then?: string) {
    this.lineOf.set(gatewayId, (this.lineOf.get(gatewayId) ?? 0) + 1);
    this.nextGo.delete(gatewayId);
    // Slots already reserved within the inline wait stay; the line beyond them starts over.
    this.shaper.rebase(gatewayId, this.maxInlineWaitMs);
    wake(gatewayId, why, then);
  }
}
