import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { migratedDatabase } from './helpers.js';

// Two msgd on one PostgreSQL: a job one enqueues is claimed by the other's worker at once, told
// by the enqueue's NOTIFY; without LISTEN (database.listen false, as behind PgBouncer in
// transaction mode) the other finds it by polling, within jobs.pollIntervalMs.

const db = migratedDatabase();
const masterKey = randomBytes(32).toString('hex');
const open: Runtime[] = [];

async function runtime(config: Record<string, unknown> = {}): Promise<Runtime> {
  const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: masterKey, MSGD_DEMO: 'false' };
  const rt = await createRuntime({
    config: loadConfig({ env, overrides: config }),
    logger: pino({ level: 'silent' }),
    env,
  });
  open.push(rt);
  return rt;
}

/** A worker of `rt` running test.ping jobs: resolves with the time its handler ran. */
function pinged(rt: Runtime): Promise<number> {
  return new Promise((resolve) => {
    rt.worker.register('test.ping', () => {
      resolve(Date.now());
      return { type: 'ok' };
    });
    rt.worker.start();
  });
}

let sender: Runtime;
beforeAll(async () => {
  sender = await runtime();
});
afterEach(async () => {
  for (const rt of open.splice(1)) await rt.close();
});
afterAll(async () => {
  for (const rt of open.splice(0)) await rt.close();
});

describe('wake-ups across instances', () => {
  it("another instance's enqueue is claimed at once, long before the poll", async () => {
    const worker = await runtime({ 'jobs.pollIntervalMs': 60_000 });
    const ran = pinged(worker);
    // The worker's first look (at start) found nothing: it now sleeps for the poll interval.
    await new Promise((r) => setTimeout(r, 500));
    const at = Date.now();
    await sender.ctx.store.transaction((tx) => sender.queue.enqueue(tx, { kind: 'test.ping', payload: { n: 1 } }));
    const took = (await ran) - at;
    expect(took).toBeLessThan(3_000);
  });

  it('without LISTEN, the poll still finds the job', async () => {
    const worker = await runtime({ 'database.listen': false, 'jobs.pollIntervalMs': 1_500 });
    const ran = pinged(worker);
    await new Promise((r) => setTimeout(r, 500));
    const at = Date.now();
    await sender.ctx.store.transaction((tx) => sender.queue.enqueue(tx, { kind: 'test.ping', payload: { n: 2 } }));
    const took = (await ran) - at;
    // Not told: it waited for its next look, which the poll interval bounds.
    expect(took).toBeGreaterThan(200);
    expect(took).toBeLessThan(1_500 + 2_000);
  });
});
