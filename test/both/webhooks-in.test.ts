import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { markDeletedIn } from '../../src/core/message-status.js';
import { sql } from '../../src/db/sql.js';
import { GatewayBook } from '../../src/jobs/gateway-book.js';
import { JobQueue } from '../../src/queue/queue.js';
import { type IncomingWebhook, WEBHOOK_PROCESS_JOB, WebhookIntake } from '../../src/webhooks-in/intake.js';
import { openStoreCtx, type StoreCtx, testStore } from './helpers.js';
import { idAt, message, partner } from './read-fixtures.js';

// Webhook intake on either store: what arrives is stored in the store's group commit, the
// webhooks of one turn in one batch; a refused webhook is stored too, and queues nothing.

let t: StoreCtx;
let intake: WebhookIntake;
beforeEach(async () => {
  t = await openStoreCtx();
  const queue = new JobQueue(testStore === 'sqlite' ? t.ctx.db : t.ctx.store);
  intake = new WebhookIntake({ ctx: t.ctx, config: t.ctx.config, queue, book: new GatewayBook(t.ctx) });
});
afterEach(() => t.close());

function incoming(body: unknown, headers: Record<string, string> = {}): IncomingWebhook {
  const raw = Buffer.from(JSON.stringify(body));
  return {
    method: 'POST',
    path: '/webhooks/sandbox',
    url: 'http://127.0.0.1/webhooks/sandbox',
    headers: { 'content-type': 'application/json', ...headers },
    raw,
  };
}

type Stored = { id: string; provider: string; verification: string; processing: string; body: Buffer | null };
const stored = () =>
  t.ctx.store.all<Stored>(
    sql`SELECT id, provider, verification, processing, body FROM provider_webhooks ORDER BY received_at, id`,
  );

describe('webhook intake on the store', () => {
  it('stores the webhooks of one turn in one batch, refused ones included, and queues none of those', async () => {
    const answers = await Promise.all([
      intake.receive(incoming({ hello: 'world' })),
      // A sandbox body without its signature header: refused at the door, stored as failed.
      intake.receive(
        incoming({ object: 'msgd_sandbox', events: [{ id: 'e1', message_id: 'm1', status: 'delivered' }] }),
      ),
      intake.tooLarge({ method: 'POST', path: '/webhooks/sandbox', url: 'http://x/', headers: {} }, 10),
    ]);
    expect(answers.map((a) => a.status)).toEqual([400, 401, 413]);
    expect(intake.stats).toMatchObject({ batches: 1, items: 1 });
    const rows = await stored();
    expect(rows.map((r) => r.id).sort()).toEqual(answers.map((a) => a.id).sort());
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(answers[0].id)).toMatchObject({ provider: 'unknown', processing: 'rejected' });
    expect(Buffer.from(byId.get(answers[0].id)!.body!).toString()).toBe('{"hello":"world"}');
    expect(byId.get(answers[2].id)).toMatchObject({ processing: 'rejected', body: null });
    const jobs = await t.ctx.store.all(sql`SELECT id FROM jobs WHERE kind = ${WEBHOOK_PROCESS_JOB}`);
    expect(jobs).toEqual([]);
  });

  it('a webhook stored in a later turn goes into a batch of its own', async () => {
    await intake.receive(incoming({ a: 1 }));
    await intake.receive(incoming({ b: 2 }));
    expect(intake.stats).toMatchObject({ batches: 2 });
    expect(await stored()).toHaveLength(2);
  });
});

describe('a message its customer unsent', () => {
  it('is marked deleted and redacted, its received event emptied, and message.deleted emitted once', async () => {
    const born = Date.parse('2026-11-27T07:00:00.000Z');
    const id = idAt('msg', born);
    await partner(t, 'p1');
    await message(t, { id, partner: 'p1', channel: 'messenger', direction: 'inbound', status: 'received', at: born });
    const evt = idAt('evt', born + 5);
    const received = { id: evt, event: 'message.received', message_id: id, body: 'secret', media: [{ url: 'u' }] };
    await t.exec(`INSERT INTO events (id, partner_id, type, payload, fanned_out, created_at)
      VALUES ('${evt}', 'p1', 'message.received', '${JSON.stringify(received)}', 1, ${born})`);
    const target = {
      id,
      partner_id: 'p1',
      channel_type: 'messenger' as const,
      from: '+15550002222',
      to: '+15550001111',
      conversation_id: null,
      provider_message_id: 'mid.1',
    };
    const at = born + 60_000;
    expect(await t.ctx.store.transaction((tx) => markDeletedIn(tx, t.ctx, target, at))).toBe(true);
    // Told again (a provider repeats itself): nothing more happens.
    expect(await t.ctx.store.transaction((tx) => markDeletedIn(tx, t.ctx, target, at + 1))).toBe(false);

    const m = await t.ctx.store.get<{ content: string; deleted_at: number }>(
      sql`SELECT content, deleted_at FROM messages WHERE id = ${id}`,
    );
    expect(m!.deleted_at).toBe(at);
    const content = JSON.parse(m!.content);
    expect(content).toMatchObject({ kind: 'redacted', was: 'text' });
    const ev = await t.ctx.store.get<{ payload: string }>(sql`SELECT payload FROM events WHERE id = ${evt}`);
    expect(JSON.parse(ev!.payload)).toEqual({ ...received, body: '', media: [], content });
    const deleted = await t.ctx.store.all<{ payload: string }>(
      sql`SELECT payload FROM events WHERE type = 'message.deleted' ORDER BY id`,
    );
    expect(deleted.map((d) => JSON.parse(d.payload))).toEqual([
      expect.objectContaining({ message_id: id, channel: 'messenger', deleted_at: new Date(at).toISOString() }),
    ]);
  });
});
