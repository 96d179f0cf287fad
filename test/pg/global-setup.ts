import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../src/db/pg/migrate.js';
import { type ClusterInfo, startCluster } from './cluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's PostgreSQL (test/pg/helpers.ts reads it). */
    msgdPg: ClusterInfo;
    /** A database migrated to msgd's schema once per run, for migratedDatabase() to copy. */
    msgdPgSchema: string;
  }
}

// One PostgreSQL cluster for the whole run (`npm run test:pg`): every test file makes its own
// database in it (test/pg/helpers.ts). MSGD_TEST_PG_URL=postgres://… (a superuser's URL) uses a
// running server instead. msgd's migrations are applied once, to a database the files copy
// (migratedDatabase()).
export default async function setup(project: TestProject) {
  const external = process.env.MSGD_TEST_PG_URL;
  const t0 = performance.now();
  const cluster = external ? undefined : await startCluster();
  const info: ClusterInfo = cluster
    ? { kind: cluster.kind, adminUrl: cluster.adminUrl, binaries: cluster.binaries }
    : { kind: 'external', adminUrl: external as string };
  const took = Math.round(performance.now() - t0);
  const client = new pg.Client({ connectionString: info.adminUrl, connectionTimeoutMillis: 10_000 });
  // Named per run: runs sharing a server (MSGD_TEST_PG_URL) each have their own.
  const schema = `msgd_schema_${process.pid}`;
  try {
    await client.connect();
    const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
    const where = cluster ? `${cluster.kind}, ${cluster.binaries.binDir}, started in ${took} ms` : 'MSGD_TEST_PG_URL';
    process.stdout.write(`PostgreSQL ${rows[0].server_version} (${where})\n`);
    await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(schema)}`);
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(schema)}`);
  } catch (err) {
    await cluster?.destroy();
    throw new Error(`the tests' PostgreSQL does not answer: ${(err as Error).message}`);
  } finally {
    await client.end().catch(() => {});
  }
  const schemaUrl = new URL(info.adminUrl);
  schemaUrl.pathname = `/${schema}`;
  try {
    await migrate(schemaUrl.toString());
  } catch (err) {
    await cluster?.destroy();
    throw new Error(`msgd's PostgreSQL migrations failed: ${(err as Error).message}`);
  }
  project.provide('msgdPg', info);
  project.provide('msgdPgSchema', schema);
  return async () => {
    if (cluster) return cluster.destroy();
    const admin = new pg.Client({ connectionString: info.adminUrl });
    await admin.connect();
    try {
      // The servers' databases given back for reuse (test/pg/reuse.ts names them after the
      // template), then the template.
      const { rows } = await admin.query<{ datname: string }>(
        'SELECT datname FROM pg_database WHERE starts_with(datname, $1)',
        [`${schema}_free_`],
      );
      for (const { datname } of rows)
        await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(datname)} WITH (FORCE)`);
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(schema)} WITH (FORCE)`);
    } finally {
      await admin.end().catch(() => {});
    }
  };
}
