import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import {
  BEAT_MS,
  CounterWriter,
  pruneCounterBuckets,
  writeHeartbeat,
  type QueueGauges,
} from '../core/counter-store.js';
import { DISPATCH_JOB } from './dispatch.js';
import { stmt } from '../db/stmt.js';

// msgd's beat: every two seconds, in one small transaction, the counters that moved, the
// queue's depths and "alive, this version, since then". The console reads these from its
// own process; it never probes the instance lock, which a restarting msgd needs free.

/** Queue depths are counted up to this many (an index walk each beat must stay cheap). */
export const GAUGE_CAP = 100_000;

export interface Heartbeat {
  /** Write once more now (tests, and before a clean stop). */
  beat(): void;
  /** The last beat, marked stopped. */
  stop(): void;
}

export interface HeartbeatDeps {
  ctx: CoreCtx;
  counters: Counters;
  version: string;
  logger: Logger;
  intervalMs?: number;
}

export function queueGauges(ctx: CoreCtx): QueueGauges {
  const byKind = stmt<[string, string, number], { n: number }>(
    ctx.db.sqlite,
    'SELECT COUNT(*) AS n FROM (SELECT 1 FROM jobs WHERE kind = ? AND state = ? LIMIT ?)',
  );
  const dead = stmt<[number], { n: number }>(
    ctx.db.sqlite,
    `SELECT COUNT(*) AS n FROM (SELECT 1 FROM jobs WHERE state = 'dead' LIMIT ?)`,
  );
  return {
    waiting: byKind.get(DISPATCH_JOB, 'available', GAUGE_CAP)!.n,
    inFlight: byKind.get(DISPATCH_JOB, 'running', GAUGE_CAP)!.n,
    retrying: byKind.get(DISPATCH_JOB, 'retry', GAUGE_CAP)!.n,
    dead: dead.get(GAUGE_CAP)!.n,
    cap: GAUGE_CAP,
  };
}

export function startHeartbeat(deps: HeartbeatDeps): Heartbeat {
  const { ctx, counters } = deps;
  const startedAt = ctx.now();
  const writer = new CounterWriter(ctx);
  let lastPrune = 0;
  let stopped = false;
  const write = (running: boolean) => {
    const now = ctx.now();
    ctx.db.sqlite
      .transaction(() => {
        writer.write(counters.snapshot(), now);
        writeHeartbeat(ctx, {
          version: deps.version,
          pid: process.pid,
          startedAt,
          beatAt: now,
          running,
          gauges: queueGauges(ctx),
          host: hostname(),
        });
        if (now - lastPrune >= 3_600_000) {
          pruneCounterBuckets(ctx, now);
          lastPrune = now;
        }
      })
      .immediate();
  };
  const tick = () => {
    try {
      write(true);
    } catch (e) {
      // A busy database or a full disk skips one beat; the next one carries the counts.
      deps.logger.warn({ err: e }, 'heartbeat not written');
    }
  };
  tick();
  const timer = setInterval(tick, deps.intervalMs ?? BEAT_MS);
  timer.unref();
  return {
    beat: tick,
    stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      try {
        write(false);
      } catch (e) {
        deps.logger.warn({ err: e }, 'last heartbeat not written');
      }
    },
  };
}
