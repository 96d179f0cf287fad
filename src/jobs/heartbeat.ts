import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import {
  BEAT_MS,
  CounterWriter,
  counterTotals,
  pruneCounterBuckets,
  removeOtherInstances,
  storeNow,
  upkeepInstances,
  writeHeartbeat,
  type QueueGauges,
} from '../core/counter-store.js';
import type { Leader } from '../db/leader.js';
import { newId } from '../lib/ids.js';
import { DISPATCH_JOB } from './dispatch.js';
import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';

// msgd's beat: every two seconds, in one small transaction, the counters that moved and the
// instance's row: "alive, this version, since then, leader or not, what it counted". The
// leader also reads the queue's depths into its row, marks dead the instances that stopped
// beating and prunes old rows (src/core/counter-store.ts). The console reads these from its
// own process; it never probes the instance lock, which a restarting msgd needs free.

/** Queue depths are counted up to this many (an index walk each beat must stay cheap). */
export const GAUGE_CAP = 100_000;

export interface Heartbeat {
  /** This instance's id (its row). */
  readonly id: string;
  /** Write once more now (tests); resolves when written (or its failure logged). */
  beat(): Promise<void>;
  /** The last beat, marked stopped; resolves when written (or its failure logged). */
  stop(): Promise<void>;
}

export interface HeartbeatDeps {
  ctx: CoreCtx;
  counters: Counters;
  version: string;
  logger: Logger;
  intervalMs?: number;
  /** Whether this instance leads (its beat then does the upkeep); the one process on SQLite when omitted. */
  leader?: Pick<Leader, 'isLeader'>;
  /**
   * No other msgd can be running on this store (SQLite: this process holds the data
   * directory's lock): the rows of any other instance are a gone process's, removed at start.
   */
  alone?: boolean;
}

/** The queue's depths, in `q` (the beat's transaction, or the store). */
export async function queueGauges(q: Queryable): Promise<QueueGauges> {
  const byKind = async (state: string) =>
    (await q.get<{ n: number }>(
      sql`SELECT COUNT(*) AS n FROM (SELECT 1 FROM jobs WHERE kind = ${DISPATCH_JOB} AND state = ${state} LIMIT ${GAUGE_CAP}) j`,
    ))!.n;
  return {
    waiting: await byKind('available'),
    inFlight: await byKind('running'),
    retrying: await byKind('retry'),
    dead: (await q.get<{ n: number }>(
      sql`SELECT COUNT(*) AS n FROM (SELECT 1 FROM jobs WHERE state = 'dead' LIMIT ${GAUGE_CAP}) j`,
    ))!.n,
    cap: GAUGE_CAP,
  };
}

/** Starts beating; resolves once the first beat is written (or its failure logged). */
export async function startHeartbeat(deps: HeartbeatDeps): Promise<Heartbeat> {
  const { ctx, counters } = deps;
  const id = newId('ins');
  const isLeader = () => deps.leader?.isLeader() ?? true;
  // On the store's clock (PostgreSQL's server), as every beat is.
  const startedAt = await storeNow(ctx);
  const writer = new CounterWriter();
  let lastPrune = 0;
  let stopped = false;
  let first = true;
  let gauges: Partial<QueueGauges> = {};
  // One beat at a time: beats are written in order, and a timer's beat is skipped while the one
  // before is still being written (a slow store), rather than piling up.
  let chain: Promise<void> = Promise.resolve();
  let pending = 0;
  const write = (running: boolean): Promise<void> => {
    const now = ctx.now();
    pending++;
    const next = chain.then(() =>
      ctx.store.transaction(async (tx) => {
        const samples = counters.snapshot();
        await writer.write(tx, samples, now);
        // Leading is read once per beat: the row says what this beat did.
        const leading = running && isLeader();
        await writeHeartbeat(
          ctx,
          {
            id,
            version: deps.version,
            pid: process.pid,
            startedAt,
            beatAt: now,
            running,
            // The queue is the cluster's: its depths are read once per beat, by the leader (and
            // kept in its last row, as it last saw them).
            gauges: (gauges = leading ? await queueGauges(tx) : running ? {} : gauges),
            host: hostname(),
            leader: leading,
            counters: counterTotals(samples),
          },
          tx,
        );
        if (first && deps.alone) await removeOtherInstances(tx, id);
        first = false;
        const prune = now - lastPrune >= 3_600_000;
        if (leading) await upkeepInstances(ctx, tx, now, prune);
        if (prune) {
          await pruneCounterBuckets(tx, now);
          lastPrune = now;
        }
      }),
    );
    const done = () => {
      pending--;
    };
    chain = next.then(done, done);
    return next;
  };
  const tick = async () => {
    if (stopped) return;
    try {
      await write(true);
    } catch (e) {
      // A busy database or a full disk skips one beat; the next one carries the counts.
      deps.logger.warn({ err: e }, 'heartbeat not written');
    }
  };
  await tick();
  const timer = setInterval(() => {
    if (pending === 0) void tick();
  }, deps.intervalMs ?? BEAT_MS);
  timer.unref();
  return {
    id,
    beat: tick,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      try {
        await write(false);
      } catch (e) {
        deps.logger.warn({ err: e }, 'last heartbeat not written');
      }
    },
  };
}
