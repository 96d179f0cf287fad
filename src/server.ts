import type { FastifyInstance } from 'fastify';
import { configFileFor, loadConfig, shownConfig, type LoadOptions } from './config/load.js';
import type { Config } from './config/schema.js';
import { startCheckpointer, type Checkpointer } from './db/checkpointer.js';
import { maybeSeedDemo, type DemoSeed } from './core/demo.js';
import { buildApp } from './http/app.js';
import { createLogger } from './web/logger.js';
import { dataUpkeepTasks } from './jobs/data-upkeep.js';
import { LogSink } from './lib/log-sink.js';
import type { Metrics } from './http/metrics/index.js';
import { startMaintenance, type Maintenance } from './jobs/maintenance.js';
import { uiPlugin } from './ui/plugin.js';
import { createRuntime, type Runtime, SQLITE_ONLY_PARTS } from './runtime.js';
import { startHeartbeat } from './jobs/heartbeat.js';
import { writeServerConfigFile } from './core/counter-store.js';
import { TEMPLATE_SYNC_TASK } from './jobs/template-sync.js';

export interface Server {
  rt: Runtime;
  app: FastifyInstance;
  url: string;
  demo: DemoSeed | null;
  /** msgd's own log destination (stdout), unless the caller gave one. */
  logSink: LogSink | null;
  /** The separate metrics listener's /metrics URL (metrics.port), or null. */
  metricsUrl: string | null;
  close(): Promise<void>;
}

export interface StartOptions extends LoadOptions {
  config?: Config;
  /**
   * Where the one-time demo banner goes: stderr by default, so stdout carries nothing but
   * JSON log lines (a log shipper parses every one) and the banner still shows at a terminal.
   */
  print?: (text: string) => void;
  logDestination?: NodeJS.WritableStream;
  /** The clock msgd's work reads (expiry, grace periods, run_at, leases); Date.now by default. */
  now?: () => number;
}

function demoBanner(seed: DemoSeed, url: string): string {
  return [
    '',
    '  msgd created a demo partner on a sandbox gateway (no provider account needed).',
    '  Its API token is shown ONCE, now. Store it if you want to keep using it:',
    '',
    `    ${seed.token}`,
    '',
    '  Send an SMS through the sandbox:',
    '',
    `    curl -s ${url}/api/send-sms.php \\`,
    `      -H "Authorization: Bearer ${seed.token}" \\`,
    `      -H "Content-Type: application/json" \\`,
    `      -d '{"to":"+14155550123","text":"Hello from msgd"}'`,
    '',
    `  Then watch it go queued -> sent -> delivered:  curl -s ${url}/v1/messages/<id> -H "Authorization: Bearer ${seed.token}"`,
    '  Turn the demo off with MSGD_DEMO=false or --no-demo; it is never created once partners exist.',
    '',
  ].join('\n');
}

/** msgd serve: open (create, migrate) the data dir, listen, run the job loop and cron. */
export async function startServer(opts: StartOptions = {}): Promise<Server> {
  const config = opts.config ?? loadConfig(opts);
  // Never pino's default destination: it blocks forever on a log output that fails.
  const logSink = opts.logDestination ? null : new LogSink();
  const logger = createLogger(config.log.level, { destination: opts.logDestination ?? logSink! });
  const rt = await createRuntime({ config, logger, env: opts.env, now: opts.now });
  const dataDir = rt.dataDir;
  if (rt.sqliteOnly.length) {
    // Said once at start: these parts answer not_on_postgresql until they run on PostgreSQL too.
    logger.warn(
      {
        database: rt.opened.where,
        sqliteOnlyParts: rt.sqliteOnly,
        notOnPostgresql: rt.sqliteOnly.map((p) => SQLITE_ONLY_PARTS[p]),
      },
      'msgd runs on PostgreSQL without the parts that still need the SQLite data directory: they answer 501 not_on_postgresql',
    );
  }
  let app: FastifyInstance | undefined;
  let checkpointer: Checkpointer | undefined;
  let maintenance: Maintenance | undefined;
  let metrics: Metrics | undefined;
  try {
    await writeServerConfigFile(rt.ctx, configFileFor(opts));
    const demo = config.demo.enabled ? await maybeSeedDemo(rt.ctx) : null;
    app = await buildApp(rt);
    // The web console, into the app after its hooks (shutdown 503, request id, request log),
    // which then apply to /ui as to the partner APIs.
    await app.register(uiPlugin, { rt, prefix: '/ui' });
    // prom-client is loaded only when metrics are on: off, msgd does not carry it.
    const m =
      rt.config.metrics.token !== null || rt.config.metrics.port !== null
        ? await import('./http/metrics/index.js')
        : null;
    const registry = m
      ? m.createMetricsRegistry({
          rt,
          checkpointer: {
            get last() {
              return checkpointer?.last ?? null;
            },
          },
          logSink,
        })
      : null;
    if (m && registry) m.instrumentApp(app, rt, registry);
    await app.listen({ host: config.server.host, port: config.server.port });
    if (m && registry) metrics = await m.startMetricsListener(rt, registry);
    const addr = app.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : config.server.port;
    const host = config.server.host === '0.0.0.0' || config.server.host === '::' ? '127.0.0.1' : config.server.host;
    const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
    rt.selfUrl = url;
    if (dataDir) {
      checkpointer = startCheckpointer(dataDir.db.path, {
        writer: dataDir.db.sqlite,
        onError: (m) => logger.warn({ err: m }, 'WAL checkpoint failed'),
      });
      rt.maintenanceTasks.push(...dataUpkeepTasks(config, dataDir));
    }
    // Cron and the maintenance jobs, on both stores: each slot claimed once in the database.
    maintenance = startMaintenance(rt, { checkpointer });
    // The WhatsApp template catalogues are read at start too, not only every few hours.
    await maintenance.cron.fire(TEMPLATE_SYNC_TASK, new Date(rt.ctx.now()));
    if (dataDir) {
      // The data directory is locked to this process: jobs left running were a dead msgd's.
      const orphans = await rt.queue.reclaimOrphans();
      if (orphans > 0) {
        logger.warn(
          { count: orphans },
          'jobs left running by a msgd that stopped without finishing them were taken back; a message whose provider call was among them is resent and flagged a possible duplicate',
        );
      }
      rt.worker.start();
      rt.webhooksOut.start();
    } else {
      // PostgreSQL: dispatch, webhook processing, maintenance and webhooks out. No lock says a msgd
      // that left jobs running is gone: the lifelines take them back once their lease has passed.
      rt.worker.start();
      rt.webhooksOut.start();
    }
    rt.heartbeat = await startHeartbeat({
      ctx: rt.ctx,
      counters: rt.counters,
      version: rt.version,
      logger,
      leader: rt.leader,
      // The data directory is locked to this process: another row is a gone msgd's.
      alone: dataDir !== null,
    });
    // The settings in force, so a log shows what the process ran with (the config holds no secrets).
    logger.info(
      {
        url,
        metricsUrl: metrics?.url ?? (config.metrics.token ? `${url}/metrics` : null),
        ...(dataDir ? { dataDir: dataDir.dir } : { database: rt.opened.where }),
        version: rt.version,
        node: process.version,
        pid: process.pid,
        config: shownConfig(config),
      },
      'msgd listening',
    );
    if (demo)
      (opts.print ?? ((t: string) => process.stderr.write(t + '\n')))(demoBanner(demo, config.server.publicUrl ?? url));
    let closing: Promise<void> | undefined;
    const server: Server = {
      rt,
      app,
      url,
      demo,
      logSink,
      metricsUrl: metrics?.url ?? null,
      close() {
        closing ??= (async () => {
          logger.info('msgd shutting down: no new requests, finishing in-flight jobs');
          // Requests under way get a moment to finish; connections still open after it (a
          // slow client) are cut, so HTTP never holds up the jobs' own shutdown.
          const http = app!.close();
          const grace = Math.min(5_000, config.server.shutdownTimeoutMs / 4);
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([http, new Promise((r) => (timer = setTimeout(r, grace)))]);
          clearTimeout(timer);
          app!.server.closeAllConnections();
          await http;
          await metrics?.close();
          maintenance?.stop();
          await rt.close();
          await checkpointer?.stop();
          logger.info('msgd stopped');
        })();
        return closing;
      },
    };
    return server;
  } catch (e) {
    await metrics?.close();
    maintenance?.stop();
    await app?.close().catch(() => {});
    await checkpointer?.stop();
    await rt.close().catch(() => {});
    throw e;
  }
}
