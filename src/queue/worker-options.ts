import type { Db } from '../db/open.js';
import type { BackoffOptions } from './backoff.js';
import type { JobQueue } from './queue.js';

// The Worker's options and counters.

/** pino's Logger fits. */
export interface JobLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface WorkerOptions {
  /** The queue's SQLite database (the default: `queue.db`); none over PostgreSQL. */
  db?: Db;
  /** Over SQLite or PostgreSQL: the worker's transactions are its store's. */
  queue: JobQueue;
  concurrency: number;
  leaseMs: number;
  logger?: JobLogger;
  now?: () => number;
  workerId?: string;
  /** Retry delay when a handler gives none; default base 1 s, cap 15 min, full jitter. */
  backoff?: BackoffOptions;
  /** Default 30 s (config jobs.lifelineIntervalSeconds). */
  lifelineIntervalMs?: number;
  /** Longest idle sleep; bounds how late jobs enqueued by other processes (msgctl) are seen. Default 1 s. */
  maxSleepMs?: number;
  /** How often a spell of failing batch transactions, or of failing turns, is summed up in the log. Default 15 s. */
  failureLogIntervalMs?: number;
}

export interface WorkerCounters {
  claimed: number;
  completed: number;
  retried: number;
  snoozed: number;
  /** Dead-lettered: explicit fail, retries exhausted, or onClaim/apply failures on the last attempt. */
  dead: number;
  /** Results dropped because the lease had lapsed and the job was reclaimed. */
  lost: number;
  /** Handed back by stop() after its timeout. */
  released: number;
  /** Taken back from dead workers by this worker's lifeline. */
  reclaimed: number;
  /** Committed settle-and-claim transactions: (completed + retried + …) / batches = jobs per fsync. */
  batches: number;
}
