import { once } from 'node:events';
import { createServer } from 'node:net';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectPg, openPg, PgConnectError, type PgStore, StorageUnavailableError } from '../../src/db/pg/store.js';
import { toSafeNumber } from '../../src/db/pg/numbers.js';
import { redactUrl } from '../../src/lib/redact-url.js';
import { sql } from '../../src/db/sql.js';
import { errorHandler } from '../../src/web/errors.js';
import { databaseUrl, freshDatabase } from './helpers.js';

// The PostgreSQL connection layer against a real server: int8 as exact JS numbers, integer
// numerics (sums) as bigint, transactions that run again on a serialization failure or a
// deadlock, advisory locks, LISTEN, and what a caller sees when the server cannot be reached.

interface Line {
  obj: object;
  msg?: string;
}
const lines: Line[] = [];
const logger = { warn: (obj: object, msg?: string) => lines.push({ obj, msg }), info: () => {} };

const db = freshDatabase();
let store: PgStore;

beforeAll(() => {
  store = openPg(db.url, { logger, poolSize: 6 });
});
afterAll(() => store.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(check: () => boolean, ms = 5_000) {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await sleep(20);
  }
}

describe('exact numbers', () => {
  it('reads int8 as a JS number, as SQLite gives an integer column, up to ±(2^53 − 1) exactly', async () => {
    await store.run(sql`CREATE TABLE amounts (micros bigint NOT NULL)`);
    const max = 9007199254740991n; // 2^53 − 1
    await store.run(sql`INSERT INTO amounts VALUES (${max}), (${max}), (${max}), (2), (${-max})`);
    const row = await store.get<{ n: number; hi: number; lo: number; money: number; flag: number }>(
      sql`SELECT count(*) AS n, max(micros) AS hi, min(micros) AS lo, ${1_000_000_000_000_000n}::int8 AS money,
                 1::int8 AS flag FROM amounts`,
    );
    expect(row).toEqual({ n: 5, hi: 9007199254740991, lo: -9007199254740991, money: 1e15, flag: 1 });
    expect(typeof row?.n).toBe('number');
  });

  it('returns a sum of int8 (a numeric) above 2^53 as an exact bigint, and its CAST AS BIGINT as a number', async () => {
    // 3 × (2^53 − 1) + 2 − (2^53 − 1): a float would round the intermediate sum.
    const row = await store.get<{ total: bigint }>(sql`SELECT sum(micros) AS total FROM amounts`);
    expect(row).toEqual({ total: 18014398509481984n });
    expect(typeof row?.total).toBe('bigint');
    const small = await store.get<{ total: number }>(
      sql`SELECT CAST(sum(micros) AS BIGINT) AS total FROM amounts WHERE micros < ${10}`,
    );
    expect(small).toEqual({ total: -9007199254740989 });
  });

  it('refuses an int8 past ±(2^53 − 1) with a RangeError rather than a rounded float', async () => {
    await expect(store.get(sql`SELECT 9007199254740992::int8 AS x`)).rejects.toThrow(RangeError);
    await expect(store.get(sql`SELECT -9007199254740993::int8 AS x`)).rejects.toThrow(
      /bigint -9007199254740993, outside ±\(2\^53 − 1\)/,
    );
    await expect(store.get(sql`SELECT CAST(sum(micros) AS BIGINT) AS x FROM amounts`)).rejects.toThrow(RangeError);
    // The pool is still usable after a refused row.
    expect(await store.get(sql`SELECT 7::int8 AS x`)).toEqual({ x: 7 });
  });

  it('reads int8 arrays as numbers and integer numeric arrays as bigint, and refuses a fractional numeric instead of rounding it', async () => {
    const row = await store.get<{ a: number[]; b: (bigint | null)[] }>(
      sql`SELECT ARRAY[9007199254740991, -1, NULL]::int8[] AS a, ARRAY[12345678901234567890, NULL]::numeric[] AS b`,
    );
    expect(row).toEqual({ a: [9007199254740991, -1, null], b: [12345678901234567890n, null] });
    await expect(store.get(sql`SELECT ARRAY[9007199254740993]::int8[] AS a`)).rejects.toThrow(RangeError);
    await expect(store.get(sql`SELECT 1.5::numeric AS x`)).rejects.toThrow(/numeric 1\.5, which is not an integer/);
    expect(await store.get(sql`SELECT 7::int4 AS x`)).toEqual({ x: 7 });
  });

  it('sends a bigint parameter exactly', async () => {
    const big = 9007199254740993n; // 2^53 + 1: Number() would make it 2^53
    const row = await store.get<{ x: string; t: string }>(
      sql`SELECT (${big}::int8 + 1)::text AS x, ${big}::int8::text AS t`,
    );
    expect(row).toEqual({ x: '9007199254740994', t: '9007199254740993' });
    await store.run(sql`CREATE TABLE ids (id bigint PRIMARY KEY)`);
    await store.run(sql`INSERT INTO ids VALUES (${-9223372036854775808n}), (${9223372036854775807n})`);
    const all = await store.all<{ id: string }>(sql`SELECT id::text AS id FROM ids ORDER BY id`);
    expect(all.map((r) => r.id)).toEqual(['-9223372036854775808', '9223372036854775807']);
  });

  it('toSafeNumber converts within ±(2^53 − 1) and throws beyond', () => {
    expect(toSafeNumber(9007199254740991n)).toBe(9007199254740991);
    expect(toSafeNumber(-9007199254740991n)).toBe(-9007199254740991);
    expect(toSafeNumber(1_000_000_000_000_000n)).toBe(1e15);
    expect(() => toSafeNumber(9007199254740992n)).toThrow(RangeError);
    expect(() => toSafeNumber(-9007199254740992n)).toThrow(/outside ±\(2\^53 − 1\)/);
  });

  it('leaves the global pg type parsers alone', async () => {
    const pg = (await import('pg')).default;
    expect(pg.types.getTypeParser(20, 'text')('5')).toBe('5');
  });
});

describe('transactions', () => {
  it('commits what fn did, and rolls it all back when fn throws', async () => {
    await store.run(sql`CREATE TABLE t1 (n int)`);
    await store.transaction(async (tx) => {
      await tx.run(sql`INSERT INTO t1 VALUES (1)`);
    });
    await expect(
      store.transaction(async (tx) => {
        await tx.run(sql`INSERT INTO t1 VALUES (2)`);
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    expect(await store.all(sql`SELECT n FROM t1`)).toEqual([{ n: 1 }]);
  });

  it('reports the rows a statement changed', async () => {
    await store.run(sql`CREATE TABLE t2 (n int)`);
    expect(await store.run(sql`INSERT INTO t2 SELECT generate_series(1, 5)`)).toEqual({ changes: 5 });
    expect(await store.run(sql`UPDATE t2 SET n = n + 1 WHERE n > ${3}`)).toEqual({ changes: 2 });
    expect(await store.run(sql`DELETE FROM t2 WHERE n = ${100}`)).toEqual({ changes: 0 });
  });

  it('reads rows as arrays with values(), on the pool and inside a transaction', async () => {
    await store.run(sql`CREATE TABLE t_values (id int, name text)`);
    await store.run(sql`INSERT INTO t_values VALUES (${1}, ${'a'}), (${2}, ${'b'})`);
    const list = sql`SELECT id, name FROM t_values ORDER BY id`;
    expect(await store.values<[number, string]>(list)).toEqual([
      [1, 'a'],
      [2, 'b'],
    ]);
    expect(await store.all(list)).toEqual([
      { id: 1, name: 'a' },
      { id: 2, name: 'b' },
    ]);
    expect(await store.transaction((tx) => tx.values(sql`SELECT name, id FROM t_values WHERE id = ${2}`))).toEqual([
      ['b', 2],
    ]);
  });

  it('runs a SERIALIZABLE transaction again after a serialization failure: both effects are kept', async () => {
    await store.run(sql`CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL)`);
    await store.run(sql`INSERT INTO acct VALUES (1, 0)`);
    // Both read the balance before either writes; each then writes what it read plus 10.
    let reads = 0;
    let bothRead!: () => void;
    const barrier = new Promise<void>((r) => (bothRead = r));
    const runs = { a: 0, b: 0 };
    const add = (who: 'a' | 'b') =>
      store.transaction(
        async (tx) => {
          runs[who]++;
          const row = await tx.get<{ balance: number }>(sql`SELECT balance FROM acct WHERE id = 1`);
          if (runs[who] === 1) {
            if (++reads === 2) bothRead();
            await barrier;
          }
          await tx.run(sql`UPDATE acct SET balance = ${(row?.balance ?? 0) + 10} WHERE id = 1`);
        },
        { isolation: 'serializable' },
      );
    await Promise.all([add('a'), add('b')]);
    expect(runs.a + runs.b).toBe(3); // one of them ran twice
    expect(await store.get(sql`SELECT balance FROM acct WHERE id = 1`)).toEqual({ balance: 20 });
  });

  it('without retries, the same conflict fails with 40001 (the retry is what saves it)', async () => {
    await store.run(sql`CREATE TABLE acct2 (id int PRIMARY KEY, balance bigint NOT NULL)`);
    await store.run(sql`INSERT INTO acct2 VALUES (1, 0)`);
    let reads = 0;
    let bothRead!: () => void;
    const barrier = new Promise<void>((r) => (bothRead = r));
    const add = () =>
      store.transaction(
        async (tx) => {
          const row = await tx.get<{ balance: number }>(sql`SELECT balance FROM acct2 WHERE id = 1`);
          if (++reads === 2) bothRead();
          await barrier;
          await tx.run(sql`UPDATE acct2 SET balance = ${(row?.balance ?? 0) + 10} WHERE id = 1`);
        },
        { isolation: 'serializable', maxAttempts: 1 },
      );
    const results = await Promise.allSettled([add(), add()]);
    const failed = results.filter((r) => r.status === 'rejected');
    expect(failed).toHaveLength(1);
    expect((failed[0] as PromiseRejectedResult).reason).toMatchObject({ code: '40001' });
  });

  it('runs a transaction again after a deadlock', async () => {
    await store.run(sql`CREATE TABLE pair (id int PRIMARY KEY, n int NOT NULL)`);
    await store.run(sql`INSERT INTO pair VALUES (1, 0), (2, 0)`);
    let locked = 0;
    let bothLocked!: () => void;
    const barrier = new Promise<void>((r) => (bothLocked = r));
    let runs = 0;
    // Opposite lock orders: PostgreSQL picks one as the deadlock's victim (after deadlock_timeout, 1 s).
    const bump = (first: number, second: number) =>
      store.transaction(async (tx) => {
        runs++;
        await tx.run(sql`UPDATE pair SET n = n + 1 WHERE id = ${first}`);
        if (locked < 2 && ++locked === 2) bothLocked();
        await barrier;
        await tx.run(sql`UPDATE pair SET n = n + 1 WHERE id = ${second}`);
      });
    await Promise.all([bump(1, 2), bump(2, 1)]);
    expect(runs).toBe(3);
    expect(await store.all(sql`SELECT id, n FROM pair ORDER BY id`)).toEqual([
      { id: 1, n: 2 },
      { id: 2, n: 2 },
    ]);
  });

  it('refuses a statement on a transaction that has ended', async () => {
    let leaked: Parameters<Parameters<PgStore['transaction']>[0]>[0] | undefined;
    await store.transaction(async (tx) => {
      leaked = tx;
    });
    await expect(leaked!.get(sql`SELECT 1`)).rejects.toThrow(/transaction has ended/);
  });
});

describe('advisory locks', () => {
  it('makes a second holder of the same key wait until the first commits', async () => {
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let firstIn!: () => void;
    const firstHolds = new Promise<void>((r) => (firstIn = r));
    const first = store.withAdvisoryXactLock(0x6d736764n, async () => {
      order.push('first in');
      firstIn();
      await gate;
      order.push('first out');
    });
    await firstHolds;
    const second = store.withAdvisoryXactLock(0x6d736764n, async () => {
      order.push('second in');
    });
    // Another key is not held up.
    await store.withAdvisoryXactLock(7n, async () => {
      order.push('other key');
    });
    await sleep(300);
    expect(order).toEqual(['first in', 'other key']);
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['first in', 'other key', 'first out', 'second in']);
  });
});

describe('LISTEN', () => {
  it('delivers a NOTIFY sent inside a transaction only at its COMMIT', async () => {
    const got: string[] = [];
    const unlisten = await store.listen('msgd_wakeup', (p) => got.push(p));
    await store.transaction(async (tx) => {
      await tx.run(sql`SELECT pg_notify('msgd_wakeup', 'in tx')`);
      await sleep(300);
      expect(got).toEqual([]);
    });
    await waitFor(() => got.length > 0);
    expect(got).toEqual(['in tx']);
    // Rolled back: never delivered.
    await store
      .transaction(async (tx) => {
        await tx.run(sql`SELECT pg_notify('msgd_wakeup', 'rolled back')`);
        throw new Error('abort');
      })
      .catch(() => {});
    await store.run(sql`SELECT pg_notify('msgd_wakeup', 'after')`);
    await waitFor(() => got.length > 1);
    expect(got).toEqual(['in tx', 'after']);
    await unlisten();
    await store.run(sql`SELECT pg_notify('msgd_wakeup', 'unheard')`);
    await sleep(200);
    expect(got).toEqual(['in tx', 'after']);
  });
});

describe('when PostgreSQL cannot be reached', () => {
  let closedPort: number;
  beforeAll(async () => {
    const srv = createServer().listen(0, '127.0.0.1');
    await once(srv, 'listening');
    closedPort = (srv.address() as { port: number }).port;
    srv.close();
    await once(srv, 'close');
  });

  const secret = 'Sup3r-Secr3t-pw';

  it('queries fail as storage-unavailable, naming the URL with the password masked', async () => {
    const url = `postgres://msgd:${secret}@127.0.0.1:${closedPort}/msgd?password=${secret}-too&sslmode=disable`;
    const down = openPg(url, { logger });
    try {
      const err = await down.get(sql`SELECT 1`).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageUnavailableError);
      const e = err as StorageUnavailableError;
      expect(e.reason).toBe('ECONNREFUSED');
      expect(e.message).toBe(
        `PostgreSQL at postgres://msgd:***@127.0.0.1:${closedPort}/msgd?password=***&sslmode=disable is unavailable: connection refused (is the server running, and on that host and port?)`,
      );
      expect(`${e.message} ${e.stack} ${JSON.stringify(e)}`).not.toContain(secret);
      const txErr = await down.transaction(async () => 1).catch((x: unknown) => x);
      expect(txErr).toBeInstanceOf(StorageUnavailableError);
      const listenErr = await down.listen('x', () => {}).catch((x: unknown) => x);
      expect(listenErr).toBeInstanceOf(StorageUnavailableError);
      expect(String((listenErr as Error).message)).not.toContain(secret);
    } finally {
      await down.close();
    }
  });

  it('is answered by the HTTP layer as 503 storage_unavailable with Retry-After, as on SQLite', async () => {
    const down = openPg(`postgres://msgd:${secret}@127.0.0.1:${closedPort}/msgd`, { logger });
    const app = Fastify();
    app.setErrorHandler(errorHandler);
    app.post('/send', async () => {
      await down.transaction((tx) => tx.run(sql`INSERT INTO nowhere VALUES (1)`));
      return { ok: true };
    });
    try {
      const address = await app.listen({ port: 0, host: '127.0.0.1' });
      const res = await fetch(`${address}/send`, { method: 'POST' });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('30');
      const body = await res.json();
      expect(body).toEqual({
        error: {
          code: 'storage_unavailable',
          message: 'msgd cannot reach its database right now; nothing of this request was kept: try again later',
          details: [],
        },
      });
    } finally {
      await app.close();
      await down.close();
    }
  });

  it('connectPg fails with one line naming the URL and the reason', async () => {
    const refused = await connectPg(`postgres://msgd:${secret}@127.0.0.1:${closedPort}/msgd`, { logger }).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(PgConnectError);
    expect((refused as PgConnectError).reason).toBe('refused');
    expect((refused as Error).message).toBe(
      `cannot use PostgreSQL at postgres://msgd:***@127.0.0.1:${closedPort}/msgd: connection refused (is the server running, and on that host and port?)`,
    );

    const wrongPassword = new URL(db.url);
    wrongPassword.password = secret;
    const auth = (await connectPg(wrongPassword.toString(), { logger }).catch((e: unknown) => e)) as PgConnectError;
    expect(auth.reason).toBe('auth_failed');
    expect(auth.message).toMatch(
      /^cannot use PostgreSQL at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/t_.* authentication failed/,
    );
    expect(auth.message).not.toContain(secret);
    expect(auth.message).not.toContain('\n');

    const unknown = (await connectPg(databaseUrl(db.url, 'no_such_db'), { logger }).catch(
      (e: unknown) => e,
    )) as PgConnectError;
    expect(unknown.reason).toBe('unknown_database');
    expect(unknown.message).toMatch(/\/no_such_db: database "no_such_db" does not exist$/);
    expect(unknown.message).not.toContain(new URL(db.url).password);

    // A server that accepts the connection and never answers.
    const silent = createServer(() => {}).listen(0, '127.0.0.1');
    await once(silent, 'listening');
    try {
      const port = (silent.address() as { port: number }).port;
      const slow = (await connectPg(`postgres://msgd:${secret}@127.0.0.1:${port}/msgd`, {
        logger,
        connectTimeoutMs: 300,
      }).catch((e: unknown) => e)) as PgConnectError;
      expect(slow.reason).toBe('timeout');
      expect(slow.message).toBe(
        `cannot use PostgreSQL at postgres://msgd:***@127.0.0.1:${port}/msgd: no answer within 300 ms`,
      );
    } finally {
      silent.close();
    }

    const ok = await connectPg(db.url, { logger });
    expect(await ok.get(sql`SELECT 1 AS one`)).toEqual({ one: 1 });
    await ok.close();
  });

  it('connectPg says how to fix a URL pg cannot read, naming it with the password masked', async () => {
    const url = `postgres://msgd:Zm9v/${secret}+@127.0.0.1:${closedPort}/msgd`;
    const bad = (await connectPg(url, { logger }).catch((e: unknown) => e)) as PgConnectError;
    expect(bad).toBeInstanceOf(PgConnectError);
    expect(bad.reason).toBe('invalid_url');
    expect(bad.message).toBe(
      `cannot use PostgreSQL at postgres://msgd:***@127.0.0.1:${closedPort}/msgd: the URL cannot be read: percent-encode any / ? # @ : % or space in the user name or password (encodeURIComponent), or give the password in PGPASSWORD`,
    );
  });
});

describe('redactUrl', () => {
  it('masks the password in the userinfo and in password= parameters, and nothing else', () => {
    expect(redactUrl('postgres://u:p%40ss@db.example:5432/msgd?sslmode=require')).toBe(
      'postgres://u:***@db.example:5432/msgd?sslmode=require',
    );
    expect(redactUrl('postgresql://u@db/msgd?PassWord=x&application_name=a')).toBe(
      'postgresql://u@db/msgd?PassWord=***&application_name=a',
    );
    expect(redactUrl('postgres://db.example/msgd')).toBe('postgres://db.example/msgd');
    expect(redactUrl("host=db user=u password='it\\'s secret' dbname=msgd")).toBe(
      'host=db user=u password=*** dbname=msgd',
    );
    expect(redactUrl('host=db password=s3cret dbname=msgd')).toBe('host=db password=*** dbname=msgd');
    expect(redactUrl('postgres://u:s3cret@[bad')).toBe('postgres://u:***@[bad');
  });

  it('masks a password written without percent-encoding, whatever characters it holds', () => {
    // openssl rand -base64 gives `/` and `+`; a URL parser takes `u:12/` as a host and a port.
    expect(redactUrl('postgres://msgd:Zm9v/YmFy+cXV4@db.example:5432/msgd')).toBe(
      'postgres://msgd:***@db.example:5432/msgd',
    );
    expect(redactUrl('postgres://u:12/34@db.example/msgd')).toBe('postgres://u:***@db.example/msgd');
    expect(redactUrl('postgres://u:p@ss#w?rd@h1:5432,h2:5432/msgd')).toBe('postgres://u:***@h1:5432,h2:5432/msgd');
    // A user name with `@` (as Azure's user@server): the password is still all masked.
    expect(redactUrl('postgres://me@corp:s3cret@db.example/msgd')).toBe('postgres://me@corp:***@db.example/msgd');
    expect(redactUrl('postgres://u@db.example:5432/msgd')).toBe('postgres://u@db.example:5432/msgd');
  });

  it("masks the client key's passphrase (sslpassword) and a password parameter with an encoded name", () => {
    expect(redactUrl('postgres://u@db/msgd?sslmode=verify-full&sslpassword=keypass')).toBe(
      'postgres://u@db/msgd?sslmode=verify-full&sslpassword=***',
    );
    expect(redactUrl('postgres://u@db/msgd?pass%77ord=s3cret')).toBe('postgres://u@db/msgd?pass%77ord=***');
    expect(redactUrl('host=db sslpassword=keypass dbname=msgd')).toBe('host=db sslpassword=*** dbname=msgd');
    expect(redactUrl('postgres://u@db/msgd?password=two words&application_name=a')).toBe(
      'postgres://u@db/msgd?password=***&application_name=a',
    );
  });
});
