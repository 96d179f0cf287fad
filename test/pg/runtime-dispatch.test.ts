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

// msgd's runtime on PostgreSQL dispatches: its worker runs message.dispatch through the store,
// and the parts that still need SQLite are named without dispatch among them.

const db = migratedDatabase();
let twilio: TwilioFake;
let rt: Runtime;
beforeAll(async () => {
  twilio = await startTwilioFake();
  const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex'), MSGD_DEMO: 'false' };
  rt = await createRuntime({ config: loadConfig({ env }), logger: pino({ level: 'silent' }), env });
});
afterAll(async () => {
  await rt?.close();
  await twilio?.close();
});

describe('msgd on PostgreSQL', () => {
  it('dispatches a queued message through its gateway', async () => {
    expect(rt.sqliteOnly).not.toContain('circuits');
    expect(rt.worker.registeredKinds()).toContain(DISPATCH_JOB);
    const now = Date.now();
    await rt.ctx.store.run(
      sql`INSERT INTO partners (id, slug, name, status, balance, created_at, updated_at)
          VALUES ('prt_pg', 'pg', 'pg', 'active', 10000, ${now}, ${now})`,
    );
    const gw = await twilioGateway(rt.ctx, 'prt_pg', twilio);
    await rt.ctx.store.run(
      sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content, status,
            price, segments, created_at, updated_at)
          VALUES ('msg_pg', 'prt_pg', 'outbound', 'sms', ${gw.channel.id}, ${gw.gateway.id}, '+14155550123', ${gw.from},
            '{"kind":"text","text":"from postgres"}', 'queued', 7500, 1, ${now}, ${now})`,
    );
    await rt.ctx.store.transaction((tx) =>
      rt.queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: 'msg_pg' } }),
    );
    rt.worker.start();
    await waitFor(
      async () =>
        (await rt.ctx.store.get<{ status: string }>(sql`SELECT status FROM messages WHERE id = 'msg_pg'`))?.status ===
        'sent',
      'the message sent',
      10_000,
    );
    expect(twilio.requests.map((r) => r.body.Body)).toEqual(['from postgres']);
  });
});
