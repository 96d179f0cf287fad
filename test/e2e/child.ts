import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openDataDir } from '../../src/db/datadir.js';
import { openStore } from '../../src/db/open-store.js';
import type { CoreCtx } from '../../src/core/context.js';
import { gatewayKinds } from '../../src/providers/kinds.js';
import { serverStore, setupPartner, tmpDir, type PartnerSetup } from '../helpers/server.js';
import { freePort, waitFor, waitForExit } from '../helpers/wait.js';
import type { TwilioFake } from '../fakes/twilio.js';
import { twilioGateway } from '../helpers/gateways.js';
import { coreCtx } from '../helpers/ctx.js';

// msgd as the operator runs it: `node bin/msgd` in its own process (the compiled dist/, built
// by test/global-setup.ts), configured by MSGD_* and a config file, over a store prepared
// beforehand with the core functions, as msgctl would: a data directory, or on PostgreSQL
// (serverStore) a database of its own at msgd's current schema, given to msgd through
// MSGD_DATABASE_URL and MSGD_MASTER_KEY, given back emptied when the test's cleanup removes the preparation.

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'msgd');

export interface Prepared {
  /** The data directory (on PostgreSQL a directory for the config file only). */
  dir: string;
  configFile: string;
  port: number;
  partner: PartnerSetup;
  /** On PostgreSQL: MSGD_DATABASE_URL and MSGD_MASTER_KEY, which every msgd child gets. */
  storeEnv: Record<string, string>;
  /** Removes the data directory, and on PostgreSQL gives the database back, emptied. */
  remove(): Promise<void>;
}

/** A store with one partner whose SMS goes to the Twilio fake, and a config file. */
export async function prepare(
  fake: TwilioFake,
  config: Record<string, unknown>,
  partner: { balance: string; price: string },
): Promise<Prepared> {
  const dir = tmpDir('msgd-e2e-');
  let storeEnv: Record<string, string> = {};
  let drop: (() => Promise<void>) | undefined;
  if (serverStore === 'postgres') {
    // Imported here: test/pg/ reads the run's cluster, which only the PostgreSQL run has. An
    // emptied database of an earlier test, when one is free: copying the template costs a
    // second or more on a loaded machine, emptying one a few milliseconds (test/pg/reuse.ts).
    const { takeEmptyDatabase } = await import('../pg/reuse.js');
    const db = await takeEmptyDatabase('e2e');
    drop = db.release;
    storeEnv = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex') };
  }
  const prep: Prepared = {
    dir,
    configFile: join(dir, 'msgd.json'),
    port: 0,
    partner: { partnerId: '', slug: '', token: '' },
    storeEnv,
    async remove() {
      rmSync(dir, { recursive: true, force: true });
      await drop?.();
    },
  };
  try {
    const view = await open(prep, true);
    try {
      // The load is a crash test's, not the rate limiter's: a limit it cannot reach.
      prep.partner = await setupPartner(view.ctx, {
        balance: partner.balance,
        prices: { sms: partner.price },
        rateLimitPerMinute: 1_000_000,
      });
      await twilioGateway(view.ctx, prep.partner.partnerId, fake);
    } finally {
      await view.close();
    }
    writeFileSync(prep.configFile, JSON.stringify(config));
    prep.port = await freePort();
    return prep;
  } catch (e) {
    await prep.remove();
    throw e;
  }
}

export interface MsgdChild {
  child: import('node:child_process').ChildProcess;
  url: string;
  output(): string;
}

export interface SpawnOptions {
  /** Where msgd's stdout goes: a pipe read by the test (the default) or an open file descriptor. */
  stdout?: number;
  /** More MSGD_* variables, or ones replacing the defaults. */
  env?: Record<string, string>;
  /** A command msgd runs under, e.g. `['prlimit', '--fsize=1000000', '--']`. */
  wrap?: string[];
}

export async function startMsgd(prep: Prepared, opts: SpawnOptions = {}): Promise<MsgdChild> {
  // dist/ is shared: another test run's global setup may be rewriting it this very moment,
  // which shows as a module link error. And the port was free when prepare() asked, but a
  // test running beside this one may have bound it since: take another. Try again a few
  // times; a broken build or a msgd that cannot start still fails.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(prep, opts);
    } catch (e) {
      const message = String((e as Error).message);
      if (attempt < 3 && !opts.env?.MSGD_PORT && message.includes(`port ${prep.port} on 127.0.0.1 is already in use`)) {
        prep.port = await freePort();
        continue;
      }
      if (attempt >= 3 || !/SyntaxError|ERR_MODULE_NOT_FOUND/.test(message)) throw e;
      await new Promise((r) => setTimeout(r, 2_000));
    }
  }
}

async function startOnce(prep: Prepared, opts: SpawnOptions): Promise<MsgdChild> {
  const [cmd, ...args] = [...(opts.wrap ?? []), process.execPath, BIN];
  const child = spawn(cmd, args, {
    env: {
      PATH: process.env.PATH,
      MSGD_DATA_DIR: prep.dir,
      MSGD_PORT: String(prep.port),
      MSGD_DEMO: 'false',
      MSGD_CONFIG: prep.configFile,
      MSGD_LOG_LEVEL: 'warn',
      ...prep.storeEnv,
      ...opts.env,
    },
    stdio: ['ignore', opts.stdout ?? 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const url = `http://127.0.0.1:${prep.port}`;
  const exited = waitForExit(child, 60_000).then(
    ({ code }) => Promise.reject(new Error(`msgd exited with ${code} before it answered: ${out}`)),
    () => new Promise<never>(() => {}),
  );
  const ready = waitFor(async () => (await fetch(`${url}/healthz`)).ok, 'msgd to answer /healthz', 30_000, 25);
  try {
    await Promise.race([ready, exited]);
  } catch (e) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw e;
  }
  exited.catch(() => {});
  return { child, url, output: () => out };
}

/** Stop a child if a test left it running (by its own pid, never by name). */
export async function killIfRunning(c: MsgdChild | undefined) {
  if (!c || c.child.exitCode !== null || c.child.signalCode !== null) return;
  c.child.kill('SIGKILL');
  await waitForExit(c.child, 5_000).catch(() => {});
}

export interface View {
  ctx: CoreCtx;
  close(): Promise<void>;
}

/** A second connection on the store, as msgctl opens it: read rows with `ctx.store`. */
export function inspect(prep: Prepared): Promise<View> {
  return open(prep, false);
}

async function open(prep: Prepared, create: boolean): Promise<View> {
  if (!prep.storeEnv.MSGD_DATABASE_URL) {
    const dd = openDataDir(prep.dir, create ? { create: true, env: {} } : { env: {}, migrate: false });
    const ctx = coreCtx(dd, { dataDir: prep.dir });
    return { ctx, close: async () => dd.close() };
  }
  const env = prep.storeEnv;
  const config = loadConfig({ env });
  const opened = await openStore(config, { env, migrate: false });
  const ctx: CoreCtx = {
    db: opened.db,
    store: opened.store,
    masterKey: opened.masterKey,
    config,
    now: Date.now,
    gatewayKinds,
  };
  return { ctx, close: () => opened.close() };
}

/**
 * What a test registers is torn down after it, newest first: msgd children killed, data
 * directories removed, fakes closed. Each registering call returns its argument.
 */
export function cleanupAfterEach() {
  const undo: (() => unknown)[] = [];
  afterEach(async () => {
    for (const f of undo.splice(0).reverse()) await f();
  });
  return {
    fake<T extends { close(): Promise<void> }>(f: T): T {
      undo.push(() => f.close());
      return f;
    },
    prep(p: Prepared): Prepared {
      undo.push(() => p.remove());
      return p;
    },
    child(c: MsgdChild): MsgdChild {
      undo.push(() => killIfRunning(c));
      return c;
    },
  };
}
