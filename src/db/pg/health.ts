import { sql } from '../sql.js';
import { FAILURE_WINDOW_MS, type Readiness, type ReadinessCheck, type StorageHealth } from '../storage.js';
import { migrationStatusIn } from './migrate.js';
import type { PgStore } from './store.js';

// Whether msgd can keep what it accepts, on PostgreSQL: the server answers on the pool and takes
// writes (not a standby, not read-only), and msgd's migrations are current. The database's disk
// is the server's business, not a check here: a server out of space refuses writes (SQLSTATE
// 53100), which msgd notes as a failure like any other.
//
// /readyz must answer at once, also while the server does not (a connection attempt can take
// the whole connect timeout): a probe runs in the background about once a second, one at a
// time, and readiness() answers from the last one. Once the server is back, the pool's next
// connection works and the following probe says so; nothing has to be restarted.

export interface PgStorageHealthOptions {
  /** Between the end of one probe and the start of the next (default 1000 ms). */
  intervalMs?: number;
  now?: () => number;
}

export class PgStorageHealth implements StorageHealth {
  private lastProbe: { at: number; checks: ReadinessCheck[] } | null = null;
  private lastFailure: { at: number; code: string } | null = null;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly intervalMs: number;
  private readonly now: () => number;

  constructor(
    private readonly store: PgStore,
    opts: PgStorageHealthOptions = {},
  ) {
    this.intervalMs = opts.intervalMs ?? 1_000;
    this.now = opts.now ?? Date.now;
  }

  /** Probes now, then keeps probing in the background; resolves after the first probe. */
  async start(): Promise<void> {
    await this.probe();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  noteFailure(e: unknown): void {
    // A StorageUnavailableError's reason (ECONNREFUSED, 57P01, 53100) says more than its code.
    const err = e as { code?: unknown; reason?: unknown } | null;
    this.lastFailure = { at: this.now(), code: String(err?.reason ?? err?.code ?? 'error') };
  }

  readiness(): Readiness {
    const checks = this.lastProbe?.checks ?? [
      { name: 'database', ok: false, message: 'not checked yet' } satisfies ReadinessCheck,
    ];
    const f = this.lastFailure;
    const t = this.now();
    const shown =
      f && t - f.at < FAILURE_WINDOW_MS
        ? checks.map((c) =>
            c.name === 'database' && c.ok
              ? {
                  name: c.name,
                  ok: false,
                  message: `the database refused a write ${Math.round((t - f.at) / 1000)} s ago (${f.code})`,
                }
              : c,
          )
        : checks;
    return { ok: shown.every((c) => c.ok), checks: shown };
  }

  private async probe(): Promise<void> {
    const checks = [await this.database()];
    // The migrations only when the server answers: the same failure twice says nothing more.
    if (checks[0].ok) checks.push(await this.migrations());
    this.lastProbe = { at: this.now(), checks };
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.probe(), this.intervalMs);
    this.timer.unref();
  }

  private async database(): Promise<ReadinessCheck> {
    try {
      const r = await this.store.get<{ ro: string }>(sql`SELECT current_setting('transaction_read_only') AS ro`);
      if (r?.ro === 'on') {
        return {
          name: 'database',
          ok: false,
          message: `PostgreSQL at ${this.store.redactedUrl} is read-only (a standby, or default_transaction_read_only)`,
        };
      }
      return { name: 'database', ok: true, message: 'PostgreSQL answers and takes writes' };
    } catch (e) {
      return { name: 'database', ok: false, message: (e as Error).message };
    }
  }

  private async migrations(): Promise<ReadinessCheck> {
    try {
      const s = await migrationStatusIn(this.store);
      if (s.tooNew) return { name: 'migrations', ok: false, message: 'the database was migrated by a newer msgd' };
      if (s.pending.length > 0)
        return { name: 'migrations', ok: false, message: `pending migrations: ${s.pending.join(', ')}` };
      return { name: 'migrations', ok: true, message: `${s.applied} applied, none pending` };
    } catch (e) {
      return { name: 'migrations', ok: false, message: `cannot read the migrations: ${(e as Error).message}` };
    }
  }
}
