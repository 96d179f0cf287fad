import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  latestWebhookLog,
  listWebhookLog,
  newestWebhookLogId,
  pendingWebhookLogIds,
  readWebhookLog,
  settledWebhookLogs,
  webhookLogAfter,
  webhookLogByIds,
  webhookLogJson,
} from '../../src/core/webhook-log.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { idAt } from './read-fixtures.js';

// The provider webhook log as `msgctl webhooks log` (and --follow) and the console's live tail
// read it, on both stores.

const T0 = Date.UTC(2026, 0, 1);
const wh = (n: number) => idAt('wh', T0 + n * 1000);

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
  const add = (n: number, provider: string, verification: string, processing: string, body: string | null) =>
    t.ctx.store.run(
      sql`INSERT INTO provider_webhooks (id, provider, gateway_id, method, path, headers, body, verification, processing,
            received_at, processed_at)
          VALUES (${wh(n)}, ${provider}, ${provider === 'twilio' ? 'gw_t' : null}, 'POST', ${`/webhooks/${provider}`}, '{}',
            ${body === null ? null : Buffer.from(body)}, ${verification}, ${processing}, ${T0 + n * 1000}, NULL)`,
    );
  await add(1, 'twilio', 'ok', 'processed', 'a=1');
  await add(2, 'meta', 'failed', 'rejected', 'héllo');
  await add(3, 'twilio', 'ok', 'pending', 'b=2');
  await add(4, 'meta', 'ok', 'unroutable', null);
  await add(5, 'twilio', 'ok', 'processed', 'c=3');
});
afterEach(() => t.close());

const ids = (rows: { id: string }[]) => rows.map((r) => r.id);

describe('the webhook log', () => {
  it('lists oldest first, or the newest few, filtered by provider, gateway, failure and cursor', async () => {
    expect(ids(await listWebhookLog(t.ctx, { limit: 10 }))).toEqual([wh(1), wh(2), wh(3), wh(4), wh(5)]);
    expect(ids(await listWebhookLog(t.ctx, { limit: 2, latest: true }))).toEqual([wh(4), wh(5)]);
    expect(ids(await listWebhookLog(t.ctx, { limit: 2, afterId: wh(2) }))).toEqual([wh(3), wh(4)]);
    expect(ids(await listWebhookLog(t.ctx, { limit: 10, provider: 'meta' }))).toEqual([wh(2), wh(4)]);
    expect(ids(await listWebhookLog(t.ctx, { limit: 10, gatewayId: 'gw_t', latest: true }))).toEqual([
      wh(1),
      wh(3),
      wh(5),
    ]);
    expect(ids(await listWebhookLog(t.ctx, { limit: 10, failed: true }))).toEqual([wh(2), wh(4)]);
  });

  it('gives the body’s size without the body, or the body when asked', async () => {
    const [row] = await listWebhookLog(t.ctx, { limit: 1, afterId: wh(1) });
    expect(webhookLogJson(row)).toMatchObject({
      id: wh(2),
      verification: 'failed',
      processing: 'rejected',
      body_bytes: 6,
    });
    expect(webhookLogJson(row)).not.toHaveProperty('body');
    const [whole] = await listWebhookLog(t.ctx, { limit: 1, afterId: wh(1), withBody: true });
    expect(webhookLogJson(whole)).toMatchObject({ id: wh(2), body_bytes: 6, body: 'héllo', headers: {} });
    const [none] = await listWebhookLog(t.ctx, { limit: 1, afterId: wh(3) });
    expect(webhookLogJson(none).body_bytes).toBe(0);
  });

  it('follows: the newest id, the rows still pending, and which of them have settled', async () => {
    expect(await newestWebhookLogId(t.ctx)).toBe(wh(5));
    expect(await pendingWebhookLogIds(t.ctx, T0, wh(5))).toEqual([wh(3)]);
    expect(await pendingWebhookLogIds(t.ctx, T0 + 4000, wh(5))).toEqual([]);
    expect(await pendingWebhookLogIds(t.ctx, T0, wh(2))).toEqual([]);
    expect(await settledWebhookLogs(t.ctx, [])).toEqual([]);
    const settled = await settledWebhookLogs(t.ctx, [wh(5), wh(3), wh(1), 'wh_missing']);
    expect(settled.map((r) => [r.id, r.body_bytes])).toEqual([
      [wh(1), 3],
      [wh(5), 3],
    ]);
    await t.exec('DELETE FROM provider_webhooks');
    expect(await newestWebhookLogId(t.ctx)).toBeNull();
  });
});

describe('the console’s live tail', () => {
  it('reads the newest rows oldest first, then the rows after the last one seen, without their bodies', async () => {
    expect(ids(await latestWebhookLog(t.ctx, 3))).toEqual([wh(3), wh(4), wh(5)]);
    expect(ids(await latestWebhookLog(t.ctx, 10))).toEqual([wh(1), wh(2), wh(3), wh(4), wh(5)]);
    expect(ids(await webhookLogAfter(t.ctx, wh(2), 2))).toEqual([wh(3), wh(4)]);
    expect(await webhookLogAfter(t.ctx, wh(5), 10)).toEqual([]);
    const [two] = await webhookLogAfter(t.ctx, wh(1), 1);
    expect(two).toMatchObject({ id: wh(2), provider: 'meta', verification: 'failed', body_bytes: 6 });
    expect(two).not.toHaveProperty('body');
    expect(two).not.toHaveProperty('headers');
    expect((await latestWebhookLog(t.ctx, 2))[0]).toMatchObject({ id: wh(4), body_bytes: null });
  });

  it('reads again the rows still pending, by id, as they are now', async () => {
    expect(await webhookLogByIds(t.ctx, [])).toEqual([]);
    expect((await webhookLogByIds(t.ctx, [wh(3)]))[0]).toMatchObject({ id: wh(3), processing: 'pending' });
    await t.ctx.store.run(sql`UPDATE provider_webhooks SET processing = 'processed' WHERE id = ${wh(3)}`);
    const now = await webhookLogByIds(t.ctx, [wh(5), wh(3), 'wh_gone']);
    expect(now.map((r) => [r.id, r.processing])).toEqual([
      [wh(3), 'processed'],
      [wh(5), 'processed'],
    ]);
  });

  it('reads one whole row for the detail pane, body included', async () => {
    const r = await readWebhookLog(t.ctx, wh(2));
    expect(r?.body?.toString('utf8')).toBe('héllo');
    expect(r).toMatchObject({ provider: 'meta', headers: '{}', processing: 'rejected' });
    expect(await readWebhookLog(t.ctx, 'wh_gone')).toBeUndefined();
  });
});
