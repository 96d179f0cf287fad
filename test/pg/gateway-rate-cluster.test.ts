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

// Three msgd on one PostgreSQL dispatch one gateway's backlog: the provider receives no more
// than the gateway's rate, as from one msgd (at most 5 % over in any window of several
// seconds), and the messages in about the order they were accepted.

const RATE = 20;
const COUNT = 120;
const CONCURRENCY = 8;
const db = migratedDatabase();
let twilio: TwilioFake;
const instances: Runtime[] = [];

beforeAll(async () => {
  twilio = await startTwilioFake();
  const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex'), MSGD_DEMO: 'false' };
  // Small claims, so the three instances take turns on the backlog rather than one taking it all.
  const config = loadConfig({ env, overrides: { 'jobs.concurrency': CONCURRENCY, 'jobs.pollIntervalMs': 200 } });
  for (let i = 0; i < 3; i++) instances.push(await createRuntime({ config, logger: pino({ level: 'silent' }), env }));
});
afterAll(async () => {
  for (const rt of instances) await rt.close();
  await twilio?.close();
});

describe('a gateway rate across instances', () => {
  it(`three instances send a backlog at ${RATE}/s, in about the order accepted`, async () => {
    const rt = instances[0]!;
    const now = Date.now();
    await rt.ctx.store.run(
      sql`INSERT INTO partners (id, slug, name, status, balance, created_at, updated_at)
          VALUES ('prt_rate', 'rate', 'rate', 'active', 100000000, ${now}, ${now})`,
    );
    const gw = await twilioGateway(rt.ctx, 'prt_rate', twilio, { rate_per_second: RATE });
    await rt.ctx.store.transaction(async (tx) => {
      for (let i = 0; i < COUNT; i++) {
        const id = `msg_rate_${String(i).padStart(3, '0')}`;
        await tx.run(
          sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content,
                status, price, segments, created_at, updated_at)
              VALUES (${id}, 'prt_rate', 'outbound', 'sms', ${gw.channel.id}, ${gw.gateway.id}, '+14155550123', ${gw.from},
                ${JSON.stringify({ kind: 'text', text: `n${i}` })}, 'queued', 7500, 1, ${now + i}, ${now + i})`,
        );
        await rt.queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: id }, runAt: now + i });
      }
    });
    for (const r of instances) r.worker.start();
    await waitFor(() => twilio.requests.length >= COUNT, `${COUNT} sent`, 30_000);
    // Every instance sent some: the line was shared, not run by one of them.
    const claimed = instances.map((r) => r.worker.counters.claimed);
    for (const c of claimed) expect(c, `claims per instance ${claimed}`).toBeGreaterThan(0);

    const at = twilio.requests.map((r) => r.at);
    const gaps = at
      .slice(1)
      .map((t, i) => t - at[i]!)
      .join(',');
    // COUNT slots 1/RATE s apart: the last about (COUNT - 1) / RATE s after the first.
    expect(at[COUNT - 1]! - at[0]!, `gaps ${gaps}`).toBeGreaterThanOrEqual(((COUNT - 1) * 1000) / RATE - 150);
    // Any 5 s window holds at most the rate's share and 5 % (three unshared lines would send
    // the whole backlog at three times the rate).
    const windowMs = 5_000;
    const bound = Math.floor(((windowMs / 1000) * RATE * 105) / 100);
    for (let i = 0; i < at.length; i++) {
      const inWindow = at.filter((t) => t >= at[i]! && t < at[i]! + windowMs).length;
      expect(inWindow, `window from ${i}: gaps ${gaps}`).toBeLessThanOrEqual(bound);
    }
    // In the order accepted, as far as claims made at the same moment on several instances
    // allow: each gives out its places in its own order, and two such claims take turns on the
    // gateway's line. No message goes more than a few claims (of jobs.concurrency) from its turn.
    const order = twilio.requests.map((r) => Number(String(r.body.Body).slice(1)));
    const shown = order.join(',');
    expect([...order].sort((a, b) => a - b)).toEqual(Array.from({ length: COUNT }, (_, i) => i));
    order.forEach((n, pos) => expect(Math.abs(pos - n), `order ${shown}`).toBeLessThanOrEqual(3 * CONCURRENCY));
  });
});
