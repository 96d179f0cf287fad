import type { Queryable } from '../db/query.js';
import {
  dropLines,
  keepPlaces,
  type LineChange,
  lockLines,
  type PlaceRow,
  pruneOrphanPlaces,
  respacedTails,
  saveLines,
  syncLine,
  takePlaces,
} from '../db/pg/gateway-lines.js';
import { type LineGateway, MAX_INLINE_WAIT_MS, type Turn } from './gateway-lines.js';

// The gateways' lines of several msgd on one PostgreSQL database: the same lines as
// src/jobs/gateway-lines.ts (a message that cannot go within maxInlineWaitMs takes the next free
// slot of its gateway's rate, a place, and is snoozed until then; at its place it goes; places
// that come due together go one slot apart), kept in the database instead of memory, so every
// instance gives out slots of the one rate, and a place taken on one instance is honoured by
// whichever instance claims the job at its time. A claim locks the lines of the gateways its
// jobs go to (gateway_lines, in its transaction), gives out its slots in claim order, and writes
// the lines and the new places back: four statements per claim, whatever its size (five when
// it claims a first place: the places pushed back before it, which it queues behind). Two
// instances claiming at once take turns on a gateway's row: the places each gives out are
// consecutive, in each claim's order.
//
// The lines' clock is the database's: a wait is counted from the lock statement's time.

/** A claimed job going to a gateway at `rate` messages per second. */
export interface LineAsk {
  jobId: number;
  gatewayId: string;
  rate: number;
}

/** Messages a second as the slot spacing in µs, the line's stored rate. */
const intervalUs = (rate: number) => Math.round(1_000_000 / rate);
/** As RateShaper: up to this much of a caller's lateness is kept, so a line runs at its rate. */
const LATE_SLACK_MS = 5;
const PRUNE_EVERY_MS = 10 * 60_000;

export class SharedGatewayLines {
  private readonly maxInlineWaitMs: number;
  private seen = new Map<string, LineGateway>();
  private seenGeneration = -1;
  private prunedAt = 0;
  /** Lines started over whose messages are still to be woken: [gateway, why, then]. */
  private wakes: [string, string, string?][] = [];

  constructor(opts: { maxInlineWaitMs?: number } = {}) {
    this.maxInlineWaitMs = opts.maxInlineWaitMs ?? MAX_INLINE_WAIT_MS;
  }

  /** The places the claimed jobs held, taken out of line (every claimed job leaves its place). */
  leave(tx: Queryable, jobIds: number[]): Promise<Map<number, PlaceRow>> {
    return takePlaces(tx, jobIds);
  }

  /**
   * Each ask's turn, in the claim's transaction `tx`: `places` are what leave() returned for the
   * claim. A job that must wait holds a place from now on (written here, with the lines).
   */
  async turns(tx: Queryable, asks: LineAsk[], places: Map<number, PlaceRow>): Promise<Turn[]> {
    if (asks.length === 0) return [];
    const rateOf = new Map<string, number>();
    for (const a of asks) if (!rateOf.has(a.gatewayId)) rateOf.set(a.gatewayId, a.rate);
    const ids = [...rateOf.keys()].sort();
    const rows = await lockLines(
      tx,
      ids,
      ids.map((id) => intervalUs(rateOf.get(id)!)),
    );
    const lines = new Map(
      rows.map((r) => [
        r.gateway_id,
        { line: Number(r.line), tat: Number(r.tat), nextGo: Number(r.next_go), tail: Number.NEGATIVE_INFINITY },
      ]),
    );
    // The last of the places pushed back (respaced) in each line, this claim's among them, when a
    // first place is claimed: it queues behind them.
    if ([...places.values()].some((p) => Number(p.respaced) === 0)) {
      const tails = await respacedTails(tx, ids);
      for (const p of places.values()) if (Number(p.respaced) === 1) tails.push({ ...p, at: Number(p.at) });
      for (const t of tails) {
        const l = lines.get(t.gateway_id);
        if (l && Number(t.line) === l.line) l.tail = Math.max(l.tail, Number(t.at));
      }
    }
    const now = Number(rows[0]!.now);
    const kept: PlaceRow[] = [];
    const turns = asks.map((a): Turn => {
      const l = lines.get(a.gatewayId)!;
      const interval = 1000 / a.rate;
      const p = places.get(a.jobId);
      if (p && p.gateway_id === a.gatewayId && Number(p.line) === l.line) {
        // At its place: it goes, one slot after the line's last call at the soonest. Early (a
        // snooze rolled back with its batch, or a claim that began before the slot): back to it.
        // Late, with others: one slot after the last, so a line that fell behind catches up at
        // the rate. Pushed back beyond the inline wait, it keeps a place there, and newcomers
        // queue behind it. A first place found late queues behind the places pushed back before
        // it too (the line's tail), so a line that fell behind keeps its order.
        const placeAt = Number(p.at);
        const respaced = Number(p.respaced) === 1;
        const at = Math.max(placeAt, l.nextGo, respaced ? 0 : l.tail + interval, now);
        const wait = Math.ceil(at - now);
        if (wait <= this.maxInlineWaitMs) {
          l.nextGo = Math.max(l.nextGo, at + interval);
          return { go: true, wait };
        }
        l.tat = Math.max(l.tat, at + interval);
        if (at > placeAt) l.tail = Math.max(l.tail, at);
        kept.push({ ...p, job_id: a.jobId, at, respaced: at > placeAt || respaced ? 1 : 0 });
        return { go: false, wait };
      }
      // A newcomer: the next free slot (GCRA, one slot apart, burst 1), and never before a place
      // that went late (the line's one chain of calls).
      const slot = Math.max(l.tat, l.nextGo, now - Math.min(interval, LATE_SLACK_MS));
      l.tat = slot + interval;
      const wait = slot <= now ? 0 : Math.ceil(slot - now);
      if (wait <= this.maxInlineWaitMs) {
        l.nextGo = Math.max(l.nextGo, slot + interval);
        return { go: true, wait };
      }
      kept.push({ job_id: a.jobId, gateway_id: a.gatewayId, line: l.line, at: now + wait, respaced: 0 });
      return { go: false, wait };
    });
    // Whole ms in the table: a slot rounded down is at most 1 ms early, which the next take's
    // slack (and the rate's spacing) absorbs.
    await saveLines(
      tx,
      ids,
      ids.map((id) => Math.ceil(lines.get(id)!.tat)),
      ids.map((id) => Math.ceil(lines.get(id)!.nextGo)),
    );
    await keepPlaces(tx, kept);
    return turns;
  }

  /**
   * As GatewayLines.watch, on the shared lines: when the gateways' generation moves, each
   * gateway is compared with its line in the database, and the first instance to see it
   * disabled, enabled, removed or given another rate starts the line over and wakes it. A line
   * made now (a gateway new to the database, or one whose messages were placed by an msgd that
   * kept its lines in memory) is woken too. The places are in the database, so a start wakes
   * nothing else. Each line is compared in a transaction of its own (`run`), and woken after it
   * commits, in another: a wake waits for the jobs other instances hold in their claims, which
   * wait for the line. A wake that fails is tried again before the next claim.
   */
  async watch(
    run: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T>,
    generation: number,
    gateways: () => LineGateway[],
    wake: (tx: Queryable, gatewayId: string, why: string, then?: string) => Promise<void>,
    now: number,
  ): Promise<void> {
    if (generation !== this.seenGeneration) {
      const next = new Map<string, LineGateway>();
      for (const gw of gateways()) {
        next.set(gw.id, gw);
        const change = await run((tx) =>
          syncLine(tx, { id: gw.id, intervalUs: intervalUs(gw.rate), active: gw.active }, this.maxInlineWaitMs),
        );
        const why = lineChangeWhy(change, gw);
        if (why) this.wakes.push([gw.id, ...why]);
      }
      for (const id of await run((tx) => dropLines(tx, [...next.keys()]))) {
        const name = this.seen.get(id)?.name ?? id;
        this.wakes.push([id, `gateway ${name} removed`, 'its waiting messages fail and are refunded']);
      }
      this.seen = next;
      this.seenGeneration = generation;
    }
    while (this.wakes.length > 0) {
      const [id, why, then] = this.wakes[0]!;
      await run((tx) => wake(tx, id, why, then));
      this.wakes.shift();
    }
    if (now - this.prunedAt >= PRUNE_EVERY_MS) {
      this.prunedAt = now;
      await run((tx) => pruneOrphanPlaces(tx));
    }
  }
}

function lineChangeWhy(change: LineChange, gw: LineGateway): [string, string?] | null {
  switch (change) {
    case null:
      return null;
    case 'new':
      return [`gateway ${gw.name} has a new line`];
    case 'disabled':
      return [`gateway ${gw.name} disabled`, 'its waiting messages wait until it is enabled'];
    case 'enabled':
      return [`gateway ${gw.name} enabled`];
    case 'rate':
      return [`gateway ${gw.name} rate changed to ${gw.rate}/s`];
  }
}
