import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { GatewayBook } from '../../src/jobs/gateway-book.js';
import { JobQueue } from '../../src/queue/queue.js';
import { type IncomingWebhook, WEBHOOK_PROCESS_JOB, WebhookIntake } from '../../src/webhooks-in/intake.js';
import { openStoreCtx, type StoreCtx, testStore } from './helpers.js';

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
