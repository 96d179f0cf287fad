import { statSync } from 'node:fs';
import { Counter, Gauge, type GaugeConfiguration, type Registry } from 'prom-client';
import { indexedBy } from '../../db/dialect.js';
import { sql } from '../../db/sql.js';
import type { LogSink } from '../../lib/log-sink.js';
import { defaultLowBalance } from '../../core/partners.js';
import type { MetricsDeps } from '../deps.js';

// Gauges read at scrape time from indexed queries over small tables (jobs, partners, endpoints)
// and from the files and objects msgd already has: never a scan of messages or the ledger,
// so a scrape costs the same with 5 million messages stored as with none.
//
// The queue, partner and endpoint gauges describe the store, which the instances sharing it
// (PostgreSQL) all see alike: only the leader (src/db/leader.ts) exports them, so a sum() over
// instances counts them once. They join the registry when this instance becomes the leader and
// leave it when it stops being it. On SQLite the one process is the leader.

const JOB_STATES = ['available', 'retry', 'running', 'dead'] as const;

export interface CheckpointView {
  /** The last checkpoint round: when, WAL frames, frames copied into the database. */
  readonly last: { at: number; log: number; checkpointed: number } | null;
}

export interface CollectorSources {
  rt: MetricsDeps;
  checkpointer?: CheckpointView;
  logSink?: LogSink | null;
}

export function registerCollectors(registry: Registry, src: CollectorSources): void {
  const { rt } = src;
  const store = rt.ctx.store;
  const defaultLow = defaultLowBalance(rt.config);
  const fromStore = new Map<string, Gauge>();
  /** A gauge read from the store: registered while this instance leads (exportFromStore). */
  const storeGauge = <T extends string>(cfg: GaugeConfiguration<T>) => {
    fromStore.set(cfg.name, new Gauge({ ...cfg, registers: [] }) as Gauge);
  };

  storeGauge({
    name: 'msgd_jobs',
    help: 'Jobs in the queue by kind and state (available, retry, running, dead); completed jobs are removed',
    labelNames: ['kind', 'state'],
    async collect() {
      const rows = await store.all<{ kind: string; state: string; n: number }>(
        sql`SELECT kind, state, CAST(COUNT(*) AS BIGINT) AS n FROM jobs ${indexedBy(store.dialect, 'jobs_kind_claim')}
            GROUP BY kind, state`,
      );
      this.reset();
      // Every state of every kind msgd runs, at 0 when empty: a series that vanishes at zero
      // leaves an alert's `> 0` with nothing to compare and a graph with a gap.
      for (const worker of [rt.worker, rt.webhooksOut.worker])
        for (const kind of worker.registeredKinds()) for (const state of JOB_STATES) this.set({ kind, state }, 0);
      for (const r of rows) this.set({ kind: r.kind, state: r.state }, r.n);
    },
  });

  // /readyz's answer: an alert on it needs no probe from outside.
  new Gauge({
    name: 'msgd_ready',
    help: '1 while msgd can keep what it accepts (GET /readyz answers 200), else 0: a write refused, migrations pending, the disk under health.minFreeDiskMb',
    registers: [registry],
    collect() {
      this.set(rt.storage.readiness().ok ? 1 : 0);
    },
  });

  storeGauge({
    name: 'msgd_partners_below_low_balance',
    help: 'Active partners whose balance is under their low-balance threshold (their own, else billing.balanceLowThreshold)',
    async collect() {
      const r = await store.get<{ n: number }>(
        sql`SELECT CAST(COUNT(*) AS BIGINT) AS n FROM partners
            WHERE status = 'active' AND balance < COALESCE(low_balance_threshold, ${defaultLow})`,
      );
      this.set(r?.n ?? 0);
    },
  });

  storeGauge({
    name: 'msgd_webhook_endpoints',
    help: 'Partner webhook endpoints by status (enabled, disabled); deleted ones are not counted',
    labelNames: ['status'],
    async collect() {
      const rows = await store.all<{ status: string; n: number }>(
        sql`SELECT status, CAST(COUNT(*) AS BIGINT) AS n FROM webhook_endpoints WHERE deleted_at IS NULL GROUP BY status`,
      );
      this.reset();
      this.set({ status: 'enabled' }, 0);
      this.set({ status: 'disabled' }, 0);
      for (const r of rows) this.set({ status: r.status }, r.n);
    },
  });
  const exportFromStore = (leading: boolean) => {
    for (const [name, g] of fromStore) {
      const there = registry.getSingleMetric(name) !== undefined;
      if (leading && !there) registry.registerMetric(g);
      else if (!leading && there) registry.removeSingleMetric(name);
    }
  };
  exportFromStore(rt.leader.isLeader());
  rt.leader.onChange(exportFromStore);

  // SQLite's files: PostgreSQL's are its server's to watch (pg_database_size, its own exporter).
  if (store.dialect === 'sqlite') {
    const dbPath = rt.ctx.db.path;
    new Gauge({
      name: 'msgd_sqlite_file_bytes',
      help: 'Size of the database file and of its write-ahead log',
      labelNames: ['file'],
      registers: [registry],
      collect() {
        this.set({ file: 'db' }, sizeOf(dbPath));
        this.set({ file: 'wal' }, sizeOf(`${dbPath}-wal`));
      },
    });
  }

  const cp = src.checkpointer;
  if (cp) {
    new Gauge({
      name: 'msgd_sqlite_wal_frames_pending',
      help: 'WAL frames not yet copied into the database at the last checkpoint round',
      registers: [registry],
      collect() {
        const l = cp.last;
        this.set(l ? Math.max(0, l.log - l.checkpointed) : 0);
      },
    });
    new Gauge({
      name: 'msgd_sqlite_checkpoint_age_seconds',
      help: 'Seconds since the last checkpoint round finished (rounds run every second)',
      registers: [registry],
      collect() {
        const l = cp.last;
        this.set(l ? (Date.now() - l.at) / 1000 : 0);
      },
    });
  }

  // Always listed (a destination given by a test or an embedding program reports none dropped).
  const sink = src.logSink ?? null;
  new Counter({
    name: 'msgd_log_lines_dropped_total',
    help: 'Log lines dropped since start because the log output could not be written or kept up',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(sink?.state.dropped ?? 0);
    },
  });
  new Gauge({
    name: 'msgd_log_output_failing',
    help: '1 while the log output cannot be written (logging paused), else 0',
    registers: [registry],
    collect() {
      this.set(sink?.state.failed ? 1 : 0);
    },
  });

  new Gauge({
    name: 'msgd_gateway_info',
    help: 'Always 1 per gateway; the labels give its id (the gateway label of other metrics), name and kind',
    labelNames: ['gateway', 'name', 'kind'],
    registers: [registry],
    async collect() {
      const rows = await store.all<{ id: string; name: string; kind: string }>(
        sql`SELECT id, name, kind FROM gateways ORDER BY id`,
      );
      this.reset();
      for (const r of rows) this.set({ gateway: r.id, name: r.name, kind: r.kind }, 1);
    },
  });

  new Gauge({
    name: 'msgd_build_info',
    help: 'Always 1; the labels name the running version',
    labelNames: ['version', 'node'],
    registers: [registry],
  }).set({ version: rt.version, node: process.version }, 1);
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}
