import { afterEach, describe, expect, it } from 'vitest';
import { assignChannel } from '../../src/core/channels.js';
import { emitEvent } from '../../src/core/events.js';
import { addGateway } from '../../src/core/gateways.js';
import { topup } from '../../src/core/ledger.js';
import { messageHistory } from '../../src/core/messages.js';
import { storeOutboundSms } from '../helpers/server.js';
import { createPartner } from '../../src/core/partners.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';

let t: TestCtx;
afterEach(() => t?.close());

async function setup() {
  t = openTestCtx({ clock: true });
  const { ctx } = t;
  const p = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
  await topup(ctx, p.id, 10_000_000, 'funds', 'test');
  const gw = await addGateway(ctx, { kind: 'sandbox', name: 'sb', settings: {}, secrets: {} }, 'test');
  const ch = await assignChannel(ctx, { partner: p.id, gateway: gw.id, type: 'sms', sender: '+15017250604' }, 'test');
  const send = () =>
    ctx.db.sqlite.transaction(() => storeOutboundSms(ctx, p.id, { id: ch.id, gateway_id: gw.id, sender: ch.sender }))();
  return { ctx, partnerId: p.id, send };
}

describe('status history', () => {
  it("starts with 'queued' at the message's creation, derived rather than stored", async () => {
    const { ctx, send } = await setup();
    const m = send();
    const stored = ctx.db.sqlite
      .prepare('SELECT COUNT(*) AS n FROM message_status_history WHERE message_id = ?')
      .get(m.id) as { n: number };
    expect(stored.n).toBe(0);
    expect(messageHistory(ctx, m.id).map((h) => [h.status, h.occurred_at])).toEqual([['queued', m.created_at]]);
  });

  it("a database that stored the 'queued' row (written before) shows it once", async () => {
    const { ctx, send } = await setup();
    const m = send();
    ctx.db.sqlite
      .prepare(
        `INSERT INTO message_status_history (message_id, status, ignored, occurred_at, created_at) VALUES (?, 'queued', 0, ?, ?)`,
      )
      .run(m.id, m.created_at, m.created_at);
    expect(messageHistory(ctx, m.id).map((h) => h.status)).toEqual(['queued']);
  });
});

describe('outbox', () => {
  const fannedOut = (ctx: TestCtx['ctx'], id: string) =>
    (ctx.db.sqlite.prepare('SELECT fanned_out FROM events WHERE id = ?').get(id) as { fanned_out: number }).fanned_out;
  const endpoint = (ctx: TestCtx['ctx'], partnerId: string, events: string[] | null, status = 'enabled') =>
    ctx.db.sqlite
      .prepare(
        `INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, status, created_at, updated_at)
         VALUES (?, ?, 'https://example.com/hook', ?, 'sealed', ?, 0, 0)`,
      )
      .run(`wh_${Math.random().toString(36).slice(2)}`, partnerId, events && JSON.stringify(events), status);

  it('stores every event; one no enabled endpoint subscribes to is stored already fanned out (replayable)', async () => {
    const { ctx, partnerId } = await setup();
    const none = emitEvent(ctx, partnerId, 'message.sent', { message_id: 'msg_1' });
    expect(fannedOut(ctx, none.id)).toBe(1);

    endpoint(ctx, partnerId, ['message.delivered']);
    endpoint(ctx, partnerId, null, 'disabled');
    expect(fannedOut(ctx, emitEvent(ctx, partnerId, 'message.sent', { message_id: 'msg_2' }).id)).toBe(1);
    expect(fannedOut(ctx, emitEvent(ctx, partnerId, 'message.delivered', { message_id: 'msg_2' }).id)).toBe(0);

    endpoint(ctx, partnerId, null);
    expect(fannedOut(ctx, emitEvent(ctx, partnerId, 'message.sent', { message_id: 'msg_3' }).id)).toBe(0);
    const n = ctx.db.sqlite.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number };
    expect(n.n).toBe(4);
  });
});
