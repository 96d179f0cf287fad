import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config/load.js';
import { openDataDir } from '../../src/db/datadir.js';
import type { CoreCtx } from '../../src/core/context.js';
import { setupPartner, tmpDir, type PartnerSetup } from '../helpers/server.js';
import { freePort, waitFor, waitForExit } from '../helpers/wait.js';
import type { TwilioFake } from '../fakes/twilio.js';
import { twilioGateway } from './harness.js';

// msgd as the operator runs it: `node bin/msgd` in its own process (the compiled dist/, built
// by test/global-setup.ts), configured by MSGD_* and a config file, over a data dir prepared
// beforehand with the core functions, as msgctl would.

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'msgd');

export interface Prepared {
  dir: string;
  configFile: string;
  port: number;
  partner: PartnerSetup;
}

/** A data dir with one partner whose SMS goes to the Twilio fake, and a config file. */
export async function prepare(fake: TwilioFake, config: Record<string, unknown>, partner: { balance: string; price: string }): Promise<Prepared> {
  const dir = tmpDir('msgd-e2e-');
  const dd = openDataDir(dir, { create: true, env: {} });
  try {
    const ctx: CoreCtx = { db: dd.db, masterKey: dd.masterKey, config: loadConfig({ env: {}, dataDir: dir }), now: Date.now };
    const p = setupPartner(ctx, { balance: partner.balance, prices: { sms: partner.price } });
    twilioGateway(ctx, p.partnerId, fake);
    const configFile = join(dir, 'msgd.json');
    writeFileSync(configFile, JSON.stringify(config));
    return { dir, configFile, port: await freePort(), partner: p };
  } finally {
    dd.close();
  }
}

export interface MsgdChild {
  child: import('node:child_process').ChildProcess;
  url: string;
  output(): string;
}

export async function startMsgd(prep: Prepared): Promise<MsgdChild> {
  const child = spawn(process.execPath, [BIN], {
    env: {
      PATH: process.env.PATH,
      MSGD_DATA_DIR: prep.dir,
      MSGD_PORT: String(prep.port),
      MSGD_DEMO: 'false',
      MSGD_CONFIG: prep.configFile,
      MSGD_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const url = `http://127.0.0.1:${prep.port}`;
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`msgd exited with ${child.exitCode}: ${out}`);
      const res = await fetch(`${url}/healthz`);
      return res.ok;
    },
    15_000,
    'msgd to answer /healthz',
    25,
  );
  return { child, url, output: () => out };
}

/** Stop a child if a test left it running (by its own pid, never by name). */
export async function killIfRunning(c: MsgdChild | undefined) {
  if (!c || c.child.exitCode !== null || c.child.signalCode !== null) return;
  c.child.kill('SIGKILL');
  await waitForExit(c.child, 5_000).catch(() => {});
}

/** A second connection on the data dir, as msgctl opens it. */
export function inspect(prep: Prepared): { ctx: CoreCtx; close(): void } {
  const dd = openDataDir(prep.dir, { env: {}, migrate: false });
  const ctx: CoreCtx = { db: dd.db, masterKey: dd.masterKey, config: loadConfig({ env: {}, dataDir: prep.dir }), now: Date.now };
  return { ctx, close: () => dd.close() };
}
