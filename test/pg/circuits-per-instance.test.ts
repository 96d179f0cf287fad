import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { sql } from '../../src/db/sql.js';
import { DISPATCH_JOB } from '../../src/jobs/dispatch.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { twilioGateway } from '../helpers/gateways.js';
import { waitFor } from '../helpers/wait.js';
import { migratedDatabase } from './helpers.js';

// The gateways' circuit breakers are each msgd's own (docs/scale.md): with two msgd on one
// PostgreSQL, a failing gateway is stopped by each after its own consecutiveFailures calls, so
// the provider takes up to twice that many before neither calls it.

const FAILURES = 3;
const db = migratedDatabase();
let twilio: TwilioFake;
const instances: Runtime[] = [];

beforeAll(async () => {
  twilio = await startTwilioFake();
  const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex'), MSGD_DEMO: 'false' };
  const config = loadConfig({
    env,
    overrides: {
      // One call at a time per instance: each circuit opens after exactly FAILURES calls.
      'jobs.concurrency': 1,
      'jobs.backoffBaseMs': 20,
      'jobs.backoffCapMs': 1000,
      'jobs.maxAttempts': 100,
      'dispatch.circuitBreaker.consecutiveFailures': FAILURES,
      'dispatch.circuitBreaker.failureRate': 0,
      'dispatch.circuitBreaker.openMs': 600_000,
    },
  });
  for (let i = 0; i < 2; i++) instances.push(await createRuntime({ config, logger: pino({ level: 'silent' }), env }));
});
afterAll(async () => {
  for (const rt of instances) await rt.close();
  await twilio?.close();
});

describe('circuit breakers with two instances', () => {
  it('each instance opens its own circuit after its own failures', async () => {
    const rt = instances[0]!;
    const now = Date.now();
    await rt.ctx.store.run(
      sql`INSERT INTO partners (id, slug, name, status, balance, created_at, updated_at)
          VALUES ('prt_cb', 'cb', 'cb', 'active', 100000000, ${now}, ${now})`,
    );
    const gw = await twilioGateway(rt.ctx, 'prt_cb', twilio);
    twilio.failFor('+14155550123', { kind: 'status', status: 503 });
    await rt.ctx.store.transaction(async (tx) => {
      for (let i = 0; i < 10; i++) {
        const id = `msg_cb_${i}`;
        await tx.run(
          sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content,
                status, price, segments, created_at, updated_at)
              VALUES (${id}, 'prt_cb', 'outbound', 'sms', ${gw.channel.id}, ${gw.gateway.id}, '+14155550123', ${gw.from},
                ${JSON.stringify({ kind: 'text', text: `cb ${i}` })}, 'queued', 7500, 1, ${now}, ${now})`,
        );
        await rt.queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: id } });
      }
    });
    for (const r of instances) r.worker.start();
    const gatewayId = gw.gateway.id;
    await waitFor(() => instances.every((r) => r.breakers.state(gatewayId) === 'open'), 'both circuits open', 20_000);
    // Neither calls the gateway any more; together they called it once per failure each.
    const calls = twilio.requests.length;
    await new Promise((r) => setTimeout(r, 1_000));
    expect(twilio.requests.length).toBe(calls);
    expect(calls).toBe(2 * FAILURES);
  });
});
