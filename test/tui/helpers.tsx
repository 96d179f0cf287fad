import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { render } from 'ink-testing-library';
import { expect } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { openCli, type Cli } from '../../src/cli/context.js';
import { processIO } from '../../src/cli/io.js';
import { tuiDeps } from '../../src/cli/tui.js';
import type { CoreCtx } from '../../src/core/context.js';
import { type HeartbeatRow, writeHeartbeat } from '../../src/core/counter-store.js';
import { clockMs } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import { openDataDir } from '../../src/db/datadir.js';
import { App } from '../../src/tui/app.js';
import type { ScreenId } from '../../src/tui/keymap.js';
import { serverStore } from '../helpers/server.js';
import { sleep, waitFor } from '../helpers/wait.js';

// The console drawn at 80×24 by ink-testing-library over a real data directory, opened the way
// msgctl tui opens it (openCli, the same deps), and driven by keystrokes. On the PostgreSQL run
// (serverStore) the console's store is a database of its own at msgd's schema with a random
// master key, given as msgctl takes them (--database-url, MSGD_MASTER_KEY).

export const KEY = {
  enter: '\r',
  esc: '\x1b',
  tab: '\t',
  up: '\x1b[A',
  down: '\x1b[B',
  right: '\x1b[C',
  left: '\x1b[D',
  backspace: '\x7f',
};

/** A frame's text without box borders and line breaks, for sentences a box wraps. */
export function flat(frame: string): string {
  return frame
    .replace(/[│║╭╮╰╯╔╗╚╝─═]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

export interface Console {
  cli: Cli;
  frame(): string;
  /** Every byte the console has written so far, escape sequences and all. */
  written(): string;
  /** Keystrokes, one write each (a string of letters is typed as one burst, as a paste would be). */
  press(...keys: string[]): Promise<void>;
  /** Wait until the frame contains `text` (or matches it), and return the frame. */
  see(text: string | RegExp, timeoutMs?: number): Promise<string>;
  unmount(): void;
  close(): void;
}

const dirs: string[] = [];

/** The PostgreSQL database behind a data directory newDataDir() made on the PostgreSQL run. */
const databases = new Map<string, { url: string; masterKey: string; drop: () => Promise<void> }>();

/** A new, migrated store for a console: a data directory, or on PostgreSQL a database too. */
export async function newDataDir(): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'msgd-tui-'));
  dirs.push(root);
  const dir = join(root, 'data');
  if (serverStore === 'postgres') {
    // Imported here: test/pg/helpers.ts reads the run's cluster, which only the PostgreSQL run has.
    const { createDatabase, migratedTemplate } = await import('../pg/helpers.js');
    const db = await createDatabase('tui', { template: migratedTemplate() });
    databases.set(dir, { url: db.url, masterKey: randomBytes(32).toString('hex'), drop: db.drop });
    mkdirSync(dir);
    return dir;
  }
  openDataDir(dir, { create: true }).close();
  return dir;
}

export async function cleanupDirs() {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  for (const [dir, db] of databases) {
    databases.delete(dir);
    await db.drop();
  }
}

/** runCli's options for msgctl on the store behind `dataDir` (on PostgreSQL its URL and key in the environment). */
export function cliOptions(dataDir: string): { dataDir: string; env?: Record<string, string> } {
  const db = databases.get(dataDir);
  return db ? { dataDir, env: { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: db.masterKey } } : { dataDir };
}

/** What msgctl is given to open the store behind `dataDir`: --data-dir, and on PostgreSQL --database-url and the key. */
export function storeGlobals(dataDir: string) {
  const db = databases.get(dataDir);
  if (!db) return { dataDir };
  return {
    dataDir,
    databaseUrl: db.url,
    io: { ...processIO(), env: { ...process.env, MSGD_MASTER_KEY: db.masterKey } },
  };
}

/**
 * An instance's heartbeat, its beat and start given on the console's clock (ctx.now()), written
 * as msgd writes them: on the store's clock (the database server's on PostgreSQL, which the
 * console reads back shifted to its own).
 */
export async function writeBeat(ctx: CoreCtx, hb: HeartbeatRow): Promise<void> {
  await writeHeartbeat(ctx, hb);
  const now = ctx.now();
  const clock = clockMs(ctx.store.dialect, now);
  await ctx.store.run(
    sql`UPDATE heartbeat SET beat_at = ${clock} + ${hb.beatAt - now}, started_at = ${clock} + ${hb.startedAt - now}
        WHERE id = ${hb.id}`,
  );
}

/** The clock of captured screens: 2026-11-26 10:00:00 UTC. */
export const FIXED_NOW = Date.UTC(2026, 10, 26, 10, 0, 0);

export async function openConsole(
  dataDir: string,
  screen?: ScreenId,
  opts: { now?: () => number; showDir?: string; size?: { columns: number; rows: number } } = {},
): Promise<Console> {
  const cli = await openCli(storeGlobals(dataDir));
  if (opts.now) cli.ctx.now = opts.now;
  const deps = { ...tuiDeps(cli), ...(opts.showDir ? { dataDir: opts.showDir } : {}) };
  const r = render(<App deps={deps} size={opts.size ?? { columns: 80, rows: 24 }} initialScreen={screen} />);
  const frame = () => r.lastFrame() ?? '';
  return {
    cli,
    frame,
    written: () => r.frames.join(''),
    async press(...keys) {
      for (const k of keys) {
        r.stdin.write(k);
        // Ink reads input on its own tick and React renders after: let both happen (a new
        // screen subscribes to keys in an effect that runs after its first frame).
        await sleep(k === KEY.esc || /^[1-6\t]$/.test(k) ? 120 : 40);
      }
    },
    async see(text, timeoutMs = 4000) {
      const f = await waitFor(
        () => {
          const f = frame();
          return (typeof text === 'string' ? f.includes(text) : text.test(f)) ? f : '';
        },
        `the console to show ${String(text)}`,
        timeoutMs,
      ).catch((e: Error) => {
        throw new Error(`${e.message}; last frame:\n${frame()}`);
      });
      // The frame is drawn before the effects that subscribe its keys have run.
      await sleep(30);
      return f;
    },
    unmount: () => r.unmount(),
    close() {
      r.unmount();
      // SQLite's close is done when the call returns.
      void cli.close();
    },
  };
}

const DOC = join(ROOT, 'docs', 'tui.md');

/** Ids and the data directory as a reader of the docs sees them. */
function normalize(frame: string): string {
  return frame
    .replace(
      /\b(prt|gw|tok|pwh|msg|ch|evt)_([0-9a-z]{4,26})/g,
      (_m, p: string, id: string) => `${p}_${'01jd2k8x4v9q6r3m5t7w0y1z2a'.slice(0, id.length)}`,
    )
    .replace(/msgd_live_[A-Za-z0-9_-]{6}/g, 'msgd_live_a1B2c3')
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
    .trimEnd();
}

/**
 * The frame must equal the capture of that name in docs/tui.md, so the docs show the screens
 * as they are. UPDATE_CAPTURES=1 rewrites the capture instead.
 */
export function capture(name: string, frame: string) {
  const doc = readFileSync(DOC, 'utf8');
  const marker = `<!-- capture: ${name} -->`;
  const at = doc.indexOf(marker);
  const text = normalize(frame);
  const block = (t: string) => `${marker}\n\`\`\`text\n${t}\n\`\`\``;
  if (process.env.UPDATE_CAPTURES === '1') {
    if (at < 0) throw new Error(`docs/tui.md has no ${marker}`);
    const end = doc.indexOf('```', doc.indexOf('```text', at) + 7) + 3;
    writeFileSync(DOC, doc.slice(0, at) + block(text) + doc.slice(end));
    return;
  }
  expect(at, `docs/tui.md has the capture ${name}`).toBeGreaterThanOrEqual(0);
  const start = doc.indexOf('```text\n', at) + 8;
  const stored = doc.slice(start, doc.indexOf('\n```', start));
  expect(text).toBe(stored);
}
