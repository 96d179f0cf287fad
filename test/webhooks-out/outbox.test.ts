import Database from 'better-sqlite3';
import { pinConnection } from '../../src/db/pin.js';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
    const db = pinConnection(new Database(join(w.server.dataDir, 'msgd.db')));
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
      db.prepare(
        'INSERT INTO events (id, partner_id, type, payload, fanned_out, created_at) VALUES (?, ?, ?, ?, 0, ?)',
      ).run(id, w.partner.partnerId, 'message.received', payload, Date.now());
      const r = await waitFor(() => w.receiver.received.find((x) => x.id === id), 'swept event delivered', 5000);
      expect(r.raw.toString()).toBe(payload);
      expect(r.verified).toBe(true);
    } finally {
      db.close();
    }
  });

  it('fans out each event once, however often it is woken', async () => {
    const ids = Array.from(
      { length: 20 },
      (_, i) => inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550500', `n${i}`).eventId,
    );
    await Promise.all([1, 2, 3, 4, 5].map(() => w.server.rt.webhooksOut.fanout.runOnce()));
    await waitFor(() => ids.every((id) => w.receiver.delivered.includes(id)), 'all delivered', 5000);
    const rows = deliveryRows(w.server.ctx, ep.id).filter((d) => ids.includes(d.event_id));
    expect(rows).toHaveLength(20);
    for (const id of ids) expect(w.receiver.seen.get(id)).toBe(1);
  });

  it('retention removes old attempts, finished deliveries and their events, never what is pending', async () => {
    const task = w.server.rt.maintenanceTasks.find((t) => t.name === 'webhooks-out-retention')!;
    expect(task).toBeTruthy();
    const old = inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550501', 'old').eventId;
    await waitFor(
      () => deliveryRows(w.server.ctx, ep.id).find((d) => d.event_id === old)?.status === 'succeeded',
      'delivered',
      5000,
    );
    const d = deliveryRows(w.server.ctx, ep.id).find((x) => x.event_id === old);
    const db = w.server.ctx.db.sqlite;
    // Age everything by 40 days: ids carry their time, so rewrite them as well.
    const past = (id: string, prefix: string) => `${prefix}_000000${id.slice(prefix.length + 7)}`;
    const oldEvent = past(old, 'evt');
    const oldDelivery = past(d.id, 'dlv');
    db.prepare('UPDATE events SET id = ?, created_at = created_at - ? WHERE id = ?').run(
      oldEvent,
      40 * 86_400_000,
      old,
    );
    db.prepare('UPDATE webhook_deliveries SET id = ?, event_id = ? WHERE id = ?').run(oldDelivery, oldEvent, d.id);
    db.prepare('UPDATE webhook_attempts SET delivery_id = ?, created_at = created_at - ? WHERE delivery_id = ?').run(
      oldDelivery,
      40 * 86_400_000,
      d.id,
    );
    // An equally old delivery still pending keeps its event.
    w.receiver.behave({ kind: 'status', status: 500 });
    const pending = inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550502', 'pending').eventId;
    await waitFor(
      () => (deliveryRows(w.server.ctx, ep.id).find((x) => x.event_id === pending)?.attempts ?? 0) >= 1,
      'attempted',
      5000,
    );
    db.prepare(`UPDATE webhook_deliveries SET status = 'pending' WHERE event_id = ?`).run(pending);
    const oldPending = past(pending, 'evt');
    db.prepare('UPDATE events SET id = ? WHERE id = ?').run(oldPending, pending);
    db.prepare('UPDATE webhook_deliveries SET event_id = ? WHERE event_id = ?').run(oldPending, pending);

    const summary = (await task.run(w.server.rt)) as Record<string, number>;
    expect(summary.attempts).toBeGreaterThanOrEqual(1);
    expect(summary.deliveries).toBeGreaterThanOrEqual(1);
    expect(db.prepare('SELECT COUNT(*) AS n FROM events WHERE id = ?').get(oldEvent)).toEqual({ n: 0 });
    expect(db.prepare('SELECT COUNT(*) AS n FROM webhook_deliveries WHERE id = ?').get(oldDelivery)).toEqual({ n: 0 });
    expect(attemptRows(w.server.ctx, oldDelivery)).toEqual([]);
    expect(db.prepare('SELECT COUNT(*) AS n FROM events WHERE id = ?').get(oldPending)).toEqual({ n: 1 });
    w.receiver.behave({ kind: 'ok' });
  });
});
