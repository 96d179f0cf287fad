import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPg, type PgStore } from '../../src/db/pg/store.js';
import { sql } from '../../src/db/sql.js';
import { runCli } from '../helpers/cli.js';
import { migratedDatabase } from './helpers.js';

// msgctl's views and actions on the job queue with msgd's database on PostgreSQL: counts,
// waiting and dead jobs, their retry and removal, and the release of held messages.

const KEY = randomBytes(32).toString('hex');
const db = migratedDatabase();
let store: PgStore;
let waiting: number;
let deadHook: number;
let deadOther: number;
beforeAll(async () => {
  store = openPg(db.url, { logger: pino({ level: 'silent' }), poolSize: 2 });
  const now = Date.now();
  const job = (kind: string, payload: unknown, state: string, runAt: number, error: string | null) =>
    store.get<{ id: number }>(
      sql`INSERT INTO jobs (kind, payload, state, priority, run_at, attempts, max_attempts, last_error, created_at, updated_at)
          VALUES (${kind}, ${JSON.stringify(payload)}, ${state}, 0, ${runAt}, ${state === 'dead' ? 3 : 1}, 3, ${error}, ${now}, ${now})
          RETURNING id`,
    );
  waiting = (await job('webhook.deliver', { d: 'dlv_wait', b: 0 }, 'retry', now + 600_000, 'HTTP 503'))!.id;
  deadHook = (await job('webhook.deliver', { d: 'dlv_dead', b: 0 }, 'dead', now, 'endpoint down'))!.id;
  deadOther = (await job('test.kind', { n: 1 }, 'dead', now, 'gave up'))!.id;
});
afterAll(async () => {
  await store?.close();
});

const msgctl = async (args: string[]) => {
  const r = await runCli([...args, '--json'], { env: { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY } });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
};

describe('msgctl on the queue in PostgreSQL', () => {
  it('jobs stats, list and dead read the queue', async () => {
    expect((await msgctl(['jobs', 'stats'])).data).toEqual([
      { kind: 'test.kind', state: 'dead', count: 1 },
      { kind: 'webhook.deliver', state: 'dead', count: 1 },
      { kind: 'webhook.deliver', state: 'retry', count: 1 },
    ]);
    expect((await msgctl(['jobs', 'list'])).data).toEqual([
      expect.objectContaining({ id: waiting, kind: 'webhook.deliver', state: 'retry', reason: 'HTTP 503' }),
    ]);
    expect((await msgctl(['jobs', 'dead'])).data.map((j: { id: number }) => j.id).sort()).toEqual(
      [deadHook, deadOther].sort(),
    );
  });

  it('jobs retry queues a dead job again; jobs delete removes one', async () => {
    expect(await msgctl(['jobs', 'retry', String(deadHook)])).toEqual({ retried: 1, skipped: [] });
    const removed = await msgctl(['jobs', 'delete', String(deadOther), '--yes']);
    expect(removed).toMatchObject({ deleted: 1 });
    const rows = await store.all<{ id: number; state: string }>(sql`SELECT id, state FROM jobs ORDER BY id`);
    expect(rows).toEqual([
      { id: waiting, state: 'retry' },
      { id: deadHook, state: 'available' },
    ]);
  });

  it('messages release-held answers on the database', async () => {
    expect(await msgctl(['messages', 'release-held'])).toEqual({ released: 0 });
  });
});
