import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { readInstances } from '../../src/core/counter-store.js';
import { type PgLeader, startPgLeader } from '../../src/db/pg/leader.js';
import { createMetricsRegistry } from '../../src/http/metrics/index.js';
import { startHeartbeat } from '../../src/jobs/heartbeat.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { waitFor } from '../helpers/wait.js';
import { migratedDatabase, withClient } from './helpers.js';

// The leader among msgd instances sharing one PostgreSQL database: one session advisory lock,
// taken over within the documented bound (docs/scale.md, "The leader": 1 s after a leader stops
// or is killed) when the leader goes or its connection drops; and the gauges read from the
// database, which only the leader exports.

const db = migratedDatabase();
const logger = { warn: () => {}, info: () => {} };
/** The bound for a leader that stopped or was killed: one try of the lock (1 s), and a margin. */
const TAKEOVER_MS = 1_000 + 1_500;

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

async function leader(): Promise<PgLeader & { changes: boolean[] }> {
  const l = await startPgLeader(db.url, { logger });
  const changes: boolean[] = [];
  l.onChange((v) => changes.push(v));
  open.push(l);
  return Object.assign(l, { changes });
}

describe('the leader lock', () => {
  it('is held by one instance; when it closes, another takes it within the bound', async () => {
    const a = await leader();
    const b = await leader();
    expect(a.isLeader()).toBe(true);
    expect(b.isLeader()).toBe(false);
    const closedAt = Date.now();
    await a.close();
    expect(a.changes).toEqual([false]);
    await waitFor(() => b.isLeader(), 'the other instance to lead', TAKEOVER_MS);
    expect(Date.now() - closedAt).toBeLessThan(TAKEOVER_MS);
    expect(b.changes).toEqual([true]);
  });

  it("is given up when the leader's connection drops, and taken again within the bound", async () => {
    const a = await leader();
    const b = await leader();
    const pid = a.backendPid();
    expect(pid).not.toBeNull();
    // The server ends the leader's session (a restart, an administrator, a network cut seen by it).
    await withClient(db.url, (c) => c.query('SELECT pg_terminate_backend($1)', [pid]));
    await waitFor(() => a.changes.includes(false), 'the leader to step down', TAKEOVER_MS);
    // One of the two leads again, never both.
    await waitFor(() => a.isLeader() || b.isLeader(), 'a leader again', TAKEOVER_MS);
    expect(a.isLeader() && b.isLeader()).toBe(false);
  });
});

describe('two msgd runtimes on one database', () => {
  async function runtime(): Promise<Runtime> {
    const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex'), MSGD_DEMO: 'false' };
    const config = loadConfig({ env });
    const rt = await createRuntime({
      config: { ...config, metrics: { ...config.metrics, token: 'scrape' } },
      logger: pino({ level: 'silent' }),
      env,
    });
    open.push(rt);
    return rt;
  }
  const names = async (text: Promise<string>) =>
    (await text)
      .split('\n')
      .filter((l) => l.startsWith('# TYPE '))
      .map((l) => l.split(' ')[2]);
  const FROM_DB = ['msgd_jobs', 'msgd_partners_below_low_balance', 'msgd_webhook_endpoints'];

  it('only the leader exports the gauges read from the database; after it closes the other does, within the bound', async () => {
    const one = await runtime();
    const two = await runtime();
    const m1 = createMetricsRegistry({ rt: one });
    const m2 = createMetricsRegistry({ rt: two });
    expect(one.leader.isLeader()).toBe(true);
    expect(two.leader.isLeader()).toBe(false);
    const first = await names(m1.metrics());
    const second = await names(m2.metrics());
    for (const n of FROM_DB) {
      expect(first).toContain(n);
      expect(second).not.toContain(n);
    }
    // Both still say who they are.
    expect(second).toEqual(expect.arrayContaining(['msgd_ready', 'msgd_build_info', 'msgd_gateway_info']));

    // Their heartbeats: one row each, the leader marked.
    const hb1 = await startHeartbeat({
      ctx: one.ctx,
      counters: one.counters,
      version: 'a',
      logger: one.logger,
      leader: one.leader,
    });
    const hb2 = await startHeartbeat({
      ctx: two.ctx,
      counters: two.counters,
      version: 'b',
      logger: two.logger,
      leader: two.leader,
    });
    one.heartbeat = hb1;
    two.heartbeat = hb2;
    const all = await readInstances(two.ctx);
    expect(all.alive).toBe(2);
    expect(all.instances.filter((i) => i.leader).map((i) => i.id)).toEqual([hb1.id]);

    const closedAt = Date.now();
    open.splice(open.indexOf(one), 1);
    await one.close();
    await waitFor(
      async () => (await names(m2.metrics())).includes('msgd_jobs'),
      'the other runtime to export the database gauges',
      TAKEOVER_MS,
    );
    expect(Date.now() - closedAt).toBeLessThan(TAKEOVER_MS);
    for (const n of FROM_DB) expect(await names(m2.metrics())).toContain(n);
    // Its next beat says it leads; the closed one's row says stopped.
    await hb2.beat();
    const after = await readInstances(two.ctx);
    expect(after.instances.find((i) => i.id === hb2.id)).toMatchObject({ state: 'running', leader: true });
    expect(after.instances.find((i) => i.id === hb1.id)).toMatchObject({ state: 'stopped', leader: false });
  });
});
