import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listOperatorMessages } from '../../src/core/message-reads.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { idAt, message, partner } from './read-fixtures.js';

// The operator's message list across partners (msgctl messages list) on both stores.

const T0 = Date.UTC(2026, 0, 1);
const id = (n: number) => idAt('msg', T0 + n * 1000);

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
  await partner(t, 'p1');
  await partner(t, 'p2');
  const m = (n: number, p: string, status: string, uncertain = false) =>
    message(t, { id: id(n), partner: p, channel: 'sms', status, uncertain, at: T0 + n * 1000 });
  await m(1, 'p1', 'delivered');
  await m(2, 'p2', 'failed');
  await m(3, 'p1', 'bounced');
  await m(4, 'p1', 'sent', true);
  await m(5, 'p2', 'delivered', true);
});
afterEach(() => t.close());

const ids = async (f: Parameters<typeof listOperatorMessages>[1]) =>
  (await listOperatorMessages(t.ctx, f)).map((m) => m.id);

describe('the operator’s message list', () => {
  it('lists every partner’s messages newest first, filtered by partner, status, failure and doubt', async () => {
    expect(await ids({ limit: 10 })).toEqual([id(5), id(4), id(3), id(2), id(1)]);
    expect(await ids({ limit: 2 })).toEqual([id(5), id(4)]);
    expect(await ids({ partnerId: 'p1', limit: 10 })).toEqual([id(4), id(3), id(1)]);
    expect(await ids({ status: 'delivered', limit: 10 })).toEqual([id(5), id(1)]);
    expect(await ids({ failed: true, limit: 10 })).toEqual([id(3), id(2)]);
    expect(await ids({ uncertain: true, limit: 10 })).toEqual([id(5), id(4)]);
    expect(await ids({ partnerId: 'p2', uncertain: true, limit: 10 })).toEqual([id(5)]);
    const [row] = await listOperatorMessages(t.ctx, { partnerId: 'p1', status: 'sent', limit: 1 });
    expect(row).toMatchObject({
      id: id(4),
      partner_id: 'p1',
      dispatch_uncertain: 1,
      price: 7500,
      created_at: T0 + 4000,
    });
  });
});
