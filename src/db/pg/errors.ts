import { redactUrl } from '../../lib/redact-url.js';

// What goes wrong between msgd and PostgreSQL, sorted into the two answers msgd gives: the
// database cannot be reached or cannot take the write right now (a StorageUnavailableError,
// answered like a full disk on SQLite: 503 storage_unavailable with Retry-After), or anything
// else (a bug, a constraint), passed on as PostgreSQL reported it.

/** The code src/db/storage.ts's isStorageError() knows, so the HTTP layer answers both stores alike. */
export const STORAGE_UNAVAILABLE = 'MSGD_STORAGE_UNAVAILABLE';

/** PostgreSQL could not be reached, or refused the work for want of resources; nothing is wrong with the request. */
export class StorageUnavailableError extends Error {
  readonly code = STORAGE_UNAVAILABLE;
  /** What failed: a socket code (`ECONNREFUSED`), a SQLSTATE (`57P01`), or `connection_lost`, `connect_timeout`, `query_timeout`. */
  readonly reason: string;
  /**
   * The connection was lost after a COMMIT (or a statement outside a transaction) was sent: the
   * server may have applied it. Otherwise PostgreSQL rolled the work back; nothing of it was kept.
   */
  readonly outcomeUnknown: boolean;

  constructor(url: string, reason: string, detail: string, outcomeUnknown = false) {
    super(`PostgreSQL at ${redactUrl(url)} is unavailable: ${detail}`);
    this.name = 'StorageUnavailableError';
    this.reason = reason;
    this.outcomeUnknown = outcomeUnknown;
  }
}

// SQLSTATEs: class 08 (connection exception), 57P01 admin_shutdown, 57P02 crash_shutdown,
// 57P03 cannot_connect_now (starting up, shutting down, in recovery); class 53 (insufficient
// resources: disk full, out of memory, too many connections); 58030 io_error; 25006
// read_only_sql_transaction (a standby, or a primary turned read-only).
const SQLSTATE_TEXT: Record<string, string> = {
  '57P01': 'the server is shutting down (admin_shutdown)',
  '57P02': 'the server crashed (crash_shutdown)',
  '57P03': 'the server is starting up or shutting down (cannot_connect_now)',
  '53000': 'the server is out of resources',
  '53100': 'the server’s disk is full',
  '53200': 'the server is out of memory',
  '53300': 'the server has too many connections',
  '58030': 'the server met an I/O error',
  '25006': 'the server is read-only (a standby?)',
};

const SOCKET_TEXT: Record<string, string> = {
  ECONNREFUSED: 'connection refused (is the server running, and on that host and port?)',
  ECONNRESET: 'the connection was reset',
  EPIPE: 'the connection was closed',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  ENOTFOUND: 'the host name is not known',
  EAI_AGAIN: 'the host name could not be resolved',
};

// pg's own errors for a connection that went away carry no code, only these messages.
const LOST = [
  /^Connection terminated unexpectedly$/,
  /^Client has encountered a connection error and is not queryable$/,
  /^Client was closed and is not queryable$/,
];
const TIMEOUT = [
  /^Connection terminated due to connection timeout$/,
  /^timeout exceeded when trying to connect$/,
  /^timeout expired$/,
];

/** The reason and its words when `err` means the database is unavailable, else undefined. */
export function unavailableReason(err: unknown): { reason: string; detail: string } | undefined {
  if (err instanceof StorageUnavailableError) return { reason: err.reason, detail: err.message };
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (code in SOCKET_TEXT) return { reason: code, detail: SOCKET_TEXT[code] };
  if (code in SQLSTATE_TEXT) return { reason: code, detail: SQLSTATE_TEXT[code] };
  if (/^08[0-9A-Z]{3}$/.test(code) || /^53[0-9A-Z]{3}$/.test(code)) return { reason: code, detail: message || code };
  if (TIMEOUT.some((re) => re.test(message))) return { reason: 'connect_timeout', detail: 'connecting timed out' };
  // pg's query_timeout: the server took the statement and has not answered.
  if (message === 'Query read timeout') return { reason: 'query_timeout', detail: 'the server did not answer in time' };
  if (LOST.some((re) => re.test(message))) return { reason: 'connection_lost', detail: 'the connection was lost' };
  return undefined;
}

/** `err` as a StorageUnavailableError naming `url` (redacted) when it means the database is unavailable; else `err`. */
export function classify(err: unknown, url: string, outcomeUnknown = false): unknown {
  if (err instanceof StorageUnavailableError) return err;
  const r = unavailableReason(err);
  return r ? new StorageUnavailableError(url, r.reason, r.detail, outcomeUnknown) : err;
}

/** Start-up could not use the database: one line naming the URL (redacted) and why. */
export class PgConnectError extends Error {
  readonly reason: 'invalid_url' | 'refused' | 'auth_failed' | 'unknown_database' | 'timeout' | 'unavailable' | 'other';

  constructor(url: string, reason: PgConnectError['reason'], detail: string) {
    super(`cannot use PostgreSQL at ${redactUrl(url)}: ${detail}`);
    this.name = 'PgConnectError';
    this.reason = reason;
  }
}

/** Why a first connection failed, in one line. */
export function connectError(err: unknown, url: string, timeoutMs: number): PgConnectError {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : String(err);
  if (code === 'ECONNREFUSED') return new PgConnectError(url, 'refused', SOCKET_TEXT.ECONNREFUSED);
  if (code === '28P01' || code === '28000') {
    return new PgConnectError(url, 'auth_failed', `authentication failed (${message})`);
  }
  if (code === '3D000') return new PgConnectError(url, 'unknown_database', message);
  const r = unavailableReason(err);
  if (r?.reason === 'connect_timeout' || code === 'ETIMEDOUT') {
    return new PgConnectError(url, 'timeout', `no answer within ${timeoutMs} ms`);
  }
  if (r) return new PgConnectError(url, 'unavailable', r.detail);
  return new PgConnectError(url, 'other', redactUrl(message));
}

// Reasons that mean the connection went away after the statement may have reached the server.
const LOST_MIDWAY = new Set(['connection_lost', 'query_timeout', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', '57P01', '57P02']);

/** Whether a statement that failed for `reason` may still have been applied. */
export function lostMidway(reason: string): boolean {
  return LOST_MIDWAY.has(reason) || /^08[0-9A-Z]{3}$/.test(reason);
}

/** A serialization failure or a deadlock: PostgreSQL rolled the transaction back, and running it again is safe. */
export function isRetryable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '40001' || code === '40P01';
}
