import { userInfo } from 'node:os';
import type { Command } from 'commander';
import { loadConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import { type OpenedStore, openStore } from '../db/open-store.js';
import { store, type Store } from '../db/query.js';
import { AppError } from '../lib/errors.js';
import { gatewayKinds } from '../providers/kinds.js';
import { ioOf, processIO, setExitCode, type CliIO } from './io.js';
import { emit, type Result } from './output.js';

export interface Globals {
  dataDir?: string;
  config?: string;
  masterKeyFile?: string;
  databaseUrl?: string;
  json?: boolean;
  /** The streams and environment of this run (the process's when absent). */
  io?: CliIO;
}

export interface Cli {
  globals: Globals;
  config: Config;
  /** The open store: the data directory's SQLite file, or PostgreSQL (database.url). */
  opened: OpenedStore;
  ctx: CoreCtx;
  actor: string;
  io: CliIO;
  close(): Promise<void>;
}

/** Who the audit log names for this invocation: cli:<os user>, or tui:<os user> from the console. */
export function actor(env: NodeJS.ProcessEnv = process.env, surface: 'cli' | 'tui' = 'cli'): string {
  let name: string | undefined;
  try {
    name = userInfo().username;
  } catch {
    // No passwd entry (some containers): fall back to the environment.
  }
  return `${surface}:${name || env.USER || env.LOGNAME || 'unknown'}`;
}

export function globalsOf(cmd: Command): Globals {
  return { ...(cmd.optsWithGlobals() as Globals), io: ioOf(cmd) };
}

/**
 * --config beats MSGD_CONFIG, --data-dir beats MSGD_DATA_DIR, --master-key-file beats
 * MSGD_MASTER_KEY_FILE, --database-url beats MSGD_DATABASE_URL (loadConfig applies these rules).
 */
export function configFor(globals: Globals): Config {
  return loadConfig({
    configPath: globals.config,
    dataDir: globals.dataDir,
    masterKeyFile: globals.masterKeyFile,
    databaseUrl: globals.databaseUrl,
    env: globals.io?.env,
  });
}

export interface CliOpenOptions {
  /** false: no schema check at all. */
  check?: boolean;
  /** Pending migrations are no reason to refuse (a newer schema still is). */
  olderSchema?: boolean;
}

/**
 * The context msgctl gives core over an open store (or a SQLite data directory, whose store is
 * the one over its connection): the gateway kinds are msgd's own.
 */
export function coreCtxOf(opened: Pick<OpenedStore, 'db' | 'masterKey'> & { store?: Store }, config: Config): CoreCtx {
  const s = opened.store ?? store(opened.db);
  return { db: opened.db, store: s, masterKey: opened.masterKey, config, now: Date.now, gatewayKinds };
}

/**
 * Open the store for an ordinary command. It never migrates: a schema change is the operator's
 * decision (msgctl migrate) or msgd's at start, not a side effect of `partner list`. A database
 * with pending migrations or a newer schema is refused; `olderSchema` lets a command whose
 * writes every schema takes work on an older one.
 */
export async function openCli(globals: Globals, opts: CliOpenOptions = {}): Promise<Cli> {
  const io = globals.io ?? processIO();
  const config = configFor(globals);
  const opened = await openStore(config, { env: io.env, create: false, migrate: false, poolSize: 4 });
  try {
    if (opts.check ?? true) {
      const status = await opened.migrationStatus();
      // migrate() refuses a too-new database before touching it; it throws the error we want.
      if (status.tooNew) await opened.migrate();
      if (status.pending.length && !opts.olderSchema) {
        throw new AppError(
          'pending_migrations',
          `the database has ${status.pending.length} pending migration(s) (${status.pending.join(', ')}); run "msgctl migrate"`,
        );
      }
    }
  } catch (e) {
    await opened.close();
    throw e;
  }
  return {
    globals,
    config,
    opened,
    ctx: coreCtxOf(opened, config),
    actor: actor(io.env),
    io,
    close: () => opened.close(),
  };
}

/**
 * The action of a command that works on an existing data directory: opens it, runs the
 * handler with the positional arguments and options commander parsed, prints, closes.
 */
export function withCli<A extends unknown[]>(
  handler: (cli: Cli, ...args: A) => Result | Promise<Result>,
  opts: CliOpenOptions = {},
) {
  return async (...raw: unknown[]) => {
    const cmd = raw[raw.length - 1] as Command;
    const globals = globalsOf(cmd);
    const cli = await openCli(globals, opts);
    try {
      const result = await handler(cli, ...(raw.slice(0, -1) as A));
      setExitCode(cmd, emit(result, !!globals.json, cli.io));
    } catch (e) {
      throw inFlags(e, cmd);
    } finally {
      await cli.close();
    }
  };
}

/**
 * Core names the field an error is about (`note`, `from`); msgctl names the flag that gives
 * it, where the command has one (`--note`, `--from`).
 */
function inFlags(e: unknown, cmd: Command): unknown {
  if (!(e instanceof AppError) || !e.details.some((d) => d.field)) return e;
  const flags = new Set(cmd.options.map((o) => o.long));
  const flagOf = (field: string) => `--${field.replace(/_/g, '-')}`;
  const details = e.details.map((d) => (d.field && flags.has(flagOf(d.field)) ? { ...d, field: flagOf(d.field) } : d));
  const mapped = new AppError(e.code, e.message, details, e.data);
  mapped.stack = e.stack;
  return mapped;
}

/** The action of a command that opens the data directory itself (init, migrate, doctor). */
export function withGlobals<A extends unknown[]>(handler: (globals: Globals, ...args: A) => Result | Promise<Result>) {
  return async (...raw: unknown[]) => {
    const cmd = raw[raw.length - 1] as Command;
    const globals = globalsOf(cmd);
    const result = await handler(globals, ...(raw.slice(0, -1) as A));
    setExitCode(cmd, emit(result, !!globals.json, globals.io));
  };
}
