import pg from 'pg';
import { type Leader, LeaderListeners } from '../leader.js';
import { redactUrl } from '../../lib/redact-url.js';
import { unavailableReason } from './errors.js';
import type { PgLogger } from './store.js';

// The leader among the msgd instances sharing a PostgreSQL database: the one whose connection
// holds the session advisory lock LEADER_LOCK_KEY. Each instance keeps one connection of its
// own for it (not one of the pool's: a session lock lives as long as its session) and, while it
// does not lead, tries the lock every pollMs with pg_try_advisory_lock (never waiting on it).
//
// Bounds (docs/scale.md, "The leader"):
// - A leader that stops or is killed closes its connection (the kernel closes a killed process's
//   socket), PostgreSQL ends the session and releases the lock, and another instance takes it
//   at its next try: within pollMs (1 s).
// - A leader whose host or network is lost stops talking to PostgreSQL: its session is set to
//   end after idleSessionTimeoutMs (5 s) without a statement (idle_session_timeout), which frees
//   the lock, so another instance leads within 6 s. The lost leader itself checks its lock every
//   pollMs, each check given queryTimeoutMs (2 s): it stops leading within 3 s of its last good
//   check, before its session can have ended and the lock passed to another.
// - A check that finds the lock no longer held by this session (a pooler in transaction mode
//   handing statements to other server connections: PgBouncer's pool_mode=transaction) steps
//   down, says so in the log and stops trying: such a connection cannot hold a leader lock.

/** The advisory lock key of the leader: "msgdlead" in ASCII. */
export const LEADER_LOCK_KEY = 0x6d7367646c656164n;
const KEY_HI = Number(LEADER_LOCK_KEY >> 32n);
const KEY_LO = Number(LEADER_LOCK_KEY & 0xffffffffn);

export interface PgLeaderOptions {
  logger: PgLogger;
  /** Between two tries of the lock, and two checks that it is still held (default 1000 ms). */
  pollMs?: number;
  /** The leader connection's session ends after this long without a statement (default 5000 ms). */
  idleSessionTimeoutMs?: number;
  /** A try or check answered later than this counts as failed (default 2000 ms). */
  queryTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** application_name of the leader connection (default `msgd leader`). */
  applicationName?: string;
}

export interface PgLeader extends Leader {
  /** The server process holding this instance's lock while it leads (pg_backend_pid()), else null. */
  backendPid(): number | null;
}

/** Starts trying to lead; resolves after the first try (so a lone instance leads once it resolves). */
export async function startPgLeader(url: string, opts: PgLeaderOptions): Promise<PgLeader> {
  const pollMs = opts.pollMs ?? 1_000;
  const idleMs = opts.idleSessionTimeoutMs ?? 5_000;
  const redactedUrl = redactUrl(url);
  const { logger } = opts;
  const listeners = new LeaderListeners((err) =>
    logger.warn({ error: String(err) }, 'a listener of the leader change threw'),
  );
  let client: pg.Client | undefined;
  let leadingOn: number | null = null;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let failing = false;
  /** Set once the lock was found on another session than the one it was taken on. */
  let pooled = false;

  const stepDown = (why: string, extra: object = {}, level: 'warn' | 'error' = 'warn') => {
    if (leadingOn === null) return;
    leadingOn = null;
    const withError = logger as PgLogger & { error?: PgLogger['warn'] };
    if (level === 'error' && withError.error) withError.error({ url: redactedUrl, ...extra }, why);
    else logger.warn({ url: redactedUrl, ...extra }, why);
    listeners.emit(false);
  };

  const drop = (c: pg.Client) => {
    if (client !== c) return;
    client = undefined;
    c.removeAllListeners('error');
    c.on('error', () => {});
    c.end().catch(() => {});
  };

  const connect = async (): Promise<pg.Client> => {
    const c = new pg.Client({
      connectionString: url,
      application_name: opts.applicationName ?? 'msgd leader',
      connectionTimeoutMillis: opts.connectTimeoutMs ?? 5_000,
      query_timeout: opts.queryTimeoutMs ?? 2_000,
      keepAlive: true,
    });
    c.on('error', (err) => {
      drop(c);
      stepDown('PostgreSQL: the leader connection was lost; this instance no longer leads', {
        reason: unavailableReason(err)?.reason ?? 'connection_lost',
      });
    });
    try {
      await c.connect();
      await c.query(`SET idle_session_timeout = ${Math.max(1, Math.round(idleMs))}`);
    } catch (err) {
      c.removeAllListeners('error');
      c.on('error', () => {});
      await c.end().catch(() => {});
      throw err;
    }
    client = c;
    return c;
  };

  const attempt = async () => {
    let c = client;
    try {
      c ??= await connect();
      if (leadingOn === null) {
        const { rows } = await c.query<{ got: boolean; pid: number }>(
          'SELECT pg_try_advisory_lock($1::bigint) AS got, pg_backend_pid() AS pid',
          [LEADER_LOCK_KEY.toString()],
        );
        if (rows[0].got && !closed) {
          leadingOn = rows[0].pid;
          logger.info?.({ url: redactedUrl, backendPid: leadingOn }, 'this instance is the leader');
          listeners.emit(true);
        }
      } else {
        const { rows } = await c.query<{ pid: number; held: boolean }>(
          `SELECT pg_backend_pid() AS pid, EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
             AND pid = pg_backend_pid() AND classid = $1::oid AND objid = $2::oid AND objsubid = 1) AS held`,
          [KEY_HI, KEY_LO],
        );
        if (!rows[0].held || rows[0].pid !== leadingOn) {
          // Trying again would lead for a moment on each server connection the pooler hands out.
          pooled = true;
          drop(c);
          stepDown(
            'the leader lock is no longer held by this connection: statements reach another server session (a pooler in transaction mode, such as PgBouncer with pool_mode=transaction, cannot hold a session lock; connect msgd to PostgreSQL directly or through a session-mode pool). This instance no longer leads, and stops trying until it restarts',
            { backendPid: rows[0].pid, lockedOn: leadingOn },
            'error',
          );
        }
      }
      if (failing) logger.info?.({ url: redactedUrl }, 'PostgreSQL: the leader connection is back');
      failing = false;
    } catch (err) {
      if (c) drop(c);
      stepDown('PostgreSQL: the leader lock could not be checked; this instance no longer leads', {
        reason: unavailableReason(err)?.reason ?? (err as { code?: string }).code ?? String(err),
      });
      if (!failing) {
        logger.warn(
          { url: redactedUrl, reason: unavailableReason(err)?.reason ?? (err as Error).message },
          'PostgreSQL: the leader connection failed; trying again',
        );
      }
      failing = true;
    }
  };

  const schedule = () => {
    if (closed || pooled) return;
    timer = setTimeout(() => {
      running = attempt().finally(schedule);
    }, pollMs);
    timer.unref();
  };

  running = attempt();
  await running;
  schedule();

  return {
    isLeader: () => leadingOn !== null,
    backendPid: () => leadingOn,
    onChange: (fn) => listeners.add(fn),
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      await running.catch(() => {});
      const c = client;
      client = undefined;
      if (leadingOn !== null) {
        leadingOn = null;
        listeners.emit(false);
      }
      // Ending the session releases its lock: the next instance takes it at its next try.
      if (c) {
        c.removeAllListeners('error');
        c.on('error', () => {});
        await c.end().catch(() => {});
      }
    },
  };
}
