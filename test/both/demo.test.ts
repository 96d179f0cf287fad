import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listChannels } from '../../src/core/channels.js';
import { maybeSeedDemo } from '../../src/core/demo.js';
import { verifyLedger } from '../../src/core/ledger.js';
import { getPartner, partnerJson } from '../../src/core/partners.js';
import { listPrices } from '../../src/core/prices.js';
import { TokenAuthenticator } from '../../src/core/tokens.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The demo seed on both stores: a first start gets a working sandbox partner, once.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
});
afterEach(() => t.close());

describe('maybeSeedDemo', () => {
  it('creates a demo partner with credit, a channel per type, an SMS price and a working token, once', async () => {
    const seed = await maybeSeedDemo(t.ctx);
    expect(seed).toMatchObject({ partnerSlug: 'demo', gatewayName: 'sandbox' });
    const p = await getPartner(t.ctx, 'demo');
    expect(partnerJson(p)).toMatchObject({ status: 'active', balance: { micro: 10_000_000, currency: 'USD' } });
    expect((await listChannels(t.ctx, { partner: 'demo' })).map((c) => [c.type, c.gateway_name]).sort()).toEqual([
      ['email', 'sandbox'],
      ['instagram', 'sandbox'],
      ['messenger', 'sandbox'],
      ['sms', 'sandbox'],
      ['whatsapp', 'sandbox'],
    ]);
    expect((await listPrices(t.ctx, { partner: 'demo' })).map((r) => [r.channel_type, r.amount])).toEqual([
      ['sms', 7_500],
    ]);
    expect(await new TokenAuthenticator(t.ctx).authenticate(seed!.token)).toMatchObject({
      ok: true,
      principal: { partnerId: p.id, scopes: ['*'] },
    });
    expect(await verifyLedger(t.ctx)).toMatchObject({ ok: true, partners: 1 });
    // Seeded once per store.
    expect(await maybeSeedDemo(t.ctx)).toBeNull();
  });

  it('seeds nothing where the operator has created partners', async () => {
    await insertPartner(t, { id: 'prt_a', slug: 'acme' });
    expect(await maybeSeedDemo(t.ctx)).toBeNull();
    await expect(getPartner(t.ctx, 'demo')).rejects.toMatchObject({ code: 'not_found' });
  });
});
