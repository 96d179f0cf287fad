import pg from 'pg';
import {
  type Batcher,
  type BatcherOptions,
  type BatchFn,
  BatchQueue,
  type BatchResult,
  type PendingItem,
} from '../batch.js';
import { endCommitHooks, holdCommitHooks } from '../query.js';
import { render, sql, type Sql } from '../sql.js';
import {
  classify,
  connectError,
  isRetryable,
  lostMidway,
  PgConnectError,
  StorageUnavailableError,
  unavailableReason,
} from './errors.js';
import { exactTypes } from './numbers.js';
import { redactUrl } from '../../lib/redact-url.js';

// msgd's connection to PostgreSQL: a pool, queries written with the sql`` tag, transactions
// that run again by themselves on a serialization failure or a deadlock, transaction-scoped
// advisory locks, and LISTEN on a connection of its own that comes back after the server does.
// Every failure to reach the server is a StorageUnavailableError naming the URL with its
// password masked; the pool replaces dead connections by itself, so the same store works again
// once the server is back. This folder is the only place that imports `pg`.

type LogFn = (obj: object, msg?: string) => void;

/** msgd's pino logger (or anything with its warn and, optionally, info). */
export interface PgLogger {
  warn: LogFn;
  info?: LogFn;
}

export interface PgOptions {
  logger: PgLogger;
  /** Connections in the pool (default 10). */
  poolSize?: number;
  /** How long a new connection may take before the attempt fails (default 5000 ms). */
  connectTimeoutMs?: number;
  /**
   * How long a statement may go unanswered (default: no limit). Past it the statement fails as
   * storage-unavailable (`query_timeout`) and its connection is dropped: a server that stopped
   * answering without closing the connection (a dropped network, a paused VM) never holds a
   * request or a job for longer.
   */
  queryTimeoutMs?: number;
  /** How long an unused connection stays open (default 30 s). */
  idleTimeoutMs?: number;
  /** `application_name`, shown in pg_stat_activity (default `msgd`). */
  applicationName?: string;
}

/** Statements on the pool, or inside one transaction. */
export interface PgExecutor {
  /** The first row, or undefined. */
  get<R>(q: Sql): Promise<R | undefined>;
  all<R>(q: Sql): Promise<R[]>;
  /** Rows as arrays, the columns in the SELECT's order (pg's rowMode 'array'). */
  values<T extends unknown[]>(q: Sql): Promise<T[]>;
  /** Rows changed (inserted, updated, deleted), or returned by a SELECT. */
  run(q: Sql): Promise<{ changes: number }>;
}

export type Isolation = 'read committed' | 'repeatable read' | 'serializable';

export interface TransactionOptions {
  /** Default: the server's (read committed unless configured otherwise). */
  isolation?: Isolation;
  /** Runs of fn at most, the first included (default 8). */
  maxAttempts?: number;
}

export interface PgStore extends PgExecutor {
  readonly dialect: 'postgres';
  /** The URL with its password masked: for logs and messages. */
  readonly redactedUrl: string;
  /**
   * BEGIN, fn, COMMIT on one connection; ROLLBACK when fn throws. On a serialization failure
   * (40001) or a deadlock (40P01), PostgreSQL has rolled everything back, and fn runs again on a
   * new transaction after a short random pause, up to maxAttempts times: fn must do nothing but
   * statements on `tx` (no HTTP calls, no effects outside the database).
   */
  transaction<T>(fn: (tx: PgExecutor) => Promise<T>, opts?: TransactionOptions): Promise<T>;
  /** A transaction that first takes `pg_advisory_xact_lock(key)`: holders of the same key run one at a time. */
  withAdvisoryXactLock<T>(key: bigint, fn: (tx: PgExecutor) => Promise<T>, opts?: TransactionOptions): Promise<T>;
  /**
   * Calls onNotify with the payload of each NOTIFY on `channel` (delivered at the sender's
   * COMMIT). The listening connection reconnects by itself when it is lost; notifications sent
   * while it is away are not delivered, so a listener is a wake-up, with polling behind it.
   * Resolves once the server listens; the function it gives stops listening.
   */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  /**
   * Group commit (src/db/batch.ts): one batch in flight takes the whole queue (up to max), a
   * second starts only while more than max wait; a failed batch's items run again one by one,
   * each in a savepoint.
   */
  batcher<I, O>(name: string, apply: BatchFn<I, O>, opts?: BatcherOptions): Batcher<I, O>;
  /** Closes every connection; the store is unusable afterwards. */
  close(): Promise<void>;
}

const ISOLATION_SQL: Record<Isolation, string> = {
  'read committed': 'BEGIN ISOLATION LEVEL READ COMMITTED',
  'repeatable read': 'BEGIN ISOLATION LEVEL REPEATABLE READ',
  serializable: 'BEGIN ISOLATION LEVEL SERIALIZABLE',
};

const INT8_MIN = -(2n ** 63n);
const INT8_MAX = 2n ** 63n - 1n;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A retry's pause: random up to 5 ms × 2^attempt, at most 250 ms ("full jitter"). */
const backoff = (attempt: number) => Math.random() * Math.min(250, 5 * 2 ** attempt);

function poolConfig(url: string, opts: PgOptions): pg.PoolConfig {
  return {
    connectionString: url,
    max: opts.poolSize ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5_000,
    idleTimeoutMillis: opts.idleTimeoutMs ?? 30_000,
    ...(opts.queryTimeoutMs ? { query_timeout: opts.queryTimeoutMs } : {}),
    application_name: opts.applicationName ?? 'msgd',
    keepAlive: true,
    types: exactTypes,
  };
}

/** A store over a pool of connections to `url`; nothing connects until the first statement. */
export function openPg(url: string, opts: PgOptions): PgStore {
  const redactedUrl = redactUrl(url);
  const { logger } = opts;
  const pool = new pg.Pool(poolConfig(url, opts));
  // A connection sitting in the pool can fail (the server restarted): the pool drops it and
  // emits 'error', which, unheard, would end the process.
  pool.on('error', (err) => {
    const r = unavailableReason(err);
    logger.warn(
      { url: redactedUrl, reason: r?.reason ?? (err as { code?: string }).code, error: redactUrl(err.message) },
      'PostgreSQL: an idle connection failed; the pool opens a new one when it needs one',
    );
  });

  async function query(
    runner: pg.Pool | pg.PoolClient,
    q: Sql,
    inTransaction: boolean,
    rowMode?: 'array',
  ): Promise<pg.QueryResult | pg.QueryArrayResult> {
    const { text, values } = render(q, 'postgres');
    try {
      return rowMode ? await runner.query({ text, values, rowMode }) : await runner.query({ text, values });
    } catch (err) {
      const r = unavailableReason(err);
      throw classify(err, url, !inTransaction && r !== undefined && lostMidway(r.reason));
    }
  }

  function executor(runner: pg.Pool | pg.PoolClient, inTransaction: boolean, isOpen = () => true): PgExecutor {
    const check = () => {
      if (!isOpen()) throw new Error('this transaction has ended: a statement on its tx ran after fn returned');
    };
    return {
      async get<R>(q: Sql) {
        check();
        return (await query(runner, q, inTransaction)).rows[0] as R | undefined;
      },
      async all<R>(q: Sql) {
        check();
        return (await query(runner, q, inTransaction)).rows as R[];
      },
      async values<T extends unknown[]>(q: Sql) {
        check();
        return (await query(runner, q, inTransaction, 'array')).rows as T[];
      },
      async run(q: Sql) {
        check();
        return { changes: (await query(runner, q, inTransaction)).rowCount ?? 0 };
      },
    };
  }

  async function once<T>(fn: (tx: PgExecutor) => Promise<T>, isolation: Isolation | undefined): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw classify(err, url);
    }
    // A connection that dies while checked out emits 'error' on the client, and nothing else
    // listens for it then: keep it here, and have the pool drop the client at release.
    let broken: Error | undefined;
    const onError = (err: Error) => {
      broken ??= err;
    };
    client.on('error', onError);
    let open = true;
    let committing = false;
    const tx = executor(client, true, () => open);
    holdCommitHooks(tx);
    let committed = false;
    try {
      await client.query(isolation ? ISOLATION_SQL[isolation] : 'BEGIN');
      const result = await fn(tx);
      committing = true;
      await client.query('COMMIT');
      committed = true;
      return result;
    } catch (err) {
      const r = unavailableReason(err);
      if (r) broken ??= err as Error;
      // A connection that failed is dropped, which rolls back whatever it had begun; a ROLLBACK
      // sent on it could only wait (a server that stopped answering) or fail the same way.
      if (!committing && !broken) {
        await client.query('ROLLBACK').catch((e: Error) => {
          broken ??= e;
        });
      }
      throw classify(err, url, committing && r !== undefined && lostMidway(r.reason));
    } finally {
      open = false;
      client.removeListener('error', onError);
      client.release(broken);
      endCommitHooks(tx, committed);
    }
  }

  async function transaction<T>(fn: (tx: PgExecutor) => Promise<T>, topts: TransactionOptions = {}): Promise<T> {
    const max = topts.maxAttempts ?? 8;
    for (let attempt = 1; ; attempt++) {
      try {
        return await once(fn, topts.isolation);
      } catch (err) {
        if (attempt >= max || !isRetryable(err)) throw err;
        await sleep(backoff(attempt));
      }
    }
  }

  const listener = new Listener(url, redactedUrl, opts);
  const pooled = executor(pool, false);
  let closed = false;

  return {
    dialect: 'postgres',
    redactedUrl,
    get: pooled.get,
    all: pooled.all,
    values: pooled.values,
    run: pooled.run,
    transaction,
    withAdvisoryXactLock(key, fn, topts) {
      if (key < INT8_MIN || key > INT8_MAX) throw new RangeError(`advisory lock key ${key} is outside int8`);
      return transaction(async (tx) => {
        await tx.get(sql`SELECT pg_advisory_xact_lock(${key}::bigint)`);
        return fn(tx);
      }, topts);
    },
    batcher: (name, apply, bopts) => new PgBatcher(transaction, name, apply, bopts),
    listen: (channel, onNotify) => listener.add(channel, onNotify),
    async close() {
      if (closed) return;
      closed = true;
      await listener.close();
      await pool.end();
    },
  };
}

/**
 * Opens a store and checks it can work: one connection, and a server of version 15 or later.
 * Fails with a PgConnectError whose message is one line naming the URL (password masked) and
 * the reason: refused, authentication failed, unknown database, timeout.
 */
export async function connectPg(url: string, opts: PgOptions): Promise<PgStore> {
  const timeoutMs = opts.connectTimeoutMs ?? 5_000;
  let client: pg.Client;
  try {
    client = new pg.Client({ ...poolConfig(url, opts), connectionTimeoutMillis: timeoutMs });
  } catch {
    // pg parses the URL here, and throws a bare "Invalid URL" (its text left out: it may hold the password).
    throw new PgConnectError(
      url,
      'invalid_url',
      'the URL cannot be read: percent-encode any / ? # @ : % or space in the user name or password (encodeURIComponent), or give the password in PGPASSWORD',
    );
  }
  client.on('error', () => {}); // a failure here is the connect's or the query's rejection
  let version: number;
  try {
    await client.connect();
    const { rows } = await client.query<{ v: string }>('SHOW server_version_num');
    version = Number(rows[0].v);
  } catch (err) {
    throw connectError(err, url, timeoutMs);
  } finally {
    await client.end().catch(() => {});
  }
  if (version < 150000) {
    const shown = `${Math.floor(version / 10000)}.${version % 10000}`;
    throw new PgConnectError(url, 'other', `PostgreSQL ${shown} is older than 15, the oldest msgd supports`);
  }
  return openPg(url, opts);
}

/** Batches of one batcher running at once at most: a second only while more than max wait. */
const MAX_BATCHES_IN_FLIGHT = 4;

class PgBatcher<I, O> extends BatchQueue<I, O> {
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly transaction: <T>(fn: (tx: PgExecutor) => Promise<T>) => Promise<T>,
    name: string,
    apply: BatchFn<I, O>,
    opts?: BatcherOptions,
  ) {
    super(name, apply, opts);
  }

  protected submitted(): void {
    // What is submitted in this turn joins the first batch.
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (
      this.queue.length > 0 &&
      (this.inFlight === 0 || (this.queue.length > this.max && this.inFlight < MAX_BATCHES_IN_FLIGHT))
    ) {
      const batch = this.take();
      this.inFlight++;
      void this.runBatch(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async runBatch(batch: PendingItem<I, O>[]): Promise<void> {
    const items = batch.map((p) => p.item);
    let results: BatchResult<O>[];
    try {
      // 40001 and 40P01 run it again whole (transaction's retry).
      results = await this.transaction((tx) => this.applyAll(tx, items));
    } catch (e) {
      // The server gone (or the COMMIT's outcome unknown): running the items again cannot help,
      // and after a lost COMMIT it could apply them twice.
      if (e instanceof StorageUnavailableError) return this.fail(batch, e);
      this.stats.reruns++;
      try {
        results = await this.transaction((tx) => this.oneByOne(tx, items));
      } catch (e2) {
        return this.fail(batch, e2);
      }
    }
    this.settle(batch, results);
  }

  /** Each item in a savepoint of its own: one that fails takes back only its writes. */
  private async oneByOne(tx: PgExecutor, items: readonly I[]): Promise<BatchResult<O>[]> {
    const results: BatchResult<O>[] = [];
    for (const item of items) {
      await tx.run(sql`SAVEPOINT batch_item`);
      try {
        results.push((await this.applyAll(tx, [item]))[0]);
        await tx.run(sql`RELEASE SAVEPOINT batch_item`);
      } catch (e) {
        // The whole transaction runs again (or fails): not this item's alone.
        if (isRetryable(e) || e instanceof StorageUnavailableError) throw e;
        await tx.run(sql`ROLLBACK TO SAVEPOINT batch_item`);
        await tx.run(sql`RELEASE SAVEPOINT batch_item`);
        results.push({ ok: false, error: e });
      }
    }
    return results;
  }
}

type Handler = (payload: string) => void;

/** One connection for every LISTEN of a store, opened on first use and reopened when lost. */
class Listener {
  private client: pg.Client | undefined;
  private connecting: Promise<pg.Client> | undefined;
  private readonly channels = new Map<string, Set<Handler>>();
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelay = 100;
  private closed = false;
  private lostAt = 0;

  constructor(
    private readonly url: string,
    private readonly redactedUrl: string,
    private readonly opts: PgOptions,
  ) {}

  async add(channel: string, onNotify: Handler): Promise<() => Promise<void>> {
    if (this.closed) throw new Error('the store is closed');
    let handlers = this.channels.get(channel);
    const first = !handlers;
    if (!handlers) {
      handlers = new Set();
      this.channels.set(channel, handlers);
    }
    handlers.add(onNotify);
    if (first) {
      try {
        const client = await this.connection();
        // A connection made after the channel was added listened to it already.
        await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      } catch (err) {
        handlers.delete(onNotify);
        if (handlers.size === 0) this.channels.delete(channel);
        throw classify(err, this.url);
      }
    }
    return async () => {
      const set = this.channels.get(channel);
      if (!set?.delete(onNotify) || set.size > 0) return;
      this.channels.delete(channel);
      await this.client?.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => {});
    };
  }

  private connection(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client({ ...poolConfig(this.url, this.opts) });
    const lost = (err?: Error) => {
      if (this.client !== client) return;
      this.client = undefined;
      client.removeAllListeners('notification');
      client.end().catch(() => {});
      if (this.closed) return;
      this.lostAt = Date.now();
      const r = err ? unavailableReason(err) : undefined;
      this.opts.logger.warn(
        { url: this.redactedUrl, reason: r?.reason ?? 'connection_lost' },
        'PostgreSQL: the LISTEN connection was lost; reconnecting (notifications sent meanwhile are not delivered)',
      );
      this.scheduleReconnect();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (m) => {
      for (const h of this.channels.get(m.channel) ?? []) {
        try {
          h(m.payload ?? '');
        } catch (err) {
          this.opts.logger.warn({ channel: m.channel, error: String(err) }, 'a LISTEN handler threw');
        }
      }
    });
    try {
      await client.connect();
      for (const channel of this.channels.keys()) await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      client.removeAllListeners();
      client.on('error', () => {});
      await client.end().catch(() => {});
      throw classify(err, this.url);
    }
    if (this.closed) {
      await client.end().catch(() => {});
      throw new Error('the store is closed');
    }
    this.client = client;
    this.retryDelay = 100;
    return client;
  }

  private scheduleReconnect() {
    if (this.closed || this.retryTimer || this.channels.size === 0) return;
    const delay = this.retryDelay / 2 + Math.random() * (this.retryDelay / 2);
    this.retryDelay = Math.min(5_000, this.retryDelay * 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.closed || this.client || this.channels.size === 0) return;
      this.connection().then(
        () => {
          this.opts.logger.info?.(
            { url: this.redactedUrl, afterMs: Date.now() - this.lostAt },
            'PostgreSQL: the LISTEN connection is back',
          );
        },
        () => this.scheduleReconnect(),
      );
    }, delay);
    this.retryTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const client = this.client ?? (await this.connecting?.catch(() => undefined));
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}

export { PgConnectError, StorageUnavailableError };
