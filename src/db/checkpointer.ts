import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

const require = createRequire(import.meta.url);

// The server turns off SQLite's automatic checkpoint (it runs on the committing thread and
// was the p99.9 of the send path). This thread checkpoints the WAL through its own
// connection instead, off the event loop.

const SCRIPT = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 5000');
// It only copies WAL frames into the database file: no page cache, no mapping needed.
db.pragma('cache_size = 16');
db.pragma('mmap_size = 0');
let busy = false;
function run(mode) {
  if (busy) return;
  busy = true;
  try {
    const r = db.pragma('wal_checkpoint(' + mode + ')')[0];
    parentPort.postMessage({ type: 'checkpoint', mode, ...r });
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
}

export function startCheckpointer(path: string, opts: { intervalMs?: number; onError?: (msg: string) => void } = {}): Checkpointer {
  const driver = require.resolve('better-sqlite3');
  const w = new Worker(SCRIPT, {
    eval: true,
    workerData: { path, driver, intervalMs: opts.intervalMs ?? 2000 },
    // A small isolate: the loop allocates next to nothing.
    resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 },
  });
  w.on('message', (m) => {
    if (m?.type === 'error') opts.onError?.(m.message);
  });
  w.on('error', (e) => opts.onError?.(e.message));
  w.unref();
  return {
    truncate: () => w.postMessage('truncate'),
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
