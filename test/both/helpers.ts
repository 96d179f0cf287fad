// Tests that run on both stores. `npm test` runs test/both/ on SQLite; `npm run test:pg` runs it
// again on PostgreSQL (config/vitest.pg.config.ts sets MSGD_TEST_STORE=postgres). A test gets
// its context from openStoreCtx() and reaches the data through ctx.store only:
//
//   let t: StoreCtx;
//   beforeEach(async () => {
//     t = await openStoreCtx({ clock: true });
//     await t.exec(`INSERT INTO partners (…) VALUES (…)`); // raw setup SQL, on either store
//   });
//   afterEach(() => t.close());
//
// On SQLite the context is openTestCtx()'s (test/helpers/ctx.ts): a real data directory. On
// PostgreSQL it is a PgStore over a database at msgd's current schema, the defaults' config,
// a random master key and msgd's gateway kinds; its `db` (the SQLite connection) throws on any
// use, so a test that reaches code not yet converted to ctx.store fails, naming what it touched.
//
// Each context starts at an empty, migrated store, as a new data directory does. On PostgreSQL
// a file keeps its databases for all its tests (making one costs more than emptying one, see
// docs/testing.md): a context opened while the file's others are open gets a database of its
// own, and one opened after they closed gets a used database back with every table emptied,
// the rows the migrations insert put back, and the tables a test created dropped. At its end the
// file gives its databases back, emptied, for the next files (test/pg/reuse.ts).

import { randomBytes } from 'node:crypto';
import { afterAll, expect } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { CoreCtx } from '../../src/core/context.js';
import type { Db } from '../../src/db/open.js';
import { openPg, type PgStore } from '../../src/db/pg/store.js';
import type { Dialect } from '../../src/db/sql.js';
import { sql } from '../../src/db/sql.js';
import { gatewayKinds } from '../../src/providers/kinds.js';
import { openTestCtx } from '../helpers/ctx.js';
import { RESET_FOR_REUSE, type ReusableDatabase, takeEmptyDatabase } from '../pg/reuse.js';

/** The store test/both runs on: MSGD_TEST_STORE (set by config/vitest.pg.config.ts), SQLite without it. */
export const testStore: Dialect = storeFromEnv(process.env.MSGD_TEST_STORE);

function storeFromEnv(v: string | undefined): Dialect {
  if (v === undefined || v === '' || v === 'sqlite') return 'sqlite';
  if (v === 'postgres') return 'postgres';
  throw new Error(`MSGD_TEST_STORE=${v}: the tests run on sqlite or postgres`);
}

export interface StoreCtx {
  ctx: CoreCtx;
  /** Moves ctx.now() when opened with `clock: true`. */
  clock: { now: number };
  dialect: Dialect;
  /**
   * Where another process reaches the same store: the data directory on SQLite, the database's
   * URL on PostgreSQL (for a child that opens it itself, as msgctl beside msgd does).
   */
  target: string;
  /**
   * Runs raw SQL as it is (several statements allowed, no values): table setup and fixtures,
   * written in the SQL both stores accept. A test on PostgreSQL may create tables (they are
   * dropped before the database is used again), not other objects.
   */
  exec(text: string): Promise<void>;
  close(): Promise<void>;
}

/** A core context over an empty, migrated store: SQLite's data directory, or a PostgreSQL database. */
export async function openStoreCtx(opts: { clock?: boolean } = {}): Promise<StoreCtx> {
  if (testStore === 'sqlite') {
    const t = openTestCtx({ clock: opts.clock });
    return {
      ctx: t.ctx,
      clock: t.clock,
      dialect: 'sqlite',
      target: t.dir,
      async exec(text) {
        t.ctx.db.sqlite.exec(text);
      },
      async close() {
        t.close();
      },
    };
  }
  const db = await takeDatabase();
  const clock = { now: Date.now() };
  const ctx: CoreCtx = {
    db: unconvertedDb(),
    store: db.store,
    masterKey: randomBytes(32),
    config: loadConfig({ env: {} }),
    now: opts.clock ? () => clock.now : Date.now,
    gatewayKinds,
  };
  let closed = false;
  return {
    ctx,
    clock,
    dialect: 'postgres',
    target: db.db.url,
    async exec(text) {
      // No values: pg sends it as a simple query, which may hold several statements.
      await db.store.run(sql.raw(text));
    },
    async close() {
      if (closed) return;
      closed = true;
      free.push(db);
    },
  };
}

const UNCONVERTED =
  'still uses the SQLite connection: not converted to ctx.store (test/both runs it on PostgreSQL, where ctx.db does not exist)';

/** A `Db` that throws on any use: code that reaches it has not been converted to ctx.store. */
function unconvertedDb(): Db {
  const refuse = (what: string): never => {
    throw new Error(`${what}: this code ${UNCONVERTED}`);
  };
  return new Proxy({} as Db, {
    get(_, prop) {
      // What promise resolution and printing look for is answered, so a refusal comes from a use.
      if (typeof prop === 'symbol' || prop === 'then' || prop === 'toJSON') return undefined;
      return refuse(`ctx.db.${prop}`);
    },
    set: (_, prop) => refuse(`setting ctx.db.${String(prop)}`),
    has: (_, prop) => refuse(`'${String(prop)}' in ctx.db`),
    ownKeys: () => refuse('listing ctx.db'),
    apply: () => refuse('calling ctx.db'),
  });
}

// PostgreSQL: the file's databases, each with its store (a small pool), kept for the file's tests.

interface FileDatabase {
  db: ReusableDatabase;
  store: PgStore;
}

const all: FileDatabase[] = [];
const free: FileDatabase[] = [];
const logger = { warn: () => {}, info: () => {} };

if (testStore === 'postgres') {
  afterAll(async () => {
    for (const d of all.splice(0)) {
      await d.store.close();
      await d.db.release();
    }
    free.length = 0;
  });
}

function label(): string {
  const file = expect.getState().testPath ?? 'both';
  return `b_${file.replace(/^.*\//, '').replace(/\.test\.tsx?$/, '')}`;
}

async function takeDatabase(): Promise<FileDatabase> {
  const reused = free.pop();
  if (reused) {
    await reused.store.run(sql.raw(RESET_FOR_REUSE));
    return reused;
  }
  const db = await takeEmptyDatabase(label());
  const store = openPg(db.url, { logger, poolSize: 4 });
  const d = { db, store };
  all.push(d);
  return d;
}
