import { afterEach, describe, expect, it } from 'vitest';
import { assignChannel } from '../../src/core/channels.js';
import type { CoreCtx } from '../../src/core/context.js';
import { emitEvent, emitEventIn, type EventType } from '../../src/core/events.js';
import { addGateway } from '../../src/core/gateways.js';
import { topup } from '../../src/core/ledger.js';
import { messageHistory, messageHistoryIn } from '../../src/core/messages.js';
import { createPartner } from '../../src/core/partners.js';
import { sql } from '../../src/db/sql.js';
import { outboundSms } from '../helpers/server.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// A message's status history and the events outbox, on both stores. Where SQLite's synchronous
// transactions still call the synchronous forms (messageHistory, emitEvent), those are checked
// too, beside the store forms both stores run.

let t: StoreCtx;
afterEach(() => t?.close());

async function setup() {
  t = await openStoreCtx({ clock: true });
  const { ctx } = t;
  const p = await createPartner(ctx, { slug: 'acme', name: 'Acme' }, 'test');
  await topup(ctx, p.id, 10_000_000, 'funds', 'test');
  const gw = await addGateway(ctx, { kind: 'sandbox', name: 'sb', settings: {}, secrets: {} }, 'test');
  const ch = await assignChannel(ctx, { partner: p.id, gateway: gw.id, type: 'sms', sender: '+15017250604' }, 'test');
  const send = () => outboundSms(ctx, p.id, { id: ch.id, gateway_id: gw.id, sender: ch.sender });
  return { ctx, partnerId: p.id, send };
}

/** The message's history in each form the store reads it with. */
async function histories(ctx: CoreCtx, id: string) {
  const forms = [await messageHistoryIn(ctx.store, id)];
  if (t.dialect === 'sqlite') forms.push(messageHistory(ctx, id));
  return forms;
}

describe('status history', () => {
  it("starts with 'queued' at the message's creation, derived rather than stored", async () => {
    const { ctx, send } = await setup();
    const m = await send();
    const stored = await ctx.store.get<{ n: number }>(
      sql`SELECT CAST(count(*) AS BIGINT) AS n FROM message_status_history WHERE message_id = ${m.id}`,
    );
    expect(stored!.n).toBe(0);
    for (const history of await histories(ctx, m.id))
      expect(history.map((h) => [h.status, h.occurred_at])).toEqual([['queued', m.created_at]]);
  });

  it("a database that stored the 'queued' row (written before) shows it once", async () => {
    const { ctx, send } = await setup();
    const m = await send();
    await ctx.store.run(
      sql`INSERT INTO message_status_history (message_id, status, ignored, occurred_at, created_at)
          VALUES (${m.id}, 'queued', 0, ${m.created_at}, ${m.created_at})`,
    );
    for (const history of await histories(ctx, m.id)) expect(history.map((h) => h.status)).toEqual(['queued']);
  });
});

describe('outbox', () => {
  const fannedOut = async (ctx: CoreCtx, id: string) =>
    (await ctx.store.get<{ fanned_out: number }>(sql`SELECT fanned_out FROM events WHERE id = ${id}`))!.fanned_out;
  const endpoint = (ctx: CoreCtx, partnerId: string, events: string[] | null, status = 'enabled') =>
    ctx.store.run(
      sql`INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, status, created_at, updated_at)
          VALUES (${`wh_${Math.random().toString(36).slice(2)}`}, ${partnerId}, 'https://example.com/hook',
                  ${events && JSON.stringify(events)}, 'sealed', ${status}, 0, 0)`,
    );

  it('stores every event; one no enabled endpoint subscribes to is stored already fanned out (replayable)', async () => {
    const { ctx, partnerId } = await setup();
    // Each check in each form that writes events on the store.
    type Emit = (type: EventType, data: Record<string, unknown>) => Promise<{ id: string }>;
    const forms: Emit[] = [(type, data) => emitEventIn(ctx.store, ctx, partnerId, type, data)];
    if (t.dialect === 'sqlite') forms.push(async (type, data) => emitEvent(ctx, partnerId, type, data));
    const fanned = async (type: EventType, data: Record<string, unknown>) => {
      const seen = [];
      for (const emit of forms) seen.push(await fannedOut(ctx, (await emit(type, data)).id));
      expect(new Set(seen).size, `${type} in each form`).toBe(1);
      return seen[0];
    };
    expect(await fanned('message.sent', { message_id: 'msg_1' })).toBe(1);

    await endpoint(ctx, partnerId, ['message.delivered']);
    await endpoint(ctx, partnerId, null, 'disabled');
    expect(await fanned('message.sent', { message_id: 'msg_2' })).toBe(1);
    expect(await fanned('message.delivered', { message_id: 'msg_2' })).toBe(0);

    await endpoint(ctx, partnerId, null);
    expect(await fanned('message.sent', { message_id: 'msg_3' })).toBe(0);
    const n = await ctx.store.get<{ n: number }>(sql`SELECT CAST(count(*) AS BIGINT) AS n FROM events`);
    expect(n!.n).toBe(4 * forms.length);
  });
});
