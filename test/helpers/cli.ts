import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PassThrough } from 'node:stream';
import Database from 'better-sqlite3';
import { coreCtxOf } from '../../src/cli/context.js';
import { run } from '../../src/cli/program.js';
import { loadConfig } from '../../src/config/load.js';
import type { CoreCtx } from '../../src/core/context.js';
import { openStore } from '../../src/db/open-store.js';
import { PG_MIGRATIONS_DIR } from '../../src/db/pg/migrate.js';
import { sql } from '../../src/db/sql.js';
import { pinConnection } from '../../src/db/pin.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const MSGCTL = join(ROOT, 'bin', 'msgctl');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** Passed as --data-dir; omit to test MSGD_DATA_DIR / config resolution. */
  dataDir?: string;
  /** Written to stdin, then closed. Without it stdin is closed at once (never a TTY). */
  stdin?: string;
  /** Leave stdin open (a pipe nobody writes to): a command that reads it would hang. */
  holdStdin?: boolean;
  env?: Record<string, string | undefined>;
  /** Only for the spawned binary (spawnCli): in-process runs share the test's directory. */
  cwd?: string;
}

/** This process's environment without any MSGD_* variable (a test's data dir is passed explicitly). */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('MSGD_')) env[k] = v;
  return env;
}

function envFor(opts: RunOptions): NodeJS.ProcessEnv {
  const env = cleanEnv();
  for (const [k, v] of Object.entries(opts.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

const argvFor = (args: string[], opts: RunOptions) => (opts.dataDir ? ['--data-dir', opts.dataDir, ...args] : args);

/**
 * msgctl in this process, through the same run(argv, io) the binary calls: its own stdout,
 * stderr and stdin, a clean MSGD_* environment, and no terminal.
 */
export async function runCli(args: string[], opts: RunOptions = {}): Promise<CliResult> {
  if (opts.cwd !== undefined) throw new Error('runCli: cwd needs the real binary (spawnCli)');
  let stdout = '';
  let stderr = '';
  const stdin = new PassThrough();
  if (!opts.holdStdin) stdin.end(opts.stdin ?? '');
  try {
    const code = await run(['node', 'msgctl', ...argvFor(args, opts)], {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      stdin,
      env: envFor(opts),
      isTTY: false,
    });
    return { code, stdout, stderr };
  } finally {
    stdin.destroy();
  }
}

export interface RunningCli {
  /** What it has written to stdout so far. */
  stdout(): string;
  /** End it the way Ctrl-C does (its abort signal) and wait for it to finish. */
  stop(): Promise<CliResult>;
}

/** A long-running msgctl command (webhooks log --follow) in-process, until stop(). */
export function startCli(args: string[], opts: RunOptions = {}): RunningCli {
  let stdout = '';
  let stderr = '';
  const ctrl = new AbortController();
  const stdin = new PassThrough();
  stdin.end(opts.stdin ?? '');
  const done = run(['node', 'msgctl', ...argvFor(args, opts)], {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    stdin,
    env: envFor(opts),
    isTTY: false,
    signal: ctrl.signal,
  });
  return {
    stdout: () => stdout,
    async stop() {
      ctrl.abort();
      const code = await done;
      return { code, stdout, stderr };
    },
  };
}

/** Run `node bin/msgctl` the way an operator would, in a clean MSGD_* environment. */
export function spawnCli(args: string[], opts: RunOptions = {}): Promise<CliResult> {
  const argv = argvFor(args, opts);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MSGCTL, ...argv], {
      cwd: opts.cwd ?? (opts.dataDir && existsSync(dirname(opts.dataDir)) ? dirname(opts.dataDir) : tmpdir()),
      env: envFor(opts),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.on('error', () => {}); // the command may exit before reading
    if (!opts.holdStdin) child.stdin.end(opts.stdin ?? '');
    else child.on('exit', () => child.stdin.destroy());
  });
}

/** Run with --json, expect success, return the parsed document. */
export async function runJson<T = any>(args: string[], opts: RunOptions = {}): Promise<T> {
  // Before the subcommand: after a literal "--" it would be an operand.
  const r = await runCli(['--json', ...args], opts);
  if (r.code !== 0) throw new Error(`msgctl ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

const made: string[] = [];

/** A path for a data directory inside a fresh temp dir (the data dir itself does not exist yet). */
export function tmpDataDir(): string {
  const root = mkdtempSync(join(tmpdir(), 'msgctl-test-'));
  made.push(root);
  return join(root, 'data');
}

export function cleanupTmp() {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
}

export const DUMP_TABLES = [
  'partners',
  'tokens',
  'gateways',
  'channels',
  'prices',
  'ledger_entries',
  'audit_log',
] as const;

/** Every row of the operator-managed tables, for before/after comparisons. */
export function dumpDb(dataDir: string, tables: readonly string[] = DUMP_TABLES): Record<string, unknown[]> {
  const db = pinConnection(new Database(join(dataDir, 'msgd.db')));
  try {
    const out: Record<string, unknown[]> = {};
    for (const t of tables) out[t] = db.prepare(`SELECT * FROM ${t} ORDER BY rowid`).all();
    return out;
  } finally {
    db.close();
  }
}

/** Raw SQL against the data dir's database, as something other than msgctl would. */
export function withDb<T>(dataDir: string, fn: (db: Database.Database) => T): T {
  const db = pinConnection(new Database(join(dataDir, 'msgd.db')));
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** One line on stderr, in msgctl's format. */
export function oneErrorLine(stderr: string): string {
  const lines = stderr.split('\n').filter((l) => l.length > 0);
  if (lines.length !== 1) throw new Error(`expected one stderr line, got ${lines.length}:\n${stderr}`);
  if (!lines[0].startsWith('msgctl: ')) throw new Error(`stderr line does not start with "msgctl: ": ${lines[0]}`);
  return lines[0];
}

/**
 * The migration tags this build ships for a store, in order: SQLite's (migrations/meta/_journal.json)
 * unless `store` is 'postgres' (migrations/pg/meta/_journal.json).
 */
export function migrationTags(store: 'sqlite' | 'postgres' = 'sqlite'): string[] {
  const dir = store === 'postgres' ? PG_MIGRATIONS_DIR : join(ROOT, 'migrations');
  const journal = JSON.parse(readFileSync(join(dir, 'meta', '_journal.json'), 'utf8'));
  return journal.entries.map((e: { tag: string }) => e.tag);
}

/**
 * Turns a data directory's database back into what the migration files before the newest one
 * build, and forgets that the newest was applied: a real upgrade is then pending, whatever that
 * migration does (new tables and indexes are dropped, added columns removed, dropped ones back).
 */
export function rewindNewestMigration(dataDir: string): void {
  const dir = join(ROOT, 'migrations');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort();
  const ref = pinConnection(new Database(':memory:'));
  for (const f of files.slice(0, -1)) {
    ref.exec(readFileSync(join(dir, f), 'utf8').split('--> statement-breakpoint').join('\n'));
  }
  type Obj = { type: string; name: string; tbl_name: string; sql: string | null };
  const objects = (db: Database.Database) =>
    new Map(
      (
        db
          .prepare(
            `SELECT type, name, tbl_name, sql FROM sqlite_master
             WHERE name NOT LIKE 'sqlite_%' AND name != '__drizzle_migrations'`,
          )
          .all() as Obj[]
      ).map((o) => [o.name, o]),
    );
  const columns = (db: Database.Database, table: string) =>
    (db.prepare('SELECT name FROM pragma_table_info(?)').all(table) as { name: string }[]).map((c) => c.name);
  const want = objects(ref);
  withDb(dataDir, (db) => {
    db.pragma('foreign_keys = OFF');
    const have = objects(db);
    db.transaction(() => {
      for (const o of have.values()) if (o.type === 'index' && !want.has(o.name)) db.exec(`DROP INDEX "${o.name}"`);
      for (const o of have.values()) if (o.type === 'table' && !want.has(o.name)) db.exec(`DROP TABLE "${o.name}"`);
      for (const o of want.values()) {
        if (o.type !== 'table') continue;
        if (!have.has(o.name)) {
          db.exec(o.sql!);
          continue;
        }
        const keep = new Set(columns(ref, o.name));
        const had = new Set(columns(db, o.name));
        for (const c of had) if (!keep.has(c)) db.exec(`ALTER TABLE "${o.name}" DROP COLUMN "${c}"`);
        // A column the newest migration dropped comes back (nullable: the migration drops it again).
        for (const c of ref.prepare('SELECT name, type FROM pragma_table_info(?)').all(o.name) as {
          name: string;
          type: string;
        }[]) {
          if (!had.has(c.name)) db.exec(`ALTER TABLE "${o.name}" ADD COLUMN "${c.name}" ${c.type}`);
        }
      }
      for (const o of want.values()) if (o.type === 'index' && o.sql && !have.has(o.name)) db.exec(o.sql);
      db.prepare(
        'DELETE FROM __drizzle_migrations WHERE created_at = (SELECT MAX(created_at) FROM __drizzle_migrations)',
      ).run();
    })();
  });
  ref.close();
}

/**
 * The store msgctl's tests run on: SQLite unless MSGD_TEST_STORE=postgres (set by
 * config/vitest.pg.config.ts), as startTestServer's (test/helpers/server.ts).
 */
export const cliStoreKind: 'sqlite' | 'postgres' = process.env.MSGD_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';

export interface CliStore {
  /** --data-dir: the data directory on SQLite; on PostgreSQL one msgctl finds no reason to write. */
  dataDir: string;
  /** What msgctl needs besides --data-dir: on PostgreSQL MSGD_DATABASE_URL and MSGD_MASTER_KEY, on SQLite nothing. */
  env: Record<string, string>;
  /** RunOptions reaching this store (--data-dir and env), `extra`'s env added over the store's. */
  opts(extra?: RunOptions): RunOptions;
  /**
   * Runs `fn` with a core context over the store, opened as msgctl opens it and closed after
   * (closed before msgctl runs again, as another process would be).
   */
  withCtx<T>(fn: (ctx: CoreCtx) => Promise<T> | T): Promise<T>;
  /** Removes the data directory, and on PostgreSQL gives the database back. */
  drop(): Promise<void>;
}

/**
 * A store ready for msgctl's ordinary commands: on SQLite a data directory `msgctl init` made
 * (with `init: false`, a path where none exists yet, for a test that runs init itself); on
 * PostgreSQL (cliStoreKind), where init refuses and `msgctl migrate` makes the schema, an empty
 * database at msgd's current schema (test/pg/reuse.ts) and a random master key. `key` (e.g.
 * `{ MSGD_MASTER_KEY_FILE: file }`) is the master key every run is given instead: of the random
 * one, and of the key file init writes into a data directory.
 */
export async function cliStore(options: { init?: boolean; key?: Record<string, string> } = {}): Promise<CliStore> {
  const dataDir = tmpDataDir();
  let env: Record<string, string> = { ...options.key };
  let release = async () => {};
  if (cliStoreKind === 'postgres') {
    // Imported here: test/pg/ reads the run's cluster, which only the PostgreSQL run has.
    const { takeEmptyDatabase } = await import('../pg/reuse.js');
    const db = await takeEmptyDatabase('cli');
    release = db.release;
    env = { MSGD_DATABASE_URL: db.url, ...(options.key ?? { MSGD_MASTER_KEY: randomBytes(32).toString('hex') }) };
  } else if (options.init ?? true) {
    const r = await runCli(['init'], { dataDir, env });
    if (r.code !== 0) throw new Error(`msgctl init exited ${r.code}: ${r.stderr}`);
  }
  const opts = (extra: RunOptions = {}): RunOptions => ({ ...extra, dataDir, env: { ...env, ...extra.env } });
  return {
    dataDir,
    env,
    opts,
    async withCtx(fn) {
      const config = loadConfig({ dataDir, env });
      const opened = await openStore(config, { env, create: false, migrate: false, poolSize: 1 });
      try {
        return await fn(coreCtxOf(opened, config));
      } finally {
        await opened.close();
      }
    },
    async drop() {
      await release();
      rmSync(dirname(dataDir), { recursive: true, force: true });
    },
  };
}

/** Every row of the operator-managed tables (each ordered by its id) on a cliStore, for before/after comparisons. */
export function dumpStore(s: CliStore, tables: readonly string[] = DUMP_TABLES): Promise<Record<string, unknown[]>> {
  return s.withCtx(async (ctx) => {
    const out: Record<string, unknown[]> = {};
    for (const t of tables) out[t] = await ctx.store.all(sql`SELECT * FROM ${sql.raw(t)} ORDER BY id`);
    return out;
  });
}
