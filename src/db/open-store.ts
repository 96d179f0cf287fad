import type { Config } from '../config/schema.js';
import { AppError } from '../lib/errors.js';
import { openDataDir, type DataDir, type OpenDataDirOptions } from './datadir.js';
import { loadMasterKeyWithoutDataDir, type KeySource } from './master-key.js';
import {
  migrate as migrateSqlite,
  migrationStatus as sqliteMigrationStatus,
  type MigrationStatus,
  SchemaTooNewError,
} from './migrate.js';
import type { Db } from './open.js';
import { connectError, unavailableReason } from './pg/errors.js';
import { redactUrl } from '../lib/redact-url.js';
import { migrate as migratePg, migrationStatus as pgMigrationStatus } from './pg/migrate.js';
import { connectPg, type PgLogger, type PgStore } from './pg/store.js';
import { store as sqliteStore, type Store } from './query.js';
import type { Dialect } from './sql.js';

// The one place msgd and msgctl open their store. Without database.url it is the data
// directory's SQLite file, as it has always been; with it, PostgreSQL: connect (one line naming
// the URL, its password masked, when that fails), apply migrations/pg under the migration lock
// (src/db/pg/migrate.ts), refuse a schema written by a newer msgd, and take the master key from
// MSGD_MASTER_KEY or masterKeyFile, since there is no data directory to hold one.
//
// Code that still works on the SQLite connection itself (ctx.db: stmt(), db.transaction(), the
// worker's savepoints) is SQLite-only: on PostgreSQL `db` is a stand-in
// that refuses every use with a SqliteOnlyError naming what was touched.

/** Which store the configuration selects: PostgreSQL when database.url is set. */
export function storeKindOf(config: Config): Dialect {
  return config.database.url ? 'postgres' : 'sqlite';
}

export interface OpenedStore {
  readonly dialect: Dialect;
  /** The store core queries through (src/db/query.ts): SQLite's over `db`, or PostgreSQL's pool. */
  readonly store: Store;
  /** SQLite's connection; on PostgreSQL a stand-in that throws SqliteOnlyError on any use. */
  readonly db: Db;
  /** The data directory (SQLite); null on PostgreSQL. */
  readonly dataDir: DataDir | null;
  /** PostgreSQL's store (the same object as `store`); null on SQLite. */
  readonly pg: PgStore | null;
  readonly masterKey: Buffer;
  /** Where the key came from. */
  readonly keySource: KeySource;
  /** Where the data is, for messages and logs: the data directory, or the URL with its password masked. */
  readonly where: string;
  /** What is applied and pending; changes nothing. */
  migrationStatus(): Promise<MigrationStatus>;
  /** Apply pending migrations (PostgreSQL: under the migration lock); refuses a newer schema. The tags applied. */
  migrate(): Promise<string[]>;
  close(): Promise<void>;
}

export interface OpenStoreOptions {
  env?: NodeJS.ProcessEnv;
  /** SQLite: create the data directory, database and key when missing (msgd, msgctl init). */
  create?: boolean;
  /** Apply pending migrations while opening (default true). */
  migrate?: boolean;
  /** SQLite: msgd checkpoints the WAL itself (src/db/checkpointer.ts). */
  manualCheckpoint?: boolean;
  /** SQLite: called before migrations are applied to a database that has some already (a backup). */
  beforeMigrate?: OpenDataDirOptions['beforeMigrate'];
  /** PostgreSQL: where the pool's warnings go (a connection lost, the LISTEN connection back). */
  logger?: PgLogger;
  /** PostgreSQL: connections in the pool. */
  poolSize?: number;
  /** PostgreSQL: application_name in pg_stat_activity (default msgd). */
  applicationName?: string;
}

/** Code written against the SQLite connection, reached on PostgreSQL: that part of msgd does not run there yet. */
export class SqliteOnlyError extends AppError {
  constructor(what: string) {
    super(
      'not_on_postgresql',
      `this needs msgd's SQLite data directory (${what}) and does not work on PostgreSQL (database.url) yet`,
    );
    this.name = 'SqliteOnlyError';
  }
}

/** A Db that refuses every use: ctx.db on PostgreSQL. */
export function sqliteOnlyDb(): Db {
  const refuse = (what: string): never => {
    throw new SqliteOnlyError(what);
  };
  return new Proxy({} as Db, {
    get(_, prop) {
      // What promise resolution, inspection and printing look for is answered, so a refusal comes from a use.
      if (typeof prop === 'symbol' || prop === 'then' || prop === 'toJSON' || prop === 'constructor') return undefined;
      return refuse(`ctx.db.${prop}`);
    },
    set: (_, prop) => refuse(`setting ctx.db.${String(prop)}`),
    has: (_, prop) => refuse(`'${String(prop)}' in ctx.db`),
    ownKeys: () => refuse('listing ctx.db'),
  });
}

const silentLogger: PgLogger = { warn: () => {} };

export async function openStore(config: Config, opts: OpenStoreOptions = {}): Promise<OpenedStore> {
  const url = config.database.url;
  return url ? openPostgres(config, url, opts) : openSqlite(config, opts);
}

function openSqlite(config: Config, opts: OpenStoreOptions): OpenedStore {
  const dataDir = openDataDir(config.dataDir, {
    create: opts.create ?? false,
    migrate: opts.migrate ?? true,
    env: opts.env,
    masterKeyFile: config.masterKeyFile,
    manualCheckpoint: opts.manualCheckpoint,
    beforeMigrate: opts.beforeMigrate,
  });
  return {
    dialect: 'sqlite',
    store: sqliteStore(dataDir.db),
    db: dataDir.db,
    dataDir,
    pg: null,
    masterKey: dataDir.masterKey,
    keySource: dataDir.keySource,
    where: dataDir.dir,
    migrationStatus: async () => sqliteMigrationStatus(dataDir.db),
    migrate: async () => migrateSqlite(dataDir.db),
    close: async () => dataDir.close(),
  };
}

async function openPostgres(config: Config, url: string, opts: OpenStoreOptions): Promise<OpenedStore> {
  // The key first: a missing one is said without waiting on the network.
  const { key, source } = loadMasterKeyWithoutDataDir(opts.env ?? process.env, config.masterKeyFile);
  const pg = await connectPg(url, {
    logger: opts.logger ?? silentLogger,
    poolSize: opts.poolSize,
    applicationName: opts.applicationName,
    queryTimeoutMs: config.database.queryTimeoutMs,
  });
  // Migrations run on a connection of their own (the URL), not one of the pool's.
  const viaUrl = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof SchemaTooNewError || !unavailableReason(err)) throw err;
      throw connectError(err, url, 5_000);
    }
  };
  const opened: OpenedStore = {
    dialect: 'postgres',
    store: pg,
    db: sqliteOnlyDb(),
    dataDir: null,
    pg,
    masterKey: key,
    keySource: source,
    where: pg.redactedUrl,
    migrationStatus: () => viaUrl(() => pgMigrationStatus(url)),
    migrate: () => viaUrl(() => migratePg(url)),
    close: () => pg.close(),
  };
  try {
    if (opts.migrate ?? true) await opened.migrate();
  } catch (e) {
    await pg.close();
    throw e;
  }
  return opened;
}

/**
 * A data-directory feature (backup, restore, init, the SQLite checks) asked for while
 * database.url selects PostgreSQL: refused with one line saying what does that job there,
 * and that nothing was done, so a script does not take the command's exit for success.
 */
export function refuseOnPostgres(config: Config, what: string, instead: string): void {
  if (!config.database.url) return;
  throw new AppError(
    'not_on_postgresql',
    `${what}; msgd keeps its data in PostgreSQL (database.url ${redactUrl(config.database.url)}): ${instead}`,
  );
}

/** A part of msgd built on the SQLite connection, on PostgreSQL: every use refused with SqliteOnlyError. */
export function sqliteOnlyPart<T extends object>(what: string): T {
  return new Proxy({} as T, {
    get(_, prop) {
      if (typeof prop === 'symbol' || prop === 'then' || prop === 'toJSON' || prop === 'constructor') return undefined;
      throw new SqliteOnlyError(what);
    },
    set() {
      throw new SqliteOnlyError(what);
    },
  });
}
