import type { Queryable } from '../db/query.js';
import { clockMs } from '../db/dialect.js';
import { sql } from '../db/sql.js';
import type { CoreCtx } from './context.js';
import { COUNTER_NAMES, labelKey, parseLabelKey, type CounterSample } from './counters.js';

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

/**
 * An instance whose last beat is older than this (five beats missed) is dead: its row is marked
 * so by the leader's next beat, and readers call it dead from then on even before that.
 */
export const INSTANCE_DEAD_AFTER_MS = STALE_AFTER_MS;
/** Stopped and dead instances' rows are pruned this long after their last beat. */
export const KEEP_INSTANCES_MS = 24 * 3_600_000;

export interface HeartbeatRow {
  /** The instance's id, drawn at its start. */
  id: string;
  version: string;
  pid: number;
  startedAt: number;
  /** When it last beat (read back: on the reader's clock, see readInstances). */
  beatAt: number;
  running: boolean;
  gauges: Partial<QueueGauges>;
  /** os.hostname() of msgd's host; null in rows written before it was kept. */
  host?: string | null;
  /** Whether it was the leader at its last beat. */
  leader?: boolean;
  /** Its work counters since its start (counterTotals()). */
  counters?: Record<string, number>;
  /** When the leader found it dead; null while it runs or after a clean stop. */
  deadAt?: number | null;
}

/** What an instance did since it started, for msgctl instances: its counters summed by what they count. */
export function counterTotals(samples: CounterSample[]): Record<string, number> {
  const t = { sent: 0, failed: 0, retried: 0, webhooks_in: 0, deliveries_ok: 0, deliveries_failed: 0 };
  for (const s of samples) {
    if (s.name === COUNTER_NAMES.dispatch) {
      const o = s.labels.outcome;
      if (o === 'sent' || o === 'failed' || o === 'retried') t[o] += s.value;
    } else if (s.name === COUNTER_NAMES.webhooksIn) t.webhooks_in += s.value;
    else if (s.name === COUNTER_NAMES.deliveries) {
      if (s.labels.outcome === 'ok') t.deliveries_ok += s.value;
      else if (s.labels.outcome === 'failed') t.deliveries_failed += s.value;
    }
  }
  return t;
}

/**
 * An instance's row, in `q` (the beat's transaction, or the store). The beat's time is the
 * database's clock on PostgreSQL (clockMs): `beatAt` is used on SQLite only. A row found dead
 * and beating again is alive.
 */
export async function writeHeartbeat(ctx: CoreCtx, hb: HeartbeatRow, q: Queryable = ctx.store): Promise<void> {
  await q.run(
    sql`INSERT INTO heartbeat (id, version, pid, started_at, beat_at, running, gauges, host, leader, counters, dead_at)
        VALUES (${hb.id}, ${hb.version}, ${hb.pid}, ${hb.startedAt}, ${clockMs(ctx.store.dialect, hb.beatAt)},
          ${hb.running ? 1 : 0}, ${JSON.stringify(hb.gauges)}, ${hb.host ?? null}, ${hb.leader ? 1 : 0},
          ${JSON.stringify(hb.counters ?? {})}, NULL)
        ON CONFLICT (id) DO UPDATE SET version = excluded.version, pid = excluded.pid, started_at = excluded.started_at,
          beat_at = excluded.beat_at, running = excluded.running, gauges = excluded.gauges, host = excluded.host,
          leader = excluded.leader, counters = excluded.counters, dead_at = NULL`,
  );
}

/** The store's clock now (the database server's on PostgreSQL, `now` on SQLite): an instance's start. */
export async function storeNow(ctx: CoreCtx, now: number = ctx.now()): Promise<number> {
  return (await ctx.store.get<{ now: number }>(sql`SELECT ${clockMs(ctx.store.dialect, now)} AS now`))!.now;
}

/**
 * The leader's upkeep of the instances' rows, in `q`: rows beating no more for
 * INSTANCE_DEAD_AFTER_MS are marked dead (and lose the leader mark), and stopped or dead rows
 * older than KEEP_INSTANCES_MS are removed (`prune`). Returns the rows marked dead.
 */
export async function upkeepInstances(ctx: CoreCtx, q: Queryable, now: number, prune: boolean): Promise<number> {
  const clock = clockMs(ctx.store.dialect, now);
  const dead = (
    await q.run(
      sql`UPDATE heartbeat SET running = 0, leader = 0, dead_at = ${clock}
           WHERE running = 1 AND beat_at < ${clock} - ${INSTANCE_DEAD_AFTER_MS}`,
    )
  ).changes;
  if (prune) await q.run(sql`DELETE FROM heartbeat WHERE running = 0 AND beat_at < ${clock} - ${KEEP_INSTANCES_MS}`);
  return dead;
}

/** Every row but `id`'s: on SQLite at start, where the data directory's lock says no other msgd runs. */
export async function removeOtherInstances(q: Queryable, id: string): Promise<void> {
  await q.run(sql`DELETE FROM heartbeat WHERE id <> ${id}`);
}

export type InstanceState = 'running' | 'stopped' | 'dead';

export interface InstanceInfo extends HeartbeatRow {
  state: InstanceState;
  /** Milliseconds since its last beat. */
  beatAgeMs: number;
  leader: boolean;
  counters: Record<string, number>;
}

export interface Instances {
  /** Oldest start first. */
  instances: InstanceInfo[];
  /** The row that speaks for msgd in a one-line summary (the header, doctor): see readInstances. */
  current: HeartbeatRow | null;
  alive: number;
  dead: number;
}

type HeartbeatDbRow = {
  id: string;
  version: string;
  pid: number;
  started_at: number;
  beat_at: number;
  running: number;
  gauges: string;
  host: string | null;
  leader: number;
  counters: string;
  dead_at: number | null;
  db_now: number;
};

function parseJson<T>(text: string, fallback: T): T {
  try {
    const v = JSON.parse(text);
    return v && typeof v === 'object' ? (v as T) : fallback;
  } catch {
    // A row written by hand: no figures rather than no console.
    return fallback;
  }
}

/**
 * Every instance's row. Times are given on the reader's clock (`now`): on PostgreSQL they are
 * written on the database's, and shifted by the difference read in the same statement, so a
 * beat's age is right whatever this host's clock says. An instance is dead once marked so or
 * once its beat is older than INSTANCE_DEAD_AFTER_MS. `current` is the alive leader, else the
 * alive instance that beat last, else the one that beat last, with the queue gauges of the
 * freshest row that has them (the leader reads them).
 */
export async function readInstances(ctx: CoreCtx, now: number = ctx.now()): Promise<Instances> {
  const rows = await ctx.store.all<HeartbeatDbRow>(
    sql`SELECT id, version, pid, started_at, beat_at, running, gauges, host, leader, counters, dead_at,
               ${clockMs(ctx.store.dialect, now)} AS db_now
          FROM heartbeat ORDER BY started_at, id`,
  );
  const instances = rows.map((r): InstanceInfo => {
    const shift = now - r.db_now;
    const beatAt = r.beat_at + shift;
    const beatAgeMs = now - beatAt;
    const running = r.running === 1;
    const dead = r.dead_at !== null || (running && beatAgeMs > INSTANCE_DEAD_AFTER_MS);
    return {
      id: r.id,
      version: r.version,
      pid: r.pid,
      startedAt: r.started_at + shift,
      beatAt,
      running,
      gauges: parseJson<Partial<QueueGauges>>(r.gauges, {}),
      host: r.host,
      leader: r.leader === 1 && !dead && running,
      counters: parseJson<Record<string, number>>(r.counters, {}),
      deadAt: r.dead_at === null ? null : r.dead_at + shift,
      state: dead ? 'dead' : running ? 'running' : 'stopped',
      beatAgeMs,
    };
  });
  const alive = instances.filter((i) => i.state === 'running');
  const latest = (list: InstanceInfo[]) =>
    list.reduce<InstanceInfo | null>((a, b) => (a === null || b.beatAt > a.beatAt ? b : a), null);
  const speaker = alive.find((i) => i.leader) ?? latest(alive) ?? latest(instances);
  const withGauges = latest(instances.filter((i) => typeof i.gauges.waiting === 'number'));
  let current: HeartbeatRow | null = null;
  if (speaker) {
    const { state: _s, beatAgeMs: _a, ...row } = speaker;
    // A row found dead by the leader reads as msgd silent, not stopped cleanly.
    current = { ...row, running: speaker.running || speaker.deadAt != null, gauges: withGauges?.gauges ?? {} };
  }
  return { instances, current, alive: alive.length, dead: instances.filter((i) => i.state === 'dead').length };
}

/** The row that speaks for msgd (readInstances' `current`): on SQLite, its one process. */
export async function readHeartbeat(ctx: CoreCtx): Promise<HeartbeatRow | null> {
  return (await readInstances(ctx)).current;
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
