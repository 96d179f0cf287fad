import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx, testStore } from './helpers.js';

// The context test/both gives a test, on the store the run is for: an empty, migrated store
// each time, raw setup SQL, and (on PostgreSQL) no SQLite connection to fall back on.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
});
afterEach(() => t.close());

const audit = async (s: StoreCtx) => {
  await s.ctx.store.run(
    sql`INSERT INTO audit_log (actor, action, target_type, created_at) VALUES ('operator:t', 'x', 'y', ${s.ctx.now()})`,
  );
  return s.ctx.store.all<{ id: number }>(sql`SELECT id FROM audit_log ORDER BY id`);
};

const settingsVersion = async (s: StoreCtx) =>
  (await s.ctx.store.get<{ value: string }>(sql`SELECT value FROM meta WHERE key = ${'settings_version'}`))?.value;

describe('openStoreCtx', () => {
  it('runs on the store the run is for, with the clock the test moves', async () => {
    expect(t.dialect).toBe(testStore);
    expect(t.ctx.store.dialect).toBe(testStore);
    expect(t.ctx.now()).toBe(t.clock.now);
    t.clock.now += 1_000;
    expect(t.ctx.now()).toBe(t.clock.now);
    expect(t.ctx.masterKey).toHaveLength(32);
    expect(t.ctx.gatewayKinds.get('twilio')).toBeDefined();
  });

  it('gives a migrated store with the rows the migrations insert, and runs raw setup SQL', async () => {
    expect(await settingsVersion(t)).toBe('0');
    await t.exec(`
      CREATE TABLE b_items (id TEXT PRIMARY KEY, n BIGINT NOT NULL);
      INSERT INTO b_items (id, n) VALUES ('a', 1), ('b', 9007199254740991);
    `);
    await t.exec(
      `INSERT INTO partners (id, slug, name, status, currency, credit_limit, created_at, updated_at)
       VALUES ('prt_1', 'one', 'One', 'active', 'EUR', 0, 0, 0)`,
    );
    expect(await t.ctx.store.all(sql`SELECT id, n FROM b_items ORDER BY id`)).toEqual([
      { id: 'a', n: 1 },
      { id: 'b', n: 9007199254740991 },
    ]);
    // The partners trigger moved it, on both stores.
    expect(await settingsVersion(t)).toBe('1');
    expect(await audit(t)).toEqual([{ id: 1 }]);
    expect(await audit(t)).toEqual([{ id: 1 }, { id: 2 }]);
  });

  it('starts the next test empty again: no rows, no table a test made, the migrations rows back', async () => {
    expect(await t.ctx.store.all(sql`SELECT id FROM partners`)).toEqual([]);
    expect(await settingsVersion(t)).toBe('0');
    // Ids count from 1 again.
    expect(await audit(t)).toEqual([{ id: 1 }]);
    // The table the test before created is gone: creating it again works.
    await t.exec('CREATE TABLE b_items (id TEXT PRIMARY KEY)');
  });

  it('gives a context opened while another is open a store of its own', async () => {
    const other = await openStoreCtx();
    try {
      await t.exec(`INSERT INTO meta (key, value) VALUES ('b_one', 'x')`);
      expect(await other.ctx.store.get(sql`SELECT value FROM meta WHERE key = ${'b_one'}`)).toBeUndefined();
    } finally {
      await other.close();
    }
  });

  it.runIf(testStore === 'postgres')(
    'fails loudly on PostgreSQL when code reaches for the SQLite connection',
    async () => {
      expect(() => t.ctx.db.sqlite).toThrow(
        'ctx.db.sqlite: this code still uses the SQLite connection: not converted to ctx.store',
      );
      expect(() => t.ctx.db.orm).toThrow(/ctx\.db\.orm: .* not converted to ctx\.store/);
      // Handing the context around (awaiting it, printing it) is not a use.
      expect(await Promise.resolve(t.ctx)).toBe(t.ctx);
    },
  );
});
