import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import type { CoreCtx } from '../../src/core/context.js';
import { openDataDir, type DataDir } from '../../src/db/datadir.js';

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
  const ctx: CoreCtx = {
    db: dd.db,
    masterKey: dd.masterKey,
    config: loadConfig({ env: {}, dataDir: dir }),
    now: opts.clock ? () => clock.now : Date.now,
  };
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
