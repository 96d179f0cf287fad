import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { openStore } from '../../src/db/open-store.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, type TlsFiles } from '../helpers/webhook-receiver.js';
import { attemptRows, deliveryRows, inbound, world, type World } from './helpers.js';

let tls: TlsFiles;
let w: World;
let ep: { id: string };

beforeAll(async () => {
  tls = makeCert();
  w = await world({}, { tls });
  ep = await w.register();
});
afterAll(async () => {
  await w.close();
  tls.cleanup();
});

describe('the outbox', () => {
  it('an event committed by another process (no in-process signal) is fanned out by the sweep', async () => {
    // A store of its own on msgd's data (another process's connection): no in-process signal.
    const other = await openStore(w.server.rt.config, { env: w.server.storeEnv, create: false, migrate: false });
    try {
      const id = 'evt_01kxyz0000000000000000000a';
      const payload = JSON.stringify({
        id,
        event: 'message.received',
        created_at: new Date().toISOString(),
        channel: 'sms',
        from: '+1',
        body: 'x',
      });
      await other.store.run(
        sql`INSERT INTO events (id, partner_id, type, payload, fanned_out, created_at)
            VALUES (${id}, ${w.partner.partnerId}, 'message.received', ${payload}, 0, ${Date.now()})`,
      );
      const r = await waitFor(() => w.receiver.received.find((x) => x.id === id), 'swept event delivered', 5000);
      expect(r.raw.toString()).toBe(payload);
      expect(r.verified).toBe(true);
    } finally {
      await other.close();
    }
  });

  it('fans out each event once, however often it is woken', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 20; i++)
      ids.push((await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550500', `n${i}`)).eventId);
    await Promise.all([1, 2, 3, 4, 5].map(() => w.server.rt.webhooksOut.fanout.runOnce()));
    await waitFor(() => ids.every((id) => w.receiver.delivered.includes(id)), 'all delivered', 5000);
    const rows = (await deliveryRows(w.server.ctx, ep.id)).filter((d) => ids.includes(d.event_id));
    expect(rows).toHaveLength(20);
    for (const id of ids) expect(w.receiver.seen.get(id)).toBe(1);
  });

  it('retention removes old attempts, finished deliveries and their events, never what is pending', async () => {
    const task = w.server.rt.maintenanceTasks.find((t) => t.name === 'webhooks-out-retention')!;
    expect(task).toBeTruthy();
    const old = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550501', 'old')).eventId;
    await waitFor(
      async () => (await deliveryRows(w.server.ctx, ep.id)).find((d) => d.event_id === old)?.status === 'succeeded',
      'delivered',
      5000,
    );
    const d = (await deliveryRows(w.server.ctx, ep.id)).find((x) => x.event_id === old);
    const store = w.server.ctx.store;
    const DAYS_40 = 40 * 86_400_000;
    // Age everything by 40 days: ids carry their time, so rewrite them as well.
    const past = (id: string, prefix: string) => `${prefix}_000000${id.slice(prefix.length + 7)}`;
    const oldEvent = past(old, 'evt');
    const oldDelivery = past(d.id, 'dlv');
    await store.run(sql`UPDATE events SET id = ${oldEvent}, created_at = created_at - ${DAYS_40} WHERE id = ${old}`);
    await store.run(sql`UPDATE webhook_deliveries SET id = ${oldDelivery}, event_id = ${oldEvent} WHERE id = ${d.id}`);
    await store.run(
      sql`UPDATE webhook_attempts SET delivery_id = ${oldDelivery}, created_at = created_at - ${DAYS_40}
          WHERE delivery_id = ${d.id}`,
    );
    // An equally old delivery still pending keeps its event.
    w.receiver.behave({ kind: 'status', status: 500 });
    const pending = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550502', 'pending')).eventId;
    await waitFor(
      async () => ((await deliveryRows(w.server.ctx, ep.id)).find((x) => x.event_id === pending)?.attempts ?? 0) >= 1,
      'attempted',
      5000,
    );
    await store.run(sql`UPDATE webhook_deliveries SET status = 'pending' WHERE event_id = ${pending}`);
    const oldPending = past(pending, 'evt');
    await store.run(sql`UPDATE events SET id = ${oldPending} WHERE id = ${pending}`);
    await store.run(sql`UPDATE webhook_deliveries SET event_id = ${oldPending} WHERE event_id = ${pending}`);

    const summary = (await task.run(w.server.rt)) as Record<string, number>;
    expect(summary.attempts).toBeGreaterThanOrEqual(1);
    expect(summary.deliveries).toBeGreaterThanOrEqual(1);
    const count = (q: ReturnType<typeof sql>) => store.get<{ n: number }>(q);
    expect(await count(sql`SELECT COUNT(*) AS n FROM events WHERE id = ${oldEvent}`)).toEqual({ n: 0 });
    expect(await count(sql`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE id = ${oldDelivery}`)).toEqual({ n: 0 });
    expect(await attemptRows(w.server.ctx, oldDelivery)).toEqual([]);
    expect(await count(sql`SELECT COUNT(*) AS n FROM events WHERE id = ${oldPending}`)).toEqual({ n: 1 });
    w.receiver.behave({ kind: 'ok' });
  });
});
