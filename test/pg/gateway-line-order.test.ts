import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { sql } from '../../src/db/sql.js';
import { DISPATCH_JOB } from '../../src/jobs/dispatch.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { twilioGateway } from '../helpers/gateways.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { migratedDatabase, withClient } from './helpers.js';

// A gateway's line on PostgreSQL keeps the order of its places whichever claim gave them: a
// claim that waited for the line's row (held by another instance's claim) gives its places
// later in the line, and they fall due after the places given before them.

const RATE = 20;
const db = migratedDatabase();
let twilio: TwilioFake;
let rt: Runtime;

beforeAll(async () => {
  twilio = await startTwilioFake();
  const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex'), MSGD_DEMO: 'false' };
  const config = loadConfig({ env, overrides: { 'jobs.concurrency': 32 } });
  rt = await createRuntime({ config, logger: pino({ level: 'silent' }), env });
});
afterAll(async () => {
  await rt?.close();
  await twilio?.close();
});

describe('a gateway line on PostgreSQL', () => {
  it('a place given by a claim that waited for the line goes after the places given before it', async () => {
    const now = Date.now();
    await rt.ctx.store.run(
      sql`INSERT INTO partners (id, slug, name, status, balance, created_at, updated_at)
          VALUES ('prt_order', 'order', 'order', 'active', 100000000, ${now}, ${now})`,
    );
    const gw = await twilioGateway(rt.ctx, 'prt_order', twilio, { rate_per_second: RATE });
    const accept = async (i: number) => {
      const id = `msg_order_${String(i).padStart(3, '0')}`;
      await rt.ctx.store.transaction(async (tx) => {
        await tx.run(
          sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content,
                status, price, segments, created_at, updated_at)
              VALUES (${id}, 'prt_order', 'outbound', 'sms', ${gw.channel.id}, ${gw.gateway.id}, '+14155550123', ${gw.from},
                ${JSON.stringify({ kind: 'text', text: `n${i}` })}, 'queued', 7500, 1, ${now + i}, ${now + i})`,
        );
        await rt.queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: id }, runAt: now + i });
      });
      return id;
    };
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await accept(i));
    rt.worker.start();
    // One claim takes the 20: the first few go within the inline wait, the rest take places
    // 50 ms apart, up to about 1 s ahead.
    const placed = () =>
      rt.ctx.store
        .get<{ n: number }>(sql`SELECT count(*) AS n FROM gateway_places WHERE gateway_id = ${gw.gateway.id}`)
        .then((r) => Number(r!.n));
    await waitFor(async () => (await placed()) >= 10, 'places given', 5_000, 2);
    // Another instance's claim holds the line for 200 ms; the next message's claim waits for it.
    await withClient(db.url, async (c) => {
      await c.query('BEGIN');
      await c.query('SELECT 1 FROM gateway_lines WHERE gateway_id = $1 FOR UPDATE', [gw.gateway.id]);
      ids.push(await accept(20));
      await sleep(200);
      await c.query('COMMIT');
    });
    const sent = () =>
      rt.ctx.store.all<{ id: string; sent_at: number }>(
        sql`SELECT id, sent_at FROM messages WHERE partner_id = 'prt_order' AND status = 'sent'`,
      );
    await waitFor(async () => (await sent()).length === ids.length, `${ids.length} sent`, 15_000);
    const rows = await sent();
    const sentAt = new Map(rows.map((r) => [r.id, Number(r.sent_at)]));
    // In the order accepted as msgd handed them over (sent_at): the last one, whose place is
    // the last, goes last, not ahead of places given before its claim.
    const byHandover = [...ids].sort((a, b) => sentAt.get(a)! - sentAt.get(b)!);
    expect(byHandover.map((id) => ids.indexOf(id))).toEqual(ids.map((_, i) => i));
    expect(twilio.requests.map((r) => r.body.Body).sort()).toEqual(ids.map((_, i) => `n${i}`).sort());
  });
});
