import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';
import type { CoreCtx } from './context.js';
import { labelKey, parseLabelKey, type CounterSample } from './counters.js';

// The counters and heartbeat in the database: msgd adds what moved since its last write to
// the current 10-second bucket; the console (another process) reads sums over the last minute
// and hour off the primary key, and the heartbeat row, never the messages table.

export const BUCKET_MS = 10_000;
/** Buckets older than this are pruned. */
export const KEEP_BUCKETS_MS = 24 * 3_600_000;
/** msgd beats this often; a beat older than STALE_AFTER_MS means it is gone or stuck. */
export const BEAT_MS = 2_000;
export const STALE_AFTER_MS = 10_000;

export const bucketOf = (ms: number) => ms - (ms % BUCKET_MS);

/**
 * Remembers what was written so each write adds only the change. Deltas, not totals, so two
 * msgd lifetimes (a restart within the minute) add up instead of overwriting each other.
 */
export class CounterWriter {
  private readonly written = new Map<string, number>();

  /**
   * Add the moves since the last call to the bucket of `now`, in `q` (the beat's transaction);
   * returns how many series moved. What was written is remembered once `q` has taken it.
   */
  async write(q: Queryable, samples: CounterSample[], now: number): Promise<number> {
    const bucket = bucketOf(now);
    const moves: { key: string; value: number }[] = [];
    for (const s of samples) {
      const labels = labelKey(s.labels);
      const key = `${s.name}|${labels}`;
      const delta = s.value - (this.written.get(key) ?? 0);
      if (delta <= 0) continue;
      await q.run(
        sql`INSERT INTO counter_buckets (bucket, name, labels, value) VALUES (${bucket}, ${s.name}, ${labels}, ${delta})
            ON CONFLICT (bucket, name, labels) DO UPDATE SET value = counter_buckets.value + excluded.value`,
      );
      moves.push({ key, value: s.value });
    }
    for (const m of moves) this.written.set(m.key, m.value);
    return moves.length;
  }
}

export async function pruneCounterBuckets(q: Queryable, now: number): Promise<number> {
  return (await q.run(sql`DELETE FROM counter_buckets WHERE bucket < ${bucketOf(now) - KEEP_BUCKETS_MS}`)).changes;
}

export interface CounterWindow {
  name: string;
  labels: Record<string, string>;
  lastMinute: number;
  lastHour: number;
}

/** Each series' sum over the last minute and the last hour (six and 360 buckets, the current one included). */
export async function readCounterWindows(ctx: CoreCtx, now: number): Promise<CounterWindow[]> {
  const current = bucketOf(now);
  const rows = await ctx.store.all<{ name: string; labels: string; minute: number; hour: number }>(
    sql`SELECT name, labels, CAST(SUM(CASE WHEN bucket >= ${current - 5 * BUCKET_MS} THEN value ELSE 0 END) AS BIGINT) AS minute,
               CAST(SUM(value) AS BIGINT) AS hour
          FROM counter_buckets WHERE bucket >= ${current - 359 * BUCKET_MS} GROUP BY name, labels`,
  );
  return rows.map((r) => ({ name: r.name, labels: parseLabelKey(r.labels), lastMinute: r.minute, lastHour: r.hour }));
}

export interface QueueGauges {
  /** Messages waiting for their dispatch (in line or due). */
  waiting: number;
  /** Messages with a provider call under way. */
  inFlight: number;
  /** Messages waiting to try their provider again. */
  retrying: number;
  /** Jobs of any kind that used up their attempts. */
  dead: number;
  /** Counts stop here: a figure equal to it means "at least". */
  cap: number;
}

export interface HeartbeatRow {
  version: string;
  pid: number;
  startedAt: number;
  beatAt: number;
  running: boolean;
  gauges: Partial<QueueGauges>;
  /** os.hostname() of msgd's host; null in rows written before it was kept. */
  host?: string | null;
}

/** The one heartbeat row, in `q` (the beat's transaction, or the store). */
export async function writeHeartbeat(ctx: CoreCtx, hb: HeartbeatRow, q: Queryable = ctx.store): Promise<void> {
  await q.run(
    sql`INSERT INTO heartbeat (id, version, pid, started_at, beat_at, running, gauges, host)
        VALUES (1, ${hb.version}, ${hb.pid}, ${hb.startedAt}, ${hb.beatAt}, ${hb.running ? 1 : 0}, ${JSON.stringify(hb.gauges)}, ${hb.host ?? null})
        ON CONFLICT (id) DO UPDATE SET version = excluded.version, pid = excluded.pid, started_at = excluded.started_at,
          beat_at = excluded.beat_at, running = excluded.running, gauges = excluded.gauges, host = excluded.host`,
  );
}

export async function readHeartbeat(ctx: CoreCtx): Promise<HeartbeatRow | null> {
  const r = await ctx.store.get<{
    version: string;
    pid: number;
    started_at: number;
    beat_at: number;
    running: number;
    gauges: string;
    host: string | null;
  }>(sql`SELECT version, pid, started_at, beat_at, running, gauges, host FROM heartbeat WHERE id = 1`);
  if (!r) return null;
  let gauges: Partial<QueueGauges> = {};
  try {
    gauges = JSON.parse(r.gauges);
  } catch {
    // A row written by hand: no gauges rather than no console.
  }
  return {
    version: r.version,
    pid: r.pid,
    startedAt: r.started_at,
    beatAt: r.beat_at,
    running: r.running === 1,
    gauges,
    host: r.host,
  };
}

export type ServerState =
  { state: 'running'; hb: HeartbeatRow } | { state: 'stopped' | 'silent'; hb: HeartbeatRow | null };

/** Is msgd running on this data directory, from its heartbeat alone (never its instance lock)? */
export function serverState(hb: HeartbeatRow | null, now: number): ServerState {
  if (!hb || !hb.running) return { state: 'stopped', hb };
  return now - hb.beatAt <= STALE_AFTER_MS ? { state: 'running', hb } : { state: 'silent', hb };
}

const CONFIG_FILE_KEY = 'server_config_file';

/**
 * The config file the msgd serving this data directory read (null: none, defaults and MSGD_*
 * variables), written at each start so msgctl doctor can tell an operator whose msgctl reads
 * another one (and so builds links on another publicUrl or port).
 */
export async function writeServerConfigFile(ctx: CoreCtx, path: string | null): Promise<void> {
  await ctx.store.run(
    sql`INSERT INTO meta (key, value) VALUES (${CONFIG_FILE_KEY}, ${JSON.stringify({ path })})
        ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
  );
}

/** What writeServerConfigFile recorded; undefined when no msgd has started here since it could. */
export async function readServerConfigFile(ctx: CoreCtx): Promise<{ path: string | null } | undefined> {
  const r = await ctx.store.get<{ value: string }>(sql`SELECT value FROM meta WHERE key = ${CONFIG_FILE_KEY}`);
  if (!r) return undefined;
  try {
    const v = JSON.parse(r.value);
    return { path: typeof v?.path === 'string' ? v.path : null };
  } catch {
    return undefined;
  }
}
