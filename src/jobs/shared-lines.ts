import type { Queryable } from '../db/query.js';
import {
  dropLines,
  keepPlaces,
  type LineChange,
  lockLines,
  type PlaceRow,
  pendingPlaces,
  pruneOrphanPlaces,
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
// jobs go to (gateway_lines, in its transaction), reads the places still waiting in them, gives
// out its turns in line order, and writes the lines and the new places back: five statements per
// claim, whatever its size. Two instances claiming at once take turns on a gateway's row: the
// places each gives out are consecutive, in each claim's order.
//
// A line goes in its order however late its claims are (a busy machine, a stall, a claim that
// waited for another's lock): a job goes only when no place ahead of it in its line is still
// waiting outside its claim; otherwise it takes a place behind them. Line order: the places
// pushed back behind others (respaced) are ahead of every first place still waiting, each in the
// order of its slots, and newcomers are behind every place.
//
// The lines' clock is the database's: a wait is counted from the time the line's row was locked.
// A place's job falls due on that clock too: its run_at is its slot less the lead (CLAIM_LEAD_MS),
// the same for every place, so places fall due in the order of their slots whichever claim gave
// them (a claim's start, on msgd's clock, is no measure: what runs before the lock differs from
// claim to claim). A call's time on msgd's clock is its slot less the database's clock at the
// start of the lock statement, plus msgd's just before it was sent: neither a wait for the row
// nor a stall of msgd after the lock moves it.

/** A claimed job going to a gateway at `rate` messages per second. */
export interface LineAsk {
  jobId: number;
  gatewayId: string;
  rate: number;
}

/** Where a job stands in its gateway's line: [0: a place pushed back, 1: a first place, 2: a newcomer; its slot]. */
type Rank = [number, number];
const byRank = (a: Rank, b: Rank) => a[0] - b[0] || a[1] - b[1];

/** Messages a second as the slot spacing in µs, the line's stored rate. */
const intervalUs = (rate: number) => Math.round(1_000_000 / rate);
/** As RateShaper: up to this much of a caller's lateness is kept, so a line runs at its rate. */
const LATE_SLACK_MS = 5;
/**
 * A place's job falls due this long before its slot: the claim that finds it, and the commit
 * that must precede its call (several round trips), take place before the slot, and the call
 * waits out the rest in-process, at its slot.
 */
export const CLAIM_LEAD_MS = 100;
const PRUNE_EVERY_MS = 10 * 60_000;

export class SharedGatewayLines {
  private readonly maxInlineWaitMs: number;
  private readonly leadMs: number;
  private readonly now: () => number;
  private seen = new Map<string, LineGateway>();
  private seenGeneration = -1;
  private prunedAt = 0;
  /** Lines started over whose messages are still to be woken: [gateway, why, then]. */
  private wakes: [string, string, string?][] = [];

  /** `now`: msgd's clock, on which a turn's localAt is given. */
  constructor(opts: { maxInlineWaitMs?: number; now?: () => number } = {}) {
    this.maxInlineWaitMs = opts.maxInlineWaitMs ?? MAX_INLINE_WAIT_MS;
    // Claimed that early, a place still goes within the inline wait.
    this.leadMs = Math.min(CLAIM_LEAD_MS, this.maxInlineWaitMs / 2);
    this.now = opts.now ?? Date.now;
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
    // msgd's clock just before the lock statement is sent, and the database's as it began.
    const sentAt = this.now();
    const rows = await lockLines(
      tx,
      ids,
      ids.map((id) => intervalUs(rateOf.get(id)!)),
    );
    const lines = new Map(
      rows.map((r) => [
        r.gateway_id,
        {
          line: Number(r.line),
          tat: Number(r.tat),
          nextGo: Number(r.next_go),
          /** The last place pushed back (respaced) in the line: a first place queues behind it. */
          tail: Number.NEGATIVE_INFINITY,
          /** The first place still waiting outside this claim, ranked as `rank` ranks asks. */
          pending: undefined as Rank | undefined,
        },
      ]),
    );
    const pending = await pendingPlaces(
      tx,
      ids,
      ids.map((id) => lines.get(id)!.line),
    );
    for (const r of pending) {
      const l = lines.get(r.gateway_id)!;
      if (r.respaced_last !== null) l.tail = Number(r.respaced_last);
      if (r.first_at !== null) l.pending = [Number(r.first_respaced) === 1 ? 0 : 1, Number(r.first_at)];
    }
    // This claim's places pushed back before are the line's tail too.
    for (const p of places.values()) {
      const l = lines.get(p.gateway_id);
      if (l && Number(p.line) === l.line && Number(p.respaced) === 1) l.tail = Math.max(l.tail, Number(p.at));
    }
    const now = Number(rows[0]!.now);
    const local = (at: number) => sentAt + (at - Number(rows[0]!.began));
    const kept: PlaceRow[] = [];
    /** A job that waits at its place (`at`, whole ms, as kept): due the lead before it. */
    const place = (row: PlaceRow): Turn => {
      kept.push(row);
      const runAt = row.at - this.leadMs;
      return { go: false, wait: Math.ceil(row.at - now), localAt: local(runAt), runAt };
    };
    /** The place a job holds in its gateway's current line, if any. */
    const placeOf = (a: LineAsk) => {
      const p = places.get(a.jobId);
      return p && p.gateway_id === a.gatewayId && Number(p.line) === lines.get(a.gatewayId)!.line ? p : undefined;
    };
    /** Where a job stands in its line (compared as [kind, slot]): respaced places, first places, newcomers. */
    const rank = (a: LineAsk): Rank => {
      const p = placeOf(a);
      return p ? [Number(p.respaced) === 1 ? 0 : 1, Number(p.at)] : [2, 0];
    };
    // The claim's turns in line order, not in the claim's (the jobs' due times, which pushing
    // places back changes). Lines are apart: the order of different gateways' asks does not matter.
    const ranks = asks.map(rank);
    const order = asks.map((_, i) => i).sort((i, j) => byRank(ranks[i]!, ranks[j]!) || i - j);
    const turnOf = (a: LineAsk, p: PlaceRow | undefined, r: Rank): Turn => {
      const l = lines.get(a.gatewayId)!;
      const interval = 1000 / a.rate;
      // A place ahead of it is still waiting (not yet claimed, or claimed by another instance
      // that has not committed): it does not go before that one, it takes a place behind it.
      const behind = l.pending !== undefined && byRank(l.pending, r) < 0;
      if (p) {
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
        if (wait <= this.maxInlineWaitMs && !behind) {
          l.nextGo = Math.max(l.nextGo, at + interval);
          return { go: true, wait, localAt: local(now + wait) };
        }
        l.tat = Math.max(l.tat, at + interval);
        if (at > placeAt) l.tail = Math.max(l.tail, at);
        return place({ ...p, job_id: a.jobId, at: Math.ceil(at), respaced: at > placeAt || respaced ? 1 : 0 });
      }
      // A newcomer: the next free slot (GCRA, one slot apart, burst 1), and never before a place
      // that went late (the line's one chain of calls).
      const slot = Math.max(l.tat, l.nextGo, now - Math.min(interval, LATE_SLACK_MS));
      l.tat = slot + interval;
      const wait = slot <= now ? 0 : Math.ceil(slot - now);
      if (wait <= this.maxInlineWaitMs && !behind) {
        l.nextGo = Math.max(l.nextGo, slot + interval);
        return { go: true, wait, localAt: local(now + wait) };
      }
      return place({ job_id: a.jobId, gateway_id: a.gatewayId, line: l.line, at: now + wait, respaced: 0 });
    };
    const turns: Turn[] = new Array(asks.length);
    for (const i of order) turns[i] = turnOf(asks[i]!, placeOf(asks[i]!), ranks[i]!);
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
