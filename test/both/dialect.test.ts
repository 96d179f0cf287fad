import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  clockMs,
  escapeLike,
  forUpdate,
  indexedBy,
  inList,
  jsonText,
  likeFold,
  redactedContent,
  skipLocked,
  textRows,
  unsentPayload,
} from '../../src/db/dialect.js';
import { render, sql } from '../../src/db/sql.js';
import { openPg } from '../../src/db/pg/store.js';
import { databaseUrl, pgAdminUrl, withClient } from '../pg/helpers.js';
import { openStoreCtx, type StoreCtx, testStore } from './helpers.js';

// src/db/dialect.ts: each fragment in a real query on the store the run is for, giving the same
// rows on both. Add the test of a fragment you add in a describe of its own.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
});
afterEach(() => t.close());

const ids = (rows: { id: string }[]) => rows.map((r) => r.id);

describe('indexedBy', () => {
  beforeEach(async () => {
    await t.exec(`
      INSERT INTO jobs (kind, payload, state, priority, run_at, max_attempts, created_at, updated_at)
      VALUES ('a', '{}', 'available', 0, 1, 5, 0, 0), ('b', '{}', 'done', 0, 2, 5, 0, 0),
             ('c', '{}', 'retry', 1, 3, 5, 0, 0)`);
  });

  it('reads through the named index, the same rows on both stores', async () => {
    const d = t.dialect;
    const rows = await t.ctx.store.all<{ kind: string }>(
      sql`SELECT kind FROM jobs ${indexedBy(d, 'jobs_claim')} WHERE state IN ('available', 'retry') ORDER BY id`,
    );
    expect(rows.map((r) => r.kind)).toEqual(['a', 'c']);
  });

  it('is a hint SQLite obeys (an unknown index fails the statement), and nothing on PostgreSQL', async () => {
    const q = t.ctx.store.all(sql`SELECT kind FROM jobs ${indexedBy(t.dialect, 'no_such_index')}`);
    if (t.dialect === 'sqlite') await expect(q).rejects.toThrow('no such index: no_such_index');
    else expect(await q).toHaveLength(3);
  });

  it('refuses a name that is not a plain SQL name', () => {
    expect(() => indexedBy(t.dialect, 'jobs_claim; DROP TABLE jobs')).toThrow(
      'index "jobs_claim; DROP TABLE jobs" is not a plain SQL name',
    );
  });
});

describe('jsonText', () => {
  beforeEach(async () => {
    await t.exec(`
      CREATE TABLE b_docs (id TEXT PRIMARY KEY, body TEXT NOT NULL);
      INSERT INTO b_docs (id, body) VALUES
        ('d1', '{"message_id":"msg_1","kind":"text","n":7}'),
        ('d2', '{"message_id":"msg_2","kind":null}'),
        ('d3', '{"other":"x","message_id":"ünï \\"q\\""}')`);
  });

  it('reads a string field as the same text, a missing key or null as NULL', async () => {
    const d = t.dialect;
    const rows = await t.ctx.store.all<{ id: string; m: string; k: string | null }>(
      sql`SELECT id, ${jsonText(d, 'body', 'message_id')} AS m, ${jsonText(d, 'b_docs.body', 'kind')} AS k
            FROM b_docs ORDER BY id`,
    );
    expect(rows).toEqual([
      { id: 'd1', m: 'msg_1', k: 'text' },
      { id: 'd2', m: 'msg_2', k: null },
      { id: 'd3', m: 'ünï "q"', k: null },
    ]);
  });

  it('compares in WHERE with a bound value, and reads a number field through CAST AS BIGINT', async () => {
    const d = t.dialect;
    const hit = await t.ctx.store.all<{ id: string }>(
      sql`SELECT id FROM b_docs WHERE ${jsonText(d, 'body', 'message_id')} = ${'msg_2'}`,
    );
    expect(ids(hit)).toEqual(['d2']);
    const n = await t.ctx.store.get<{ n: number }>(
      sql`SELECT CAST(${jsonText(d, 'body', 'n')} AS BIGINT) AS n FROM b_docs WHERE id = ${'d1'}`,
    );
    expect(n).toEqual({ n: 7 });
  });

  it('fails the statement on a malformed document, on both stores', async () => {
    await t.exec(`INSERT INTO b_docs (id, body) VALUES ('bad', '{not json')`);
    await expect(
      t.ctx.store.all(sql`SELECT ${jsonText(t.dialect, 'body', 'kind')} AS k FROM b_docs`),
    ).rejects.toThrow();
  });

  it("refuses a key or column that would leave the query's text", () => {
    expect(() => jsonText(t.dialect, 'body', "x') OR 1=1 --")).toThrow(/JSON key .* is not a plain SQL name/);
    expect(() => jsonText(t.dialect, 'body)--', 'x')).toThrow(/column .* is not a plain SQL name/);
  });
});

describe('likeFold', () => {
  beforeEach(async () => {
    await t.exec(`
      CREATE TABLE b_addr (id TEXT PRIMARY KEY, address TEXT NOT NULL);
      INSERT INTO b_addr (id, address) VALUES
        ('a1', 'Alice@Example.com'), ('a2', 'bob@example.com'), ('a3', 'ÉCOLE@example.com'),
        ('a4', 'école@example.com'), ('a5', '50%_off@shop.example'), ('a6', '50xxoff@shop.example'),
        ('a7', 'back\\slash@example.com')`);
  });

  const search = async (pattern: string) =>
    ids(
      await t.ctx.store.all<{ id: string }>(
        sql`SELECT id FROM b_addr WHERE ${likeFold(t.dialect, 'address', pattern)} ORDER BY id`,
      ),
    );

  it('ignores the case of ASCII letters, on both stores', async () => {
    expect(await search('%EXAMPLE.COM')).toEqual(['a1', 'a2', 'a3', 'a4', 'a7']);
    expect(await search('alice@%')).toEqual(['a1']);
    expect(await search(`%${escapeLike('ALICE')}%`)).toEqual(['a1']);
  });

  it('folds ASCII only, as SQLite: É and é stay apart on both stores', async () => {
    expect(await search('école%')).toEqual(['a4']);
    expect(await search('ÉCOLE%')).toEqual(['a3']);
    expect(await search('%COLE@%')).toEqual(['a3', 'a4']);
  });

  it('matches %, _ and \\ literally once escaped', async () => {
    expect(await search('50%')).toEqual(['a5', 'a6']);
    expect(await search(`${escapeLike('50%_')}%`)).toEqual(['a5']);
    expect(await search(`%${escapeLike('k\\s')}%`)).toEqual(['a7']);
    expect(escapeLike('a%b_c\\d')).toBe('a\\%b\\_c\\\\d');
  });

  it.runIf(testStore === 'postgres')(
    'folds ASCII only on a PostgreSQL database whose own locale folds every letter',
    async () => {
      // msgd's columns are "C"; a bound pattern takes the database's collation, here one whose
      // lower() makes É é. Folded under "C", the pattern still keeps them apart.
      const name = `b_dialect_ctype_${process.pid}`;
      await withClient(pgAdminUrl(), (c) =>
        c.query(`CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C.utf8' LC_CTYPE 'C.utf8'`),
      );
      const store = openPg(databaseUrl(pgAdminUrl(), name), { logger: { warn: () => {} } });
      try {
        expect(await store.get(sql`SELECT lower(${'É'}::text) AS l`)).toEqual({ l: 'é' });
        const rows = await store.all<{ x: string }>(
          sql`SELECT x FROM (VALUES ('ÉCOLE'), ('école'), ('Ecole')) AS v(x)
               WHERE ${likeFold('postgres', 'x', 'ÉCOLE%')} ORDER BY x`,
        );
        expect(rows.map((r) => r.x)).toEqual(['ÉCOLE']);
      } finally {
        await store.close();
        await withClient(pgAdminUrl(), (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
      }
    },
  );
});

describe('redactedContent', () => {
  it('builds the same redacted JSON object from a content column on both stores', async () => {
    await t.exec(`
      CREATE TABLE b_content (id TEXT PRIMARY KEY, content TEXT NOT NULL);
      INSERT INTO b_content (id, content) VALUES
        ('a', '{"kind":"text","text":"secret"}'), ('b', '{"text":"no kind"}'), ('c', '{"kind":"email","n":1}')`);
    const at = '2026-11-27T07:00:00.000Z';
    const rows = await t.ctx.store.all<{ id: string; r: string }>(
      sql`SELECT id, ${redactedContent(t.dialect, 'content', at)} AS r FROM b_content ORDER BY id`,
    );
    expect(rows.map((x) => [x.id, JSON.parse(x.r)])).toEqual([
      ['a', { kind: 'redacted', was: 'text', redacted_at: at }],
      ['b', { kind: 'redacted', was: null, redacted_at: at }],
      ['c', { kind: 'redacted', was: 'email', redacted_at: at }],
    ]);
    expect(rows.map((x) => typeof x.r)).toEqual(['string', 'string', 'string']);
  });
});

describe('inList', () => {
  beforeEach(async () => {
    await t.exec(`INSERT INTO partners (id, slug, name, created_at, updated_at) VALUES
      ('p_a', 'a', 'A', 0, 0), ('p_b', 'b', 'B', 0, 0), ('p_c', 'c', 'C', 0, 0), ('p_''d', 'd', 'D', 0, 0)`);
  });

  it('matches the listed values, one statement for any number of them, none for an empty list', async () => {
    const read = async (values: string[]) =>
      ids(
        await t.ctx.store.all<{ id: string }>(
          sql`SELECT id FROM partners WHERE ${inList(t.dialect, 'id', values)} ORDER BY id`,
        ),
      );
    expect(await read(['p_c', 'p_a', 'p_x'])).toEqual(['p_a', 'p_c']);
    expect(await read(["p_'d", 'p_b'])).toEqual(["p_'d", 'p_b']);
    expect(await read([])).toEqual([]);
  });
});

describe('forUpdate', () => {
  beforeEach(async () => {
    await t.exec(`INSERT INTO meta (key, value) VALUES ('lock_a', '1'), ('lock_b', '2')`);
  });

  const read = (tx: { get<R>(q: ReturnType<typeof sql>): Promise<R | undefined> }) =>
    tx.get<{ value: string }>(sql`SELECT value FROM meta WHERE key = ${'lock_a'} ${forUpdate(t.dialect)}`);

  it('reads the same row in a transaction on both stores, locking it on PostgreSQL', async () => {
    const q = sql`SELECT value FROM meta WHERE key = ${'lock_a'} ${forUpdate(t.dialect)}`;
    expect(render(q, t.dialect).text.trim().endsWith('FOR UPDATE')).toBe(t.dialect === 'postgres');
    expect(await t.ctx.store.transaction((tx) => read(tx))).toEqual({ value: '1' });
  });

  it('keeps read-modify-write transactions from losing each other’s change', async () => {
    await Promise.all(
      Array.from({ length: 8 }, () =>
        t.ctx.store.transaction(async (tx) => {
          const r = await read(tx);
          await tx.run(sql`UPDATE meta SET value = ${String(Number(r!.value) + 1)} WHERE key = ${'lock_a'}`);
        }),
      ),
    );
    expect(await read(t.ctx.store)).toEqual({ value: '9' });
  });
});

describe('skipLocked', () => {
  it('passes over rows another transaction holds on PostgreSQL; SQLite, one writer at a time, takes them', async () => {
    await t.exec(`INSERT INTO partners (id, slug, name, created_at, updated_at) VALUES
      ('p_a', 'a', 'A', 0, 0), ('p_b', 'b', 'B', 0, 0), ('p_c', 'c', 'C', 0, 0)`);
    const take = () =>
      t.ctx.store.transaction((tx) =>
        tx.all<{ id: string }>(sql`SELECT id FROM partners ORDER BY id LIMIT 2 ${skipLocked(t.dialect)}`),
      );
    expect(ids(await take())).toEqual(['p_a', 'p_b']);
    if (t.dialect === 'sqlite') return;
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const holder = t.ctx.store.transaction(async (tx) => {
      await tx.all(sql`SELECT id FROM partners WHERE id = 'p_a' FOR UPDATE`);
      locked();
      await released;
    });
    await isLocked;
    expect(ids(await take())).toEqual(['p_b', 'p_c']);
    release();
    await holder;
  });
});

describe('textRows', () => {
  it('inserts a list of rows bound as one value, in order, the same text for any number of rows', async () => {
    const insert = (rows: string[][]) =>
      t.ctx.store.all<{ id: string; slug: string }>(
        sql`INSERT INTO partners (id, slug, name, created_at, updated_at)
            SELECT r.id, r.slug, r.slug, 0, 0 FROM ${textRows(t.dialect, ['id', 'slug'], rows)} AS r WHERE true
            ON CONFLICT (id) DO NOTHING RETURNING id, slug`,
      );
    expect(
      await insert([
        ['p_b', 'b'],
        ["p_'a", 'ä "quoted"'],
      ]),
    ).toEqual([
      { id: 'p_b', slug: 'b' },
      { id: "p_'a", slug: 'ä "quoted"' },
    ]);
    // Rows already there are passed over, the others inserted.
    expect(
      await insert([
        ['p_b', 'x'],
        ['p_c', 'c'],
      ]),
    ).toEqual([{ id: 'p_c', slug: 'c' }]);
    expect(await insert([])).toEqual([]);
    const all = await t.ctx.store.all<{ id: string }>(sql`SELECT id FROM partners ORDER BY id`);
    expect(ids(all)).toEqual(["p_'a", 'p_b', 'p_c']);
  });

  it('refuses a column that is not a plain SQL name, or a row of another width', () => {
    expect(() => textRows(t.dialect, ['id; DROP TABLE x'], [])).toThrow('is not a plain SQL name');
    expect(() => textRows(t.dialect, ['a', 'b'], [['1']])).toThrow('a row has 1 values for 2 columns');
  });
});

describe('unsentPayload', () => {
  it('empties body and media and sets content, the same JSON on both stores', async () => {
    await t.exec(`
      CREATE TABLE b_payload (id TEXT PRIMARY KEY, payload TEXT NOT NULL);
      INSERT INTO b_payload (id, payload) VALUES
        ('a', '{"event":"message.received","body":"secret","media":[{"url":"x"}],"content":{"kind":"text","text":"secret"}}'),
        ('b', '{"event":"message.received"}')`);
    const content = '{"kind":"redacted","was":"text","redacted_at":"2026-11-27T07:00:00.000Z"}';
    const rows = await t.ctx.store.all<{ id: string; p: string }>(
      sql`SELECT id, ${unsentPayload(t.dialect, 'payload', content)} AS p FROM b_payload ORDER BY id`,
    );
    const redacted = { kind: 'redacted', was: 'text', redacted_at: '2026-11-27T07:00:00.000Z' };
    expect(rows.map((x) => [x.id, JSON.parse(x.p)])).toEqual([
      ['a', { event: 'message.received', body: '', media: [], content: redacted }],
      ['b', { event: 'message.received', body: '', media: [], content: redacted }],
    ]);
    expect(rows.map((x) => typeof x.p)).toEqual(['string', 'string']);
  });

  it('fails the statement on malformed content, on both stores', async () => {
    await t.exec(`CREATE TABLE b_payload (id TEXT PRIMARY KEY, payload TEXT NOT NULL);
      INSERT INTO b_payload (id, payload) VALUES ('a', '{}')`);
    await expect(
      t.ctx.store.all(sql`SELECT ${unsentPayload(t.dialect, 'payload', '{not json')} AS p FROM b_payload`),
    ).rejects.toThrow();
  });
});

describe('clockMs', () => {
  it("is the caller's clock on SQLite and the database server's on PostgreSQL, in ms as a number", async () => {
    const given = Date.UTC(2020, 0, 1);
    const before = Date.now();
    const r = (await t.ctx.store.get<{ now: number }>(sql`SELECT ${clockMs(t.dialect, given)} AS now`))!;
    expect(typeof r.now).toBe('number');
    if (t.dialect === 'sqlite') expect(r.now).toBe(given);
    // The test's server runs on this host: its clock is this process's, to the millisecond's rounding.
    else expect(r.now).toBeGreaterThanOrEqual(before - 1_000);
    if (t.dialect === 'postgres') expect(r.now).toBeLessThanOrEqual(Date.now() + 1_000);
  });
});
