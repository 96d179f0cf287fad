import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Database } from 'better-sqlite3';

const require = createRequire(import.meta.url);

// WAL checkpoints off the event loop: a worker thread with its own connection copies the bulk,
// and the writing connection copies the last small tail between two of its transactions, so
// its next write starts the WAL over instead of growing it (docs/architecture.md, Storage).

/** A pass that found at most this many new frames left the writer only a small tail. */
const SMALL_TAIL_FRAMES = 256;
/** Passes per round before the thread gives up chasing the writer until the next round. */
const MAX_PASSES = 4;

const SCRIPT = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
// No statement here may become garbage (src/db/pin.ts): setters go through exec(), which makes
// no statement object, and each checkpoint mode's statement is prepared once and kept.
db.exec('PRAGMA busy_timeout = 5000');
// It only copies WAL frames into the database file: no page cache, no mapping needed.
db.exec('PRAGMA cache_size = 16');
db.exec('PRAGMA mmap_size = 0');
const checkpoints = {};
let busy = false;
function checkpoint(mode) {
  return (checkpoints[mode] ??= db.prepare('PRAGMA wal_checkpoint(' + mode + ')')).get();
}
function run(mode) {
  if (busy) return;
  busy = true;
  try {
    let r = checkpoint(mode);
    // What this pass found that the previous one had not seen (the WAL may have restarted).
    let fresh = r.checkpointed;
    for (let pass = 1; mode === 'PASSIVE' && r.busy === 0 && fresh > workerData.smallTail && pass < workerData.maxPasses; pass++) {
      const before = r.log;
      r = checkpoint('PASSIVE');
      fresh = r.log >= before ? r.log - before : r.log;
    }
    parentPort.postMessage({ type: 'checkpoint', mode, busy: r.busy, log: r.log, checkpointed: r.checkpointed, fresh });
  } catch (e) {
    parentPort.postMessage({ type: 'error', message: String(e && e.message || e) });
  } finally { busy = false; }
}
const timer = setInterval(() => run('PASSIVE'), workerData.intervalMs);
parentPort.on('message', (m) => {
  if (m === 'truncate') run('TRUNCATE');
  if (m === 'stop') { clearInterval(timer); run('PASSIVE'); db.close(); parentPort.close(); }
});
`;

export interface Checkpointer {
  truncate(): void;
  stop(): Promise<void>;
  /** Rounds after which the writing connection copied the tail itself (the WAL then starts over). */
  readonly finished: number;
  /** The last round's result: when, frames in the WAL, frames copied (for /metrics). */
  readonly last: { at: number; log: number; checkpointed: number } | null;
}

export interface CheckpointerOptions {
  /** Time between checkpoint rounds (default 1 s). */
  intervalMs?: number;
  onError?: (msg: string) => void;
  /**
   * The connection that writes (the server's): it copies the tail a round left, so that its
   * next write transaction starts the WAL over instead of growing the file.
   */
  writer?: Database;
}

export function startCheckpointer(path: string, opts: CheckpointerOptions = {}): Checkpointer {
  const driver = require.resolve('better-sqlite3');
  const w = new Worker(SCRIPT, {
    eval: true,
    workerData: {
      path,
      driver,
      intervalMs: opts.intervalMs ?? 1000,
      smallTail: SMALL_TAIL_FRAMES,
      maxPasses: MAX_PASSES,
    },
    // A small isolate: the loop allocates next to nothing.
    resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 },
  });
  let finished = 0;
  let last: Checkpointer['last'] = null;
  w.on('message', (m) => {
    if (m?.type === 'error') opts.onError?.(m.message);
    if (m?.type === 'checkpoint') last = { at: Date.now(), log: m.log, checkpointed: m.checkpointed };
    if (m?.type === 'checkpoint' && m.mode === 'PASSIVE' && opts.writer) {
      // Still chasing a writer that outruns it: copying the tail here would be a long pause.
      if (m.busy !== 0 || m.fresh > SMALL_TAIL_FRAMES || m.log === 0) return;
      if (finishTail(opts.writer, opts.onError)) finished++;
    }
  });
  w.on('error', (e) => opts.onError?.(e.message));
  w.unref();
  return {
    truncate: () => w.postMessage('truncate'),
    get finished() {
      return finished;
    },
    get last() {
      return last;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        // Hold the process open until the final checkpoint is done: unref'd, a process with
        // nothing else pending would exit with this promise unsettled.
        w.ref();
        w.once('exit', () => resolve());
        w.postMessage('stop');
        setTimeout(() => {
          void w.terminate().then(() => resolve());
        }, 5000).unref();
      }),
  };
}

/**
 * Copy what is left of the WAL through the writing connection, between its transactions.
 * PASSIVE never waits on a lock: if another checkpoint or a reader is in the way it copies
 * what it can and the next round tries again.
 */
function finishTail(db: Database, onError?: (msg: string) => void): boolean {
  // Closed (shutting down), or inside a transaction / an open iterator: not between transactions.
  if (!db.open || db.inTransaction) return false;
  try {
    const r = db.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
    return r[0]?.busy === 0 && r[0].log === r[0].checkpointed;
  } catch (e) {
    // An iterator is open on the connection ("database table is locked" from SQLite, or
    // better-sqlite3's "busy executing a query"): next round.
    if (e instanceof Error && /busy executing|table is locked/.test(e.message)) return false;
    onError?.(e instanceof Error ? e.message : String(e));
    return false;
  }
}
