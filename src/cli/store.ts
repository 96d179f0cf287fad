import type { Command } from 'commander';
import { type CopyProgress, type CopyReport, CopyMismatchError, copySqliteToPg } from '../db/copy/copy.js';
import { DataDirError, openDataDir } from '../db/datadir.js';
import { lockDataDir } from '../db/instance-lock.js';
import type { KeySource } from '../db/master-key.js';
import { migrate, migrationStatus } from '../db/migrate.js';
import { redactUrl } from '../lib/redact-url.js';
import { connectPg } from '../db/pg/store.js';
import { AppError } from '../lib/errors.js';
import { configFor, withGlobals, type Globals } from './context.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { type CliWritable, processIO } from './io.js';
import { count, lines, money, type Result, table } from './output.js';

// msgctl store copy: a stopped SQLite data directory into an empty PostgreSQL database
// (src/db/copy/), with progress on a terminal and the checks' table at the end.

const fmt = (n: number) => n.toLocaleString('en-US');

/** Progress on stderr, redrawn in place, only for a person at a terminal. */
function progressLine(stderr: CliWritable, enabled: boolean) {
  let shown = false;
  let lastAt = 0;
  return {
    update(p: CopyProgress) {
      if (!enabled) return;
      const now = Date.now();
      // Every table's first line, then at most ten redraws a second.
      if (p.done !== 0 && p.done !== p.total && now - lastAt < 100) return;
      lastAt = now;
      shown = true;
      stderr.write(
        `\r\x1b[2Kcopying ${p.table}: ${fmt(p.done)} / ${fmt(p.total)} rows (${fmt(Math.round(p.rowsPerSecond))} rows/s overall)`,
      );
    },
    clear() {
      if (shown) stderr.write('\r\x1b[2K');
    },
  };
}

/** Where the key is, in words and for --json; never the key. */
function keyWhere(source: KeySource): { text: string; json: { source: string; path: string | null } } {
  if (source.kind === 'env') {
    return { text: 'the MSGD_MASTER_KEY environment variable', json: { source: 'env', path: null } };
  }
  if (source.kind === 'file') {
    return {
      text: `the key file ${source.path} (masterKeyFile)`,
      json: { source: 'master_key_file', path: source.path },
    };
  }
  return { text: `the data directory's key file ${source.path}`, json: { source: 'data_dir', path: source.path } };
}

function countsTable(r: CopyReport): string {
  return table(
    ['table', 'sqlite', 'postgresql', ''],
    r.tables.map((t) => [t.table, fmt(t.source), fmt(t.target), t.source === t.target ? 'ok' : 'DIFFERS']),
    { right: [1, 2] },
  );
}

function moneyLines(r: CopyReport): string[] {
  const m = r.money;
  const same = (a: string, b: string) =>
    a === b ? `${money(BigInt(a))} on both` : `${money(BigInt(a))} ≠ ${money(BigInt(b))}`;
  return [
    `Ledger total: ${same(m.ledgerTotalSource, m.ledgerTotalTarget)}; balances total: ${same(m.balanceTotalSource, m.balanceTotalTarget)}`,
    m.mismatches.length === 0
      ? `Per partner (${count(m.partners, 'partner')}): ledger sum and balance the same on both (compared exactly, in micro-units).`
      : `Partners that differ: ${m.mismatches.map((x) => `${x.partner} ${x.what} ${x.source} ≠ ${x.target}`).join('; ')}`,
  ];
}

function reportJson(r: CopyReport) {
  return {
    tables: r.tables.map((t) => ({ table: t.table, source_rows: t.source, target_rows: t.target })),
    money: {
      partners: r.money.partners,
      ledger_total_source: r.money.ledgerTotalSource,
      ledger_total_target: r.money.ledgerTotalTarget,
      balance_total_source: r.money.balanceTotalSource,
      balance_total_target: r.money.balanceTotalTarget,
      mismatches: r.money.mismatches,
    },
    migrated: r.migrated,
    rows: r.rows,
    duration_ms: r.durationMs,
    rows_per_second: r.rowsPerSecond,
  };
}

async function storeCopy(globals: Globals, opts: { to: string }): Promise<Result> {
  const url = opts.to;
  if (!/^postgres(ql)?:\/\//i.test(url)) {
    throw new UsageError(`--to must be a postgres:// or postgresql:// URL, not ${redactUrl(url)}`);
  }
  const io = globals.io ?? processIO();
  const config = configFor(globals);
  const dd = openDataDir(config.dataDir, {
    create: false,
    migrate: false,
    env: io.env,
    masterKeyFile: config.masterKeyFile,
  });
  try {
    let lock: ReturnType<typeof lockDataDir>;
    try {
      lock = lockDataDir(dd.dir);
    } catch (e) {
      if (!(e instanceof DataDirError)) throw e;
      throw new AppError(
        'msgd_running',
        `msgd is running on ${dd.dir}: stop it first (systemctl stop msgd), so that nothing changes while the copy reads`,
      );
    }
    try {
      const status = migrationStatus(dd.db);
      if (status.tooNew) migrate(dd.db); // refuses a database from a newer msgd
      if (status.pending.length) {
        throw new AppError(
          'pending_migrations',
          `the SQLite database has ${status.pending.length} pending migration(s) (${status.pending.join(', ')}): run "msgctl migrate" first, then copy`,
        );
      }
      const target = await connectPg(url, {
        logger: { warn: (_o, msg) => io.stderr.write(`msgctl: ${msg ?? 'PostgreSQL warning'}\n`) },
        applicationName: 'msgctl store copy',
        poolSize: 2,
      });
      const progress = progressLine(io.stderr, !globals.json && !!(io.stderr as { isTTY?: boolean }).isTTY);
      const key = keyWhere(dd.keySource);
      const head = {
        data_dir: dd.dir,
        source: dd.db.path,
        target: target.redactedUrl,
        master_key: key.json,
      };
      let report: CopyReport;
      try {
        report = await copySqliteToPg(dd.db, target, url, { onProgress: (p) => progress.update(p) });
      } catch (e) {
        if (!(e instanceof CopyMismatchError)) throw e;
        return {
          json: { ok: false, ...head, ...reportJson(e.report) },
          text: lines(countsTable(e.report), '', ...moneyLines(e.report)),
          failure: `${e.message} (${target.redactedUrl})`,
        };
      } finally {
        progress.clear();
        await target.close();
      }
      return {
        json: { ok: true, ...head, ...reportJson(report) },
        text: lines(
          `Copied ${dd.db.path} into ${target.redactedUrl}: ${fmt(report.rows)} rows in ${(report.durationMs / 1000).toFixed(1)} s (${fmt(report.rowsPerSecond)} rows/s), in one transaction.`,
          report.migrated.length ? `The target had no msgd schema: applied ${report.migrated.join(', ')} first.` : null,
          '',
          countsTable(report),
          '',
          ...moneyLines(report),
          '',
          `Master key: the PostgreSQL database needs the same key as this data directory, which reads it from ${key.text}.`,
          'The provider, webhook signing and TOTP secrets were copied sealed with it: keep that key (not printed here) with the database.',
          'Next steps: docs/scale.md ("Moving an existing install to PostgreSQL").',
        ),
      };
    } finally {
      lock.release();
    }
  } finally {
    dd.close();
  }
}

export function registerStore(program: Command) {
  const store = program.command('store').description("msgd's database: copy a SQLite data directory into PostgreSQL");
  store
    .command('copy')
    .description(
      'copy this (stopped) data directory into an empty PostgreSQL database, in one transaction, and check counts and money on both sides',
    )
    .requiredOption(
      '--to <url>',
      'the PostgreSQL database: postgres://user@host:5432/db (the password from PGPASSWORD or ~/.pgpass keeps it off the command line)',
    )
    .addHelpText(
      'after',
      examples(
        'sudo systemctl stop msgd && msgctl backup /var/backups/msgd/',
        'read -rs PGPASSWORD && export PGPASSWORD',
        'msgctl --data-dir /var/lib/msgd store copy --to postgres://msgd@db.example:5432/msgd',
        'msgctl store copy --to postgres://msgd@127.0.0.1/msgd --json',
      ) +
        "\nThe target must be empty (a database without msgd's schema gets it first). msgd must be stopped,\nand the SQLite database migrated (msgctl migrate). See docs/scale.md.\n",
    )
    .action(withGlobals(storeCopy));
}
