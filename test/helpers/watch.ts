import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { render, type Sql } from '../../src/db/sql.js';

// What a partner or operator polling msgd's database from outside would see: a thread of its
// own (its own connection, not the event loop msgd runs on) reads a query as fast as it can and
// keeps every distinct answer. The in-process poll of a test runs between msgd's event-loop
// turns and can miss a state that lasts from one commit to the next; this cannot.

const require = createRequire(import.meta.url);

const SQLITE_POLLER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { readonly: true, fileMustExist: true });
const q = db.prepare(workerData.text).pluck();
const seen = new Set();
const flag = new Int32Array(workerData.stop);
parentPort.postMessage('ready');
while (Atomics.load(flag, 0) === 0) {
  const v = q.get(...workerData.values);
  seen.add(v === undefined ? null : v);
}
db.close();
parentPort.postMessage([...seen]);
`;

// One query at a time on a connection of its own; each answer is what was committed when it ran.
const PG_POLLER = `
const { parentPort, workerData } = require('node:worker_threads');
const pg = require(workerData.driver);
(async () => {
  const client = new pg.Client({ connectionString: workerData.url });
  await client.connect();
  const seen = new Set();
  const flag = new Int32Array(workerData.stop);
  parentPort.postMessage('ready');
  while (Atomics.load(flag, 0) === 0) {
    const r = await client.query({ text: workerData.text, values: workerData.values, rowMode: 'array' });
    const v = r.rows.length === 0 ? null : r.rows[0][0];
    seen.add(v === undefined ? null : v);
  }
  await client.end();
  parentPort.postMessage([...seen]);
})().catch((e) => { throw e; });
`;

export interface Watch {
  /** Stop watching: every distinct value the query returned meanwhile. */
  stop(): Promise<unknown[]>;
}

/**
 * Watch one value (the first column of the first row of `q`) in msgd's store: the data dir's
 * database, or the PostgreSQL database of storeEnv's MSGD_DATABASE_URL (startTestServer's).
 */
export async function watchValue(
  where: { dataDir: string; storeEnv?: Record<string, string> },
  q: Sql,
): Promise<Watch> {
  const stop = new SharedArrayBuffer(4);
  const url = where.storeEnv?.MSGD_DATABASE_URL;
  const workerData = url
    ? { driver: require.resolve('pg'), url, ...render(q, 'postgres'), stop }
    : { driver: require.resolve('better-sqlite3'), file: join(where.dataDir, 'msgd.db'), ...render(q, 'sqlite'), stop };
  const w = new Worker(url ? PG_POLLER : SQLITE_POLLER, { eval: true, workerData });
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
