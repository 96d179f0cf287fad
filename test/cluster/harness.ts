import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import type { CoreCtx } from '../../src/core/context.js';
import { type OpenedStore, openStore } from '../../src/db/open-store.js';
import { gatewayKinds } from '../../src/providers/kinds.js';
import { type CliResult, ROOT, runCli } from '../helpers/cli.js';
import { freePort, waitFor, waitForExit } from '../helpers/wait.js';
import { type RoundRobinProxy, startProxy } from './proxy.js';

// Several msgd on one PostgreSQL, as an operator runs them behind a load balancer: each instance
// is `node bin/msgd` (the compiled dist/) in a process of its own, with the same database URL,
// master key and config file, on a port of its own; a round-robin proxy (./proxy.ts) in front.
// The test reaches the cluster through `url` (the proxy) or one instance through
// `instances[i].url`, prepares and checks data through `ctx` (core over the same database), and
// runs msgctl against it with `msgctl()`. `kill(i)` is kill -9 (the proxy stops sending there
// once the process is gone), `restart(i)` starts that instance again on its port.

const BIN = join(ROOT, 'bin', 'msgd');

export interface MsgdInstance {
  readonly index: number;
  /** Chosen free at the start (another, should something take it before msgd binds it). */
  port: number;
  /** http://127.0.0.1:<port>: this instance alone. */
  url: string;
  /** Whether the proxy sends requests here. */
  up: boolean;
  child: ChildProcess | null;
  /** Everything the current process wrote (stdout and stderr). */
  output(): string;
}

export interface ClusterOptions {
  /** The database (migrated, or empty: the instances migrate it at start under the migration lock). */
  databaseUrl: string;
  /** How many msgd (default 3). */
  instances?: number;
  /** msgd's config file, merged over the harness's (per top-level section). */
  config?: Record<string, Record<string, unknown>>;
  /** More MSGD_* variables for every instance. */
  env?: Record<string, string>;
}

export interface MsgdCluster {
  /** The proxy: round robin over the instances that are up. */
  readonly url: string;
  readonly proxy: RoundRobinProxy;
  readonly instances: MsgdInstance[];
  /** What every instance (and msgctl) is given: the database URL, the master key, the config file. */
  readonly env: Record<string, string>;
  /** Core over the same database, for setting up and checking data. */
  readonly ctx: CoreCtx;
  /** msgctl with the cluster's environment (in this process). */
  msgctl(args: string[], stdin?: string): Promise<CliResult>;
  /** kill -9 of instance i; resolves once it has exited. */
  kill(i: number): Promise<void>;
  /** Starts instance i again (after kill) on its port; resolves once it answers /readyz 200. */
  restart(i: number): Promise<void>;
  /** Stops every instance (SIGKILL: nothing of theirs is checked after) and the proxy. */
  close(): Promise<void>;
}

export async function startMsgdCluster(opts: ClusterOptions): Promise<MsgdCluster> {
  const scratch = mkdtempSync(join(tmpdir(), 'msgd-cluster-'));
  const configFile = join(scratch, 'msgd.json');
  const base: Record<string, Record<string, unknown>> = {
    // Longer than any test: the proxy's kept-alive sockets are never closed under it.
    server: { keepAliveTimeoutMs: 600_000 },
    log: { level: 'warn' },
  };
  const config: Record<string, Record<string, unknown>> = { ...base };
  for (const [section, values] of Object.entries(opts.config ?? {}))
    config[section] = { ...(config[section] ?? {}), ...values };
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  const env: Record<string, string> = {
    MSGD_DATABASE_URL: opts.databaseUrl,
    MSGD_MASTER_KEY: randomBytes(32).toString('hex'),
    MSGD_CONFIG: configFile,
    ...opts.env,
  };

  const count = opts.instances ?? 3;
  const instances: MsgdInstance[] = [];
  const outputs: string[] = [];
  for (let i = 0; i < count; i++) {
    const port = await freePort();
    outputs.push('');
    instances.push({
      index: i,
      port,
      url: `http://127.0.0.1:${port}`,
      up: false,
      child: null,
      output: () => outputs[i],
    });
  }

  // The port was free when chosen; a test running beside this one may bind it before msgd does.
  const launch = async (inst: MsgdInstance, first: boolean) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await launchOnce(inst);
      } catch (e) {
        if (!first || attempt >= 3 || !String((e as Error).message).includes('already in use')) throw e;
        inst.port = await freePort();
        inst.url = `http://127.0.0.1:${inst.port}`;
      }
    }
  };

  const launchOnce = async (inst: MsgdInstance) => {
    outputs[inst.index] = '';
    const append = (d: Buffer) => {
      outputs[inst.index] += String(d);
    };
    const child = spawn(process.execPath, [BIN], {
      env: {
        PATH: process.env.PATH,
        // On PostgreSQL msgd has no data directory: one that must stay untouched.
        MSGD_DATA_DIR: join(scratch, `data-${inst.index}`),
        MSGD_PORT: String(inst.port),
        MSGD_HOST: '127.0.0.1',
        MSGD_DEMO: 'false',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    inst.child = child;
    child.stdout!.on('data', append);
    child.stderr!.on('data', append);
    const exited = waitForExit(child, 120_000).then(
      ({ code, signal }) =>
        Promise.reject(
          new Error(`msgd ${inst.index} exited (${signal ?? code}) before it was ready: ${inst.output()}`),
        ),
      () => new Promise<never>(() => {}),
    );
    exited.catch(() => {});
    await Promise.race([
      waitFor(
        async () => (await fetch(`${inst.url}/readyz`)).status === 200,
        `msgd ${inst.index} to answer /readyz 200`,
        60_000,
        50,
      ),
      exited,
    ]);
    inst.up = true;
  };

  const opened: { store?: OpenedStore; proxy?: RoundRobinProxy } = {};
  const stopAll = async () => {
    await Promise.all(
      instances.map(async (inst) => {
        inst.up = false;
        const c = inst.child;
        if (c && c.exitCode === null && c.signalCode === null) {
          c.kill('SIGKILL');
          await waitForExit(c, 10_000).catch(() => {});
        }
      }),
    );
    await opened.proxy?.close();
    await opened.store?.close();
    rmSync(scratch, { recursive: true, force: true });
  };

  try {
    const cfg = loadConfig({ env });
    opened.store = await openStore(cfg, { env, migrate: false });
    // All at once: most of a start is waiting (PostgreSQL, the first /readyz), and on an empty
    // database one migrates under the migration lock while the others wait on it.
    const started = await Promise.allSettled(instances.map((inst) => launch(inst, true)));
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    opened.proxy = await startProxy(instances);
  } catch (e) {
    await stopAll();
    throw e;
  }
  const store = opened.store;
  const proxy = opened.proxy;

  return {
    url: proxy.url,
    proxy,
    instances,
    env,
    ctx: {
      db: store.db,
      store: store.store,
      masterKey: store.masterKey,
      config: loadConfig({ env }),
      now: Date.now,
      gatewayKinds,
    },
    msgctl: (args, stdin) => runCli(args, { env, stdin }),
    async kill(i) {
      const inst = instances[i];
      const c = inst.child;
      if (!c || c.exitCode !== null || c.signalCode !== null) throw new Error(`msgd ${i} is not running`);
      c.kill('SIGKILL');
      await waitForExit(c, 10_000);
      inst.up = false;
    },
    async restart(i) {
      const inst = instances[i];
      const c = inst.child;
      if (c && c.exitCode === null && c.signalCode === null) throw new Error(`msgd ${i} is still running`);
      await launch(inst, false);
    },
    close: stopAll,
  };
}
