import type { Logger } from 'pino';
import { Agent } from 'undici';
import type { Config } from './config/schema.js';
import { backupBeforeMigrate } from './db/backup.js';
import { DataDirError, type DataDir } from './db/datadir.js';
import { describeKeySource, type KeySource } from './db/master-key.js';
import { kindsTheKeyOpensNone, SEALED_ROWS } from './core/sealed-secrets.js';
import { lockDataDir } from './db/instance-lock.js';
import { type OpenedStore, openStore } from './db/open-store.js';
import { PgStorageHealth } from './db/pg/health.js';
import { SqliteStorageHealth, type StorageHealth } from './db/storage.js';
import type { CoreCtx } from './core/context.js';
import { TokenAuthenticator } from './core/tokens.js';
import { defaultLowBalance } from './core/partners.js';
import { VERSION } from './lib/version.js';
import { JobQueue } from './queue/queue.js';
import { Worker } from './queue/worker.js';
import { forbiddenReason } from './webhooks-out/ssrf.js';
import { RateShaper } from './queue/rate.js';
import { GatewayBook } from './jobs/gateway-book.js';
import { dispatchEnqueuer, registerDispatch } from './jobs/dispatch.js';
import { WebhookIntake } from './webhooks-in/intake.js';
import { registerWebhooksIn, webhookRetentionTask } from './webhooks-in/process.js';
import type { AcceptDeps } from './core/send.js';
import { gatewayKinds } from './providers/kinds.js';
import { closeAdapters } from './providers/registry.js';
import type { MaintenanceDeps } from './jobs/maintenance.js';
import type { MaintenanceTask } from './queue/maintenance-task.js';
import {
  createWebhooksOut,
  retentionTask as webhooksOutRetentionTask,
  type WebhooksOut,
} from './webhooks-out/index.js';
import { consoleTasks } from './jobs/console-upkeep.js';
import { Counters } from './core/counters.js';
import { clearCircuits, saveCircuit } from './core/circuits.js';
import { CircuitBreakers } from './jobs/circuit-breaker.js';
import type { Heartbeat } from './jobs/heartbeat.js';
import { templateSyncTask } from './jobs/template-sync.js';
import { type Leader, soleLeader } from './db/leader.js';
import { startPgLeader } from './db/pg/leader.js';

// The composition root: one object holding everything a running msgd needs. msgd's
// server builds it with background work; tests build it over a temp data directory.

export interface Runtime {
  version: string;
  config: Config;
  logger: Logger;
  /** The store msgd runs on: the data directory's SQLite file, or PostgreSQL (database.url). */
  opened: OpenedStore;
  /** The data directory (SQLite); null on PostgreSQL. */
  dataDir: DataDir | null;
  /**
   * The parts of msgd that still work on the SQLite connection itself, and so are not built on
   * PostgreSQL (using one there answers not_on_postgresql): empty on SQLite.
   */
  sqliteOnly: readonly SqliteOnlyPart[];
  ctx: CoreCtx;
  auth: TokenAuthenticator;
  /** Provider webhooks in: verified, then group-committed with their processing job on ctx.store. */
  webhookIntake: WebhookIntake;
  queue: JobQueue;
  worker: Worker;
  shaper: RateShaper;
  /** Gateways with their secrets opened, kept until the gateways table changes (dispatch and webhooks in). */
  gateways: GatewayBook;
  dispatcher: Agent;
  acceptDeps: AcceptDeps;
  /** Outbound webhooks: fan-out, delivery worker and agent; started by the server. */
  webhooksOut: WebhooksOut;
  /** Where msgd can reach itself (sandbox reports): set once the server listens. */
  selfUrl: string | null;
  /** Retention and upkeep tasks each surface adds; scheduled by src/jobs/maintenance.ts. */
  maintenanceTasks: MaintenanceTask<MaintenanceDeps>[];
  /** Work counters (src/core/counters.ts): the console's and a metrics exporter's one source. */
  counters: Counters;
  /** Each gateway's circuit breaker (src/jobs/circuit-breaker.ts), published to gateway_circuits. */
  breakers: CircuitBreakers;
  /** Whether msgd can keep what it accepts: /readyz and the msgd_ready metric read it. */
  storage: StorageHealth;
  /** Writes the counters and "msgd is alive" to the database; started by the server. */
  heartbeat: Heartbeat | null;
  /**
   * Whether this instance leads the ones sharing the store (src/db/leader.ts): what must run
   * once per cluster outside the queue runs on the leader. On SQLite, always this process.
   */
  leader: Leader;
  /**
   * Base URL a provider calls back on: config server.publicUrl; else the listening address,
   * unless that is a loopback address and the provider (its base URL) is not on this machine.
   */
  callbackBase(providerBaseUrl?: string): string | null;
  close(): Promise<void>;
}

export interface RuntimeOptions {
  config: Config;
  logger: Logger;
  env?: NodeJS.ProcessEnv;
  now?: () => number;
}

/**
 * A key that opens none of a kind's stored secrets is not the one they were written with:
 * refused at start, rather than every dispatch, delivery or two-factor login failing one by one.
 */
async function refuseWrongKey(ctx: CoreCtx, source: KeySource): Promise<void> {
  const none = await kindsTheKeyOpensNone(ctx);
  if (!none.length) return;
  const what = none.map(({ kind, rows }) => `${rows} ${SEALED_ROWS[kind][rows === 1 ? 0 : 1]}`).join(', ');
  throw new DataDirError(
    `the master key from ${describeKeySource(source)} opens none of the stored secrets of ${what}: it is probably not the key they were written with; start msgd with that key (msgctl doctor names the rows)`,
  );
}

/**
 * The parts of msgd built only on SQLite, each still working on the SQLite connection itself:
 * none, every part runs on PostgreSQL too. One named here is not built there, and msgd's start
 * says so.
 */
export const SQLITE_ONLY_PARTS = {} as const;

export type SqliteOnlyPart = keyof typeof SQLITE_ONLY_PARTS;

/**
 * Opens the configured store for msgd. SQLite: the data directory, locked to this process,
 * created and migrated (after a backup, backup.beforeMigrate). PostgreSQL: connected and
 * migrated under the migration lock; the data-directory features say in one log line each
 * that they do nothing there.
 */
async function openRuntimeStore(
  config: Config,
  logger: Logger,
  env: NodeJS.ProcessEnv | undefined,
): Promise<{ opened: OpenedStore; release(): void }> {
  if (!config.database.url) {
    const lock = lockDataDir(config.dataDir);
    try {
      const opened = await openStore(config, {
        create: true,
        env,
        manualCheckpoint: true,
        beforeMigrate: config.backup.beforeMigrate
          ? backupBeforeMigrate(config, (file, pending, keyFile) =>
              logger.info({ file, keyFile, pending }, 'backup taken before applying migrations'),
            )
          : undefined,
      });
      return { opened, release: () => lock.release() };
    } catch (e) {
      lock.release();
      throw e;
    }
  }
  const opened = await openStore(config, { env, migrate: false, logger, applicationName: 'msgd' });
  try {
    const status = await opened.migrationStatus();
    if (config.backup.beforeMigrate && status.pending.length && status.applied > 0 && !status.tooNew) {
      logger.info(
        { database: opened.where, pending: status.pending },
        'backup.beforeMigrate takes no backup on PostgreSQL: back the database up with pg_dump or continuous archiving before upgrading msgd',
      );
    }
    const applied = await opened.migrate();
    if (applied.length) logger.info({ database: opened.where, applied }, 'migrations applied');
    if (config.backup.schedule) {
      logger.info(
        { database: opened.where, schedule: config.backup.schedule },
        'backup.schedule takes no backups on PostgreSQL: back the database up with pg_dump or continuous archiving',
      );
    }
  } catch (e) {
    await opened.close();
    throw e;
  }
  // No instance lock: it is a lock on a data directory, and PostgreSQL has none. One msgd per
  // database (docs/scale.md).
  return { opened, release: () => {} };
}

export async function createRuntime(opts: RuntimeOptions): Promise<Runtime> {
  const { config, logger } = opts;
  const now = opts.now ?? Date.now;
  const { opened, release } = await openRuntimeStore(config, logger, opts.env);
  const onSqlite = opened.dialect === 'sqlite';
  const ctx: CoreCtx = {
    db: opened.db,
    store: opened.store,
    masterKey: opened.masterKey,
    config,
    now,
    gatewayKinds,
  };
  const sqliteOnly = onSqlite ? [] : (Object.keys(SQLITE_ONLY_PARTS) as SqliteOnlyPart[]);
  try {
    await refuseWrongKey(ctx, opened.keySource);
  } catch (e) {
    await opened.close();
    release();
    throw e;
  }
  const queue = new JobQueue(onSqlite ? opened.db : opened.store, {
    maxAttempts: config.jobs.maxAttempts,
    leaseMs: config.jobs.leaseSeconds * 1000,
    now,
    // Another instance's enqueue wakes this one's worker (a hint: polling finds it anyway).
    listen: opened.pg && config.database.listen ? (channel, fn) => opened.pg!.listen(channel, fn) : undefined,
  });
  // On PostgreSQL the worker runs dispatch, webhook processing and maintenance, as on SQLite.
  const worker = new Worker({
    db: onSqlite ? opened.db : undefined,
    queue,
    concurrency: config.jobs.concurrency,
    leaseMs: config.jobs.leaseSeconds * 1000,
    lifelineIntervalMs: config.jobs.lifelineIntervalSeconds * 1000,
    maxSleepMs: config.jobs.pollIntervalMs,
    backoff: { baseMs: config.jobs.backoffBaseMs, capMs: config.jobs.backoffCapMs },
    logger,
    now,
  });
  const dispatcher = new Agent({
    connections: config.dispatch.connectionsPerOrigin,
    // A provider that does not take the connection: given up on (as never sent) in time.
    connectTimeout: Math.min(config.dispatch.timeoutMs, 10_000),
    keepAliveTimeout: 30_000,
    pipelining: 1,
  });
  const shaper = new RateShaper({ now });
  const counters = new Counters();
  const webhooksOut = createWebhooksOut({ ctx, queue, config, logger, now, counters });
  const gateways = new GatewayBook(ctx);
  const webhookIntake = new WebhookIntake({ ctx, config, queue, book: gateways, counters });
  // Every circuit starts closed: what a process before this one published no longer holds.
  // The writes go one after another, so the table ends at the breaker's latest state; a
  // transition inside a store transaction is written after it.
  let circuitWrites: Promise<void> = clearCircuits(ctx).catch((e: unknown) => {
    logger.warn({ err: e }, 'could not clear the gateway circuits msgd published before');
  });
  const breakers = new CircuitBreakers(
    config.dispatch.circuitBreaker,
    now,
    logger,
    (c) => {
      circuitWrites = circuitWrites
        .then(() => saveCircuit(ctx, c))
        .catch((e: unknown) => {
          // Only the consoles' view of it: the breaker itself is in memory and goes on.
          logger.warn({ err: e, gatewayId: c.gateway_id }, 'could not record a gateway circuit change');
        });
    },
    (id) => gateways.get(id)?.name ?? id,
  );
  const loopback = { self: '', selfIs: false, providers: new Map<string, boolean>() };
  let storage: StorageHealth;
  if (opened.pg) {
    const health = new PgStorageHealth(opened.pg, { now });
    await health.start();
    storage = health;
  } else {
    const dir = opened.dataDir!;
    storage = new SqliteStorageHealth(dir.db, dir.dir, config.health.minFreeDiskMb * 1024 * 1024, now);
  }
  let unlisten: (() => Promise<void>) | null = null;
  try {
    unlisten = await queue.listenForWakeups();
  } catch (e) {
    logger.warn(
      { err: e },
      "could not LISTEN for other instances' enqueues: their jobs are found by polling (jobs.pollIntervalMs)",
    );
  }
  const leaderError = (err: unknown) => logger.warn({ err }, 'a listener of the leader change threw');
  const leader = config.database.url ? await startPgLeader(config.database.url, { logger }) : soleLeader(leaderError);
  const rt: Runtime = {
    version: VERSION,
    config,
    logger,
    opened,
    dataDir: opened.dataDir,
    sqliteOnly,
    ctx,
    auth: new TokenAuthenticator(ctx),
    webhookIntake,
    queue,
    worker,
    shaper,
    gateways,
    dispatcher,
    acceptDeps: {
      ctx,
      enqueueDispatch: dispatchEnqueuer(queue),
      defaultLowBalance: defaultLowBalance(config),
      idempotencyTtlMs: config.idempotency.ttlHours * 3_600_000,
    },
    webhooksOut,
    selfUrl: null,
    maintenanceTasks: [],
    counters,
    breakers,
    storage,
    heartbeat: null,
    leader,
    callbackBase(providerBaseUrl?: string) {
      if (config.server.publicUrl) return config.server.publicUrl.replace(/\/+$/, '');
      const self = rt.selfUrl;
      if (!self) return self;
      // Asked once per dispatched message: the URL parses are remembered per base URL.
      if (self !== loopback.self) {
        loopback.self = self;
        loopback.selfIs = isLoopbackUrl(self);
        loopback.providers.clear();
      }
      if (!loopback.selfIs) return self;
      if (providerBaseUrl === undefined) return null;
      let local = loopback.providers.get(providerBaseUrl);
      if (local === undefined) loopback.providers.set(providerBaseUrl, (local = isLoopbackUrl(providerBaseUrl)));
      return local ? self : null;
    },
    async close() {
      // A provider call on a connection ends once the provider has not answered within
      // dispatch.timeoutMs: wait that long (and a margin) so none is handed back while the
      // provider may still act on it. A job released anyway counts as reclaimed, so its message
      // is flagged dispatch_uncertain when re-sent.
      await worker.stop({ timeoutMs: Math.max(10_000, config.dispatch.timeoutMs + 2_000) });
      await webhooksOut.stop();
      await closeAdapters();
      // destroy, not close: close() would still send the calls queued for a free connection,
      // and their jobs are back in the queue by now.
      await dispatcher.destroy();
      await rt.heartbeat?.stop();
      await leader.close();
      storage.stop();
      await unlisten?.().catch(() => {});
      await opened.close();
      release();
    },
  };
  registerDispatch(worker, {
    ctx,
    config,
    dispatcher,
    shaper,
    gateways,
    logger,
    counters,
    breakers,
    callbackBase: (base) => rt.callbackBase(base),
  });
  // On both stores; the server schedules them (src/jobs/maintenance.ts), once per slot per database.
  rt.maintenanceTasks.push(webhookRetentionTask(), webhooksOutRetentionTask(config.webhooksOut.retentionDays));
  rt.maintenanceTasks.push(...consoleTasks);
  rt.maintenanceTasks.push(templateSyncTask({ dispatcher, timeoutMs: config.dispatch.timeoutMs }));
  registerWebhooksIn(worker, {
    ctx,
    config,
    queue,
    gateways,
    dispatcher,
    callbackBase: () => rt.callbackBase(),
    selfUrl: () => rt.selfUrl,
    logger,
    counters,
  });
  return rt;
}

/** Is the URL's host this machine (localhost, 127.0.0.0/8, ::1)? */
export function isLoopbackUrl(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return false;
  }
  return host === 'localhost' || host.endsWith('.localhost') || forbiddenReason(host) === 'loopback';
}
