import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';

// What a partner or operator polling msgd's database from outside would see: a thread of its
// own (its own connection, not the event loop msgd runs on) reads a query as fast as it can and
// keeps every distinct answer. The in-process poll of a test runs between msgd's event-loop
// turns and can miss a state that lasts from one commit to the next; this cannot.

const require = createRequire(import.meta.url);

const POLLER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { readonly: true, fileMustExist: true });
const q = db.prepare(workerData.sql).pluck();
const seen = new Set();
const flag = new Int32Array(workerData.stop);
parentPort.postMessage('ready');
while (Atomics.load(flag, 0) === 0) {
  const v = q.get(...workerData.params);
  seen.add(v === undefined ? null : v);
}
db.close();
parentPort.postMessage([...seen]);
`;

export interface Watch {
  /** Stop watching: every distinct value the query returned meanwhile. */
  stop(): Promise<unknown[]>;
}

/** Watch one value (the first column of the first row of `sql`) in the data dir's database. */
export async function watchValue(dataDir: string, sql: string, ...params: unknown[]): Promise<Watch> {
  const stop = new SharedArrayBuffer(4);
  const w = new Worker(POLLER, {
    eval: true,
    workerData: { driver: require.resolve('better-sqlite3'), file: join(dataDir, 'msgd.db'), sql, params, stop },
  });
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
  await next();
  return {
    async stop() {
      const answer = next();
      Atomics.store(new Int32Array(stop), 0, 1);
      const seen = (await answer) as unknown[];
      await w.terminate();
      return seen;
    },
  };
}
