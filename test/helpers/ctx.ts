import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import type { CoreCtx } from '../../src/core/context.js';
import { openDataDir, type DataDir } from '../../src/db/datadir.js';
import { store } from '../../src/db/query.js';
import { gatewayKinds } from '../../src/providers/kinds.js';

/**
 * The context core gets from msgd and msgctl, over an open data directory: msgd's own gateway
 * kinds (src/providers/kinds.ts), the defaults' config unless one is given, the wall clock
 * unless a test brings its own. Every test that calls core builds its context here.
 */
export function coreCtx(
  dd: Pick<DataDir, 'db' | 'masterKey'>,
  opts: { config?: Config; dataDir?: string; now?: () => number } = {},
): CoreCtx {
  return {
    db: dd.db,
    store: store(dd.db),
    masterKey: dd.masterKey,
    config: opts.config ?? loadConfig({ env: {}, dataDir: opts.dataDir }),
    now: opts.now ?? Date.now,
    gatewayKinds,
  };
}

export interface TestCtx {
  ctx: CoreCtx;
  dd: DataDir;
  dir: string;
  /** Moves ctx.now(). */
  clock: { now: number };
  close(): void;
}

/** A real data directory in a temp dir, opened in-process, with a clock the test controls. */
export function openTestCtx(opts: { env?: NodeJS.ProcessEnv; clock?: boolean } = {}): TestCtx {
  const root = mkdtempSync(join(tmpdir(), 'msgd-core-'));
  const dir = join(root, 'data');
  const dd = openDataDir(dir, { create: true, env: opts.env ?? {} });
  const clock = { now: Date.now() };
  const ctx = coreCtx(dd, { dataDir: dir, now: opts.clock ? () => clock.now : undefined });
  return {
    ctx,
    dd,
    dir,
    clock,
    close() {
      dd.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
