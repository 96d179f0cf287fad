import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPg, type PgStore, StorageUnavailableError } from '../../src/db/pg/store.js';
import { sql } from '../../src/db/sql.js';
import { freshDatabase, ownCluster } from './helpers.js';

// The server restarting under the connection layer (`pg_ctl restart -m immediate`: every
// backend killed at once, as in a crash, then the WAL replayed): what fails in the gap fails as
// storage-unavailable, nothing crashes the process, and the same store works again afterwards.

interface Line {
  obj: Record<string, unknown>;
  msg?: string;
}

const cluster = ownCluster();
const db = freshDatabase({ cluster });
const warned: Line[] = [];
const informed: Line[] = [];
const logger = {
  warn: (obj: object, msg?: string) => warned.push({ obj: obj as Line['obj'], msg }),
  info: (obj: object, msg?: string) => informed.push({ obj: obj as Line['obj'], msg }),
};
let store: PgStore;

beforeAll(async () => {
  store = openPg(db.url, { logger, poolSize: 4, connectTimeoutMs: 2_000 });
  await store.run(sql`CREATE TABLE hits (n bigint NOT NULL)`);
});
afterAll(() => store?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a server restart', () => {
  it('fails the queries in the gap as storage-unavailable, and the same pool works afterwards', async () => {
    // Fill the pool with idle connections: the restart kills them while they sit there.
    await Promise.all([1, 2, 3, 4].map(() => store.get(sql`SELECT pg_sleep(0.05)`)));
    warned.length = 0;
    const failures: unknown[] = [];
    let committed = 0;
    let running = true;
    const load = (async () => {
      for (let i = 1; running; i++) {
        try {
          await store.transaction((tx) => tx.run(sql`INSERT INTO hits VALUES (${i})`));
          committed++;
        } catch (err) {
          failures.push(err);
          await sleep(20);
        }
      }
    })();
    await sleep(200);
    await cluster.restart();
    running = false;
    await load;

    expect(failures.length).toBeGreaterThan(0);
    for (const f of failures) expect(f).toBeInstanceOf(StorageUnavailableError);
    const reasons = new Set(failures.map((f) => (f as StorageUnavailableError).reason));
    expect([...reasons].every((r) => /^(ECONNREFUSED|ECONNRESET|connection_lost|57P0[123]|08\w{3})$/.test(r))).toBe(
      true,
    );
    // The idle connections' deaths were logged, not thrown: the process is still here.
    expect(warned.some((l) => /idle connection failed/.test(l.msg ?? ''))).toBe(true);
    expect(JSON.stringify(warned)).not.toContain(new URL(db.url).password);

    // Straight after the restart, without a new pool.
    expect(await store.get(sql`SELECT 1 AS one`)).toEqual({ one: 1 });
    await store.transaction((tx) => tx.run(sql`INSERT INTO hits VALUES (0)`));
    // Every commit that was answered is there (a lost COMMIT answer can add one more, never fewer).
    const row = await store.get<{ n: number }>(sql`SELECT count(*) AS n FROM hits`);
    expect(row!.n).toBeGreaterThanOrEqual(committed + 1);
    expect(committed).toBeGreaterThan(0);
  });

  it('leaves LISTEN working: the listener reconnects by itself', async () => {
    const got: string[] = [];
    const unlisten = await store.listen('msgd_wakeup', (p) => got.push(p));
    await store.run(sql`SELECT pg_notify('msgd_wakeup', 'before')`);
    await waitFor(() => got.includes('before'));
    warned.length = 0;
    informed.length = 0;

    await cluster.restart();
    // Notifications sent before the listener is back are lost (it is a wake-up, not a queue):
    // send until one arrives.
    const until = Date.now() + 20_000;
    let sent = 0;
    while (!got.includes(`after ${sent}`)) {
      if (Date.now() > until) throw new Error(`the listener did not come back; got ${JSON.stringify(got)}`);
      sent++;
      await store.run(sql`SELECT pg_notify('msgd_wakeup', ${`after ${sent}`})`).catch(() => {});
      await sleep(100);
    }
    expect(warned.some((l) => /LISTEN connection was lost/.test(l.msg ?? ''))).toBe(true);
    expect(informed.some((l) => /LISTEN connection is back/.test(l.msg ?? ''))).toBe(true);
    await unlisten();
  });
});

async function waitFor(check: () => boolean, ms = 5_000) {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await sleep(20);
  }
}
