import { afterEach, beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import type { PgStore } from '../../src/db/pg/store.js';
import { store, TxEndedError, type Store, type Tx } from '../../src/db/query.js';
import { sql } from '../../src/db/sql.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';

// SQLite's store on a real data directory: queries written with sql``, transactions that span
// awaits behind SQLite's write lock. What runs on both stores is in test/both/.

let t: TestCtx;
beforeEach(() => {
  t = openTestCtx({ clock: true });
  t.ctx.db.sqlite.exec('CREATE TABLE q_items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, n INTEGER NOT NULL)');
});
afterEach(() => t.close());

type Item = { id: number; name: string; n: number };
const items = () => store(t.ctx.db).all<Item>(sql`SELECT id, name, n FROM q_items ORDER BY id`);

describe('store', () => {
  it('runs sql`` queries with their values bound, never spliced', async () => {
    const s = store(t.ctx.db);
    expect(s.dialect).toBe('sqlite');
    const name = "x'); DROP TABLE q_items; --";
    expect(await s.run(sql`INSERT INTO q_items (name, n) VALUES (${name}, ${1})`)).toEqual({ changes: 1 });
    expect(await s.run(sql`INSERT INTO q_items (name, n) VALUES (${'b'}, ${2})`)).toEqual({ changes: 1 });
    expect(await s.get<Item>(sql`SELECT * FROM q_items WHERE n = ${1}`)).toEqual({ id: 1, name, n: 1 });
    expect(await s.get<Item>(sql`SELECT * FROM q_items WHERE n = ${3}`)).toBeUndefined();
    expect((await items()).map((r) => r.name)).toEqual([name, 'b']);
    expect(await s.run(sql`UPDATE q_items SET n = n + ${10} WHERE n > ${0}`)).toEqual({ changes: 2 });
  });

  it('reads rows as arrays with values(), while the same SQL text keeps giving named rows to all()', async () => {
    const s = store(t.ctx.db);
    await s.run(sql`INSERT INTO q_items (name, n) VALUES (${'a'}, ${1}), (${'b'}, ${2})`);
    const list = (q: string) => sql`SELECT id, name, n FROM q_items WHERE name >= ${q} ORDER BY id`;
    expect(await s.values<[number, string, number]>(list('a'))).toEqual([
      [1, 'a', 1],
      [2, 'b', 2],
    ]);
    expect(await s.all<Item>(list('b'))).toEqual([{ id: 2, name: 'b', n: 2 }]);
    expect(await s.values(list('b'))).toEqual([[2, 'b', 2]]);
    const inside = await s.transaction(async (tx) => {
      await tx.run(sql`UPDATE q_items SET n = ${5} WHERE id = ${1}`);
      return tx.values<[number, string, number]>(list('a'));
    });
    expect(inside).toEqual([
      [1, 'a', 5],
      [2, 'b', 2],
    ]);
    let kept!: Tx;
    await s.transaction(async (tx) => {
      kept = tx;
    });
    await expect(kept.values(list('a'))).rejects.toBeInstanceOf(TxEndedError);
  });

  it('is one store per connection', () => {
    expect(store(t.ctx.db)).toBe(store(t.ctx.db));
  });

  it("is the interface PostgreSQL's store implements too", () => {
    expectTypeOf<PgStore>().toExtend<Store>();
  });

  it('commits a transaction when its function resolves, and takes back all of it when it rejects', async () => {
    const s = store(t.ctx.db);
    const v = await s.transaction(async (tx) => {
      await tx.run(sql`INSERT INTO q_items (name, n) VALUES (${'kept'}, ${1})`);
      return (await tx.get<{ c: number }>(sql`SELECT count(*) AS c FROM q_items`))!.c;
    });
    expect(v).toBe(1);
    const failed = s.transaction(async (tx) => {
      await tx.run(sql`INSERT INTO q_items (name, n) VALUES (${'gone'}, ${2})`);
      await tx.run(sql`UPDATE q_items SET n = ${99}`);
      throw new Error('refused');
    });
    await expect(failed).rejects.toThrow('refused');
    expect(await items()).toEqual([{ id: 1, name: 'kept', n: 1 }]);
    expect(t.ctx.db.sqlite.inTransaction).toBe(false);
  });

  it('runs transactions one after another, each seeing the ones before it', async () => {
    const s = store(t.ctx.db);
    // Each reads the count, awaits, then writes: interleaved, they would all read 0.
    await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        s.transaction(async (tx) => {
          const c = (await tx.get<{ c: number }>(sql`SELECT count(*) AS c FROM q_items`))!.c;
          await tx.run(sql`INSERT INTO q_items (name, n) VALUES (${`t${i}`}, ${c})`);
        }),
      ),
    );
    expect((await items()).map((r) => r.n)).toEqual([0, 1, 2, 3, 4]);
  });

  it('runs a transaction in a turn of its own: a synchronous write queued before it does not land inside it', async () => {
    const s = store(t.ctx.db);
    // Code still written against the connection runs in a promise continuation a few steps
    // down a chain that is already under way when the transaction is asked for: it must run
    // before BEGIN, not between the transaction's statements.
    let syncInsideTx: boolean | undefined;
    const done = s.transaction(async (tx) => {
      await tx.run(sql`INSERT INTO q_items (name, n) VALUES (${'a'}, ${1})`);
      await tx.run(sql`INSERT INTO q_items (name, n) VALUES (${'b'}, ${2})`);
      await tx.run(sql`INSERT INTO q_items (name, n) VALUES (${'c'}, ${3})`);
      throw new Error('refused');
    });
    let chain: Promise<void> = Promise.resolve();
    for (let i = 0; i < 4; i++) chain = chain.then(() => {});
    const legacy = chain.then(() => {
      syncInsideTx = t.ctx.db.sqlite.inTransaction;
      t.ctx.db.sqlite.prepare('INSERT INTO q_items (name, n) VALUES (?, ?)').run('legacy', 0);
    });
    await legacy;
    await expect(done).rejects.toThrow('refused');
    expect(syncInsideTx).toBe(false);
    expect((await items()).map((r) => r.name)).toEqual(['legacy']);
  });

  it('keeps a statement outside a transaction out of the open one, and warns of a transaction that awaits anything else', async () => {
    const s = store(t.ctx.db);
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    let commit!: () => void;
    const held = new Promise<void>((r) => (commit = r));
    const open = s.transaction(async (tx) => {
      await tx.run(sql`INSERT INTO q_items (name, n) VALUES (${'inside'}, ${1})`);
      await held;
    });
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(t.ctx.db.sqlite.inTransaction).toBe(true);
    let seen: Item[] | undefined;
    const read = items().then((rows) => (seen = rows));
    // A write outside, meanwhile, must not become part of the transaction either.
    const write = s.run(sql`INSERT INTO q_items (name, n) VALUES (${'outside'}, ${2})`);
    await new Promise((r) => setImmediate(r));
    expect(seen).toBeUndefined();
    commit();
    await open;
    await read;
    await write;
    await new Promise((r) => setImmediate(r));
    process.off('warning', onWarning);
    expect(seen!.map((r) => r.name)).toEqual(['inside']);
    expect((await items()).map((r) => r.name)).toEqual(['inside', 'outside']);
    expect(warnings.map((w) => w.name)).toEqual(['TxOutlivedTurn']);
  });

  it('refuses a statement run after its transaction ended (one that was not awaited inside it)', async () => {
    const s = store(t.ctx.db);
    let kept!: Tx;
    await s.transaction(async (tx) => {
      kept = tx;
    });
    await expect(kept.run(sql`INSERT INTO q_items (name, n) VALUES (${'late'}, ${1})`)).rejects.toBeInstanceOf(
      TxEndedError,
    );
    expect(await items()).toEqual([]);
  });

  it('begins a transaction asked for inside a synchronous one after that one commits, on its own', async () => {
    const s = store(t.ctx.db);
    let started: Promise<unknown> | undefined;
    t.ctx.db.sqlite.transaction(() => {
      t.ctx.db.sqlite.prepare('INSERT INTO q_items (name, n) VALUES (?, ?)').run('sync', 1);
      started = s.transaction(async (tx) => tx.run(sql`INSERT INTO q_items (name, n) VALUES (${'async'}, ${2})`));
    })();
    await started;
    expect((await items()).map((r) => r.name)).toEqual(['sync', 'async']);
  });
});
