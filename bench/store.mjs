// Where one bench scenario keeps msgd's data, on either store: a fresh SQLite data directory,
// or (BENCH_STORE=postgres) a fresh database on the bench's PostgreSQL (bench/pg.mjs) with a
// master key of its own, since there is no data directory to hold one. A scenario opens it
// through core (setup), starts msgd on it (msgdEnv/msgdArgs), and counts rows while msgd runs.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { cpuMs, tmp } from './lib.mjs';

const dist = (p) => import(new URL(`../dist/${p}`, import.meta.url));

/**
 * A fresh scenario store. `pg` is bench/pg.mjs's server (null on SQLite); `label` names the
 * PostgreSQL database. Returns { kind, dir, url, msgdEnv, open(), count(sql), close() }.
 */
export async function scenarioStore(pg, label) {
  // SQLite: the data directory. PostgreSQL: a directory msgd is pointed at but does not use
  // (its data-directory features say they do nothing there), removed at close().
  const dir = tmp();
  if (!pg) {
    let reader = null;
    return {
      kind: 'sqlite',
      dir,
      url: null,
      /** Settings msgd (bin/msgd or bench/msgd-accept-only.mjs) needs besides its data directory. */
      msgdEnv: {},
      open: () => openCtx({ dataDir: dir }),
      countCpuMs: () => 0,
      async count(sql) {
        if (!reader) {
          const { default: Database } = await import('better-sqlite3');
          // Pinned (src/db/pin.ts): a statement left to the collector aborts Node >= 24.19.
          const { pinConnection } = await dist('db/pin.js');
          reader = pinConnection(new Database(join(dir, 'msgd.db'), { readonly: true }));
        }
        return Number(Object.values(reader.prepare(sql).get())[0]);
      },
      async close({ keep = false } = {}) {
        reader?.close();
        reader = null;
        if (!keep) {
          rmSync(dir, { recursive: true, force: true });
          rmSync(`${dir}.json`, { force: true });
        }
      },
    };
  }
  const url = await pg.freshDatabase(label);
  const masterKey = randomBytes(32).toString('hex');
  let client = null;
  let backend = 0;
  return {
    kind: 'postgres',
    dir,
    url,
    msgdEnv: { MSGD_DATABASE_URL: url, MSGD_MASTER_KEY: masterKey },
    open: () => openCtx({ dataDir: dir, url, masterKey }),
    async count(sql) {
      if (!client) {
        const { default: pgLib } = await import('pg');
        client = new pgLib.Client({ connectionString: url, application_name: 'msgd-bench' });
        client.on('error', () => {});
        await client.connect();
        backend = Number((await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
      }
      const { rows } = await client.query(sql);
      return Number(Object.values(rows[0])[0]);
    },
    /** CPU time (ms) of the server process serving count(): the bench's own share of the cluster's. */
    countCpuMs: () => (backend ? cpuMs(backend) || 0 : 0),
    async close() {
      await client?.end().catch(() => {});
      client = null;
      rmSync(dir, { recursive: true, force: true });
      // The config file the send bench writes beside it (writeConfig).
      rmSync(`${dir}.json`, { force: true });
    },
  };
}

/**
 * The core context over a scenario's store, as msgd builds it (src/runtime.ts), opened (and
 * migrated) through src/db/open-store.ts: { ctx, opened, close() }.
 */
export async function openCtx({ dataDir, url = null, masterKey = null, overrides = {} }) {
  const { loadConfig } = await dist('config/load.js');
  const { openStore } = await dist('db/open-store.js');
  const { gatewayKinds } = await dist('providers/kinds.js');
  const env = masterKey ? { MSGD_MASTER_KEY: masterKey } : {};
  const config = loadConfig({ env: {}, dataDir, databaseUrl: url ?? undefined, overrides });
  const opened = await openStore(config, { create: true, env, applicationName: 'msgd-bench-setup' });
  const ctx = {
    db: opened.db,
    store: opened.store,
    masterKey: opened.masterKey,
    config,
    now: Date.now,
    gatewayKinds,
  };
  return { ctx, opened, close: () => opened.close() };
}

/**
 * Rows straight into a PostgreSQL table, many to a statement (multi-row VALUES, at most
 * 60,000 parameters each), as the seeds of the read benchmarks write SQLite with prepared
 * INSERTs: `insert(table, columns, rows)` then `close()`.
 */
export async function pgRows(url) {
  const { default: pgLib } = await import('pg');
  const client = new pgLib.Client({ connectionString: url, application_name: 'msgd-bench-seed' });
  client.on('error', () => {});
  await client.connect();
  // A seed is redone from scratch when it fails: it needs no durability.
  await client.query('SET synchronous_commit = off');
  return {
    client,
    async insert(table, columns, rows) {
      const per = Math.max(1, Math.floor(60_000 / columns.length));
      const cols = columns.map((c) => `"${c}"`).join(', ');
      for (let from = 0; from < rows.length; from += per) {
        const chunk = rows.slice(from, from + per);
        const params = [];
        const tuples = chunk.map((row) => {
          const marks = row.map((v) => {
            params.push(v);
            return `$${params.length}`;
          });
          return `(${marks.join(', ')})`;
        });
        await client.query(`INSERT INTO ${table} (${cols}) VALUES ${tuples.join(', ')}`, params);
      }
    },
    close: () => client.end().catch(() => {}),
  };
}
