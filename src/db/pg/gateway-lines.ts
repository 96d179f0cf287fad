import { PG_NOW } from '../queue-statements.js';
import type { Queryable } from '../query.js';
import { sql } from '../sql.js';

// The statements of the gateways' lines shared by every msgd on one PostgreSQL database
// (src/jobs/shared-lines.ts): a row per gateway (gateway_lines) holding its next free slot and
// the line's number, locked by the claim that gives out slots on it, and a row per place in line
// (gateway_places). Times are the database's clock in ms, so instances whose clocks differ
// still space their calls by the one rate. Each statement takes a whole claim's rows at once.

// The time the row was locked, not the statement's start: a claim may have waited for another's.
const LOCKED_NOW = sql.raw('(extract(epoch FROM clock_timestamp()) * 1000)::bigint');

/** A place a job held, as gateway_places keeps it. */
export interface PlaceRow {
  job_id: number;
  gateway_id: string;
  line: number;
  at: number;
  respaced: number;
}

/** A gateway's line, locked for the claim's transaction, with the database's clock. */
export interface LineRow {
  gateway_id: string;
  line: number;
  tat: number;
  next_go: number;
  /** When the row was locked (after any wait for another claim's lock). */
  now: number;
  /** When the lock statement began, before any wait: msgd's clock is read just before it is sent. */
  began: number;
}

/**
 * A job holding a place is claimed before newcomers: at its time it goes ahead of a backlog
 * accepted earlier but not yet given places (the claim's order is priority first), as a line
 * is first come, first served. Dispatch jobs are enqueued at priority 0.
 */
export const PLACED_PRIORITY = -1;

/** The places held by these jobs, taken out of the table (a job claimed leaves its place, and its priority). */
export async function takePlaces(q: Queryable, jobIds: number[]): Promise<Map<number, PlaceRow>> {
  const out = new Map<number, PlaceRow>();
  if (jobIds.length === 0) return out;
  const rows = await q.all<PlaceRow>(
    sql`WITH p AS (DELETE FROM gateway_places WHERE job_id = ANY(${jobIds}::bigint[])
                    RETURNING job_id, gateway_id, line, at, respaced),
             r AS (UPDATE jobs SET priority = 0 WHERE id IN (SELECT job_id FROM p) AND priority = ${PLACED_PRIORITY})
        SELECT * FROM p`,
  );
  for (const r of rows) out.set(Number(r.job_id), { ...r, job_id: Number(r.job_id) });
  return out;
}

/**
 * Locks the lines of these gateways (sorted, so two claims never wait on each other crosswise)
 * for the caller's transaction, making a missing one; `intervalsUs`: each one's slot spacing.
 */
export async function lockLines(q: Queryable, gatewayIds: string[], intervalsUs: number[]): Promise<LineRow[]> {
  return q.all<LineRow>(
    sql`INSERT INTO gateway_lines (gateway_id, line, interval_us, active, tat, next_go, updated_at)
          SELECT v.id, 0, v.iv, 1, 0, 0, ${PG_NOW}
            FROM unnest(${gatewayIds}::text[], ${intervalsUs}::bigint[]) WITH ORDINALITY AS v(id, iv, n) ORDER BY v.n
        ON CONFLICT (gateway_id) DO UPDATE SET gateway_id = excluded.gateway_id
        RETURNING gateway_id, line, tat, next_go, ${LOCKED_NOW} AS now, ${PG_NOW} AS began`,
  );
}

/** The places still waiting in a gateway's line. */
export interface PendingRow {
  gateway_id: string;
  /** The last place pushed back (respaced): a first place queues behind it. */
  respaced_last: number | null;
  /** The place waiting ahead of all others (places pushed back first, then by slot), if any. */
  first_respaced: number | null;
  first_at: number | null;
}

/**
 * The places still waiting in these gateways' current lines (`lines`: each one's number), as
 * found now: read after the lines are locked, so a claim that waited for another's lock sees
 * what that one left, and without the claim's own (takePlaces took them out in its transaction).
 * The first is a place whose job is waiting for it: a place left behind by a job gone another way
 * (completed, dead, deleted) holds no one back.
 */
export async function pendingPlaces(q: Queryable, gatewayIds: string[], lines: number[]): Promise<PendingRow[]> {
  return q.all<PendingRow>(
    sql`SELECT g.id AS gateway_id,
               (SELECT max(p.at) FROM gateway_places p WHERE p.gateway_id = g.id AND p.line = g.line AND p.respaced = 1)
                 AS respaced_last,
               f.respaced AS first_respaced, f.at AS first_at
          FROM unnest(${gatewayIds}::text[], ${lines}::bigint[]) AS g(id, line)
          LEFT JOIN LATERAL (
            SELECT p.respaced, p.at FROM gateway_places p JOIN jobs j ON j.id = p.job_id
             WHERE p.gateway_id = g.id AND p.line = g.line AND j.state IN ('available', 'retry')
             ORDER BY p.respaced DESC, p.at LIMIT 1) f ON true`,
  );
}

/** Writes the lines' new next free slot and next go, in the transaction that locked them. */
export async function saveLines(q: Queryable, gatewayIds: string[], tats: number[], nextGos: number[]): Promise<void> {
  await q.run(
    sql`UPDATE gateway_lines l SET tat = v.tat, next_go = v.next_go, updated_at = ${PG_NOW}
          FROM unnest(${gatewayIds}::text[], ${tats}::bigint[], ${nextGos}::bigint[]) AS v(id, tat, next_go)
         WHERE l.gateway_id = v.id`,
  );
}

/** Keeps the places given in a claim, for whichever instance claims their jobs next (PLACED_PRIORITY). */
export async function keepPlaces(q: Queryable, places: PlaceRow[]): Promise<void> {
  if (places.length === 0) return;
  await q.run(
    sql`UPDATE jobs SET priority = ${PLACED_PRIORITY} WHERE id = ANY(${places.map((p) => p.job_id)}::bigint[]) AND priority = 0`,
  );
  await q.run(
    sql`INSERT INTO gateway_places (job_id, gateway_id, line, at, respaced)
          SELECT * FROM unnest(${places.map((p) => p.job_id)}::bigint[], ${places.map((p) => p.gateway_id)}::text[],
            ${places.map((p) => p.line)}::bigint[], ${places.map((p) => p.at)}::bigint[], ${places.map((p) => p.respaced)}::bigint[])
        ON CONFLICT (job_id) DO UPDATE SET gateway_id = excluded.gateway_id, line = excluded.line, at = excluded.at,
          respaced = excluded.respaced`,
  );
}

/** A gateway as the lines compare it: a change of status or rate starts its line over. */
export interface LineSetting {
  id: string;
  intervalUs: number;
  active: boolean;
}

/** What changed for a gateway since the line was last set, as found by syncLine. */
export type LineChange = 'new' | 'enabled' | 'disabled' | 'rate' | null;

/**
 * Compares a gateway with its line and, when its status or rate changed, starts the line over:
 * its number moves on (the places given in it are void: their jobs take new ones when claimed),
 * the slots reserved beyond `maxAheadMs` are given up. Only the first instance to see a change makes it (the row is locked
 * and compared), so one instance wakes the line.
 */
export async function syncLine(q: Queryable, gw: LineSetting, maxAheadMs: number): Promise<LineChange> {
  const active = gw.active ? 1 : 0;
  const was = await q.get<{ interval_us: number; active: number }>(
    sql`SELECT interval_us, active FROM gateway_lines WHERE gateway_id = ${gw.id} FOR UPDATE`,
  );
  if (!was) {
    const made = await q.run(
      sql`INSERT INTO gateway_lines (gateway_id, line, interval_us, active, tat, next_go, updated_at)
          VALUES (${gw.id}, 0, ${gw.intervalUs}, ${active}, 0, 0, ${PG_NOW}) ON CONFLICT (gateway_id) DO NOTHING`,
    );
    return made.changes > 0 ? 'new' : null;
  }
  const wasActive = Number(was.active) === 1;
  const change: LineChange =
    wasActive && !gw.active
      ? 'disabled'
      : !wasActive && gw.active
        ? 'enabled'
        : gw.active && Number(was.interval_us) !== gw.intervalUs
          ? 'rate'
          : null;
  if (change === null) {
    if (Number(was.interval_us) !== gw.intervalUs)
      await q.run(sql`UPDATE gateway_lines SET interval_us = ${gw.intervalUs} WHERE gateway_id = ${gw.id}`);
    return null;
  }
  await q.run(
    sql`UPDATE gateway_lines SET line = line + 1, interval_us = ${gw.intervalUs}, active = ${active},
          tat = CASE WHEN tat < ${PG_NOW} + ${maxAheadMs}::bigint THEN tat ELSE ${PG_NOW} + ${maxAheadMs}::bigint END,
          next_go = 0, updated_at = ${PG_NOW}
        WHERE gateway_id = ${gw.id}`,
  );
  return change;
}

/**
 * Drops the lines of gateways not among `gatewayIds` (what this instance read) and gone from
 * the store (removed): returns theirs. A gateway made since that read (on another instance,
 * which made its line) keeps its line.
 */
export async function dropLines(q: Queryable, gatewayIds: string[]): Promise<string[]> {
  const gone = await q.all<{ gateway_id: string }>(
    sql`DELETE FROM gateway_lines l WHERE l.gateway_id <> ALL(${gatewayIds}::text[])
          AND NOT EXISTS (SELECT 1 FROM gateways g WHERE g.id = l.gateway_id)
        RETURNING l.gateway_id`,
  );
  return gone.map((r) => r.gateway_id);
}

/** Places whose job is gone (completed or deleted without a claim): dropped. Returns how many. */
export async function pruneOrphanPlaces(q: Queryable): Promise<number> {
  const { changes } = await q.run(
    sql`DELETE FROM gateway_places p WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = p.job_id)`,
  );
  return changes;
}
