import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../src/core/audit.js';
import { activatePartner, partnerJson, readPartner, setCreditLimit, suspendPartner } from '../../src/core/partners.js';
import { MAX_MONEY } from '../../src/lib/money.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The partner admin on both stores: finding a partner, suspending and activating it, its credit limit.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await insertPartner(t, { id: 'prt_a', slug: 'acme', name: 'Acme' });
});
afterEach(() => t.close());

describe('partners', () => {
  it('finds a partner by id or slug', async () => {
    expect((await readPartner(t.ctx.store, 'acme')).id).toBe('prt_a');
    expect((await readPartner(t.ctx.store, 'prt_a')).slug).toBe('acme');
    await expect(readPartner(t.ctx.store, 'globex')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('suspends and activates, audited with the state it left', async () => {
    t.clock.now = 5_000;
    const suspended = await suspendPartner(t.ctx, 'acme', 'op');
    expect(partnerJson(suspended)).toMatchObject({ status: 'suspended', updated_at: new Date(5_000).toISOString() });
    expect((await activatePartner(t.ctx, 'prt_a', 'op')).status).toBe('active');
    expect((await listAudit(t.ctx)).map((a) => [a.action, a.details])).toEqual([
      ['partner.activate', { from: 'suspended' }],
      ['partner.suspend', { from: 'active' }],
    ]);
    await expect(suspendPartner(t.ctx, 'globex', 'op')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('sets the credit limit within its bounds, exactly at the largest', async () => {
    const p = await setCreditLimit(t.ctx, 'acme', MAX_MONEY, 'op');
    expect(p.credit_limit).toBe(MAX_MONEY);
    expect(partnerJson(p).available).toMatchObject({ micro: MAX_MONEY, currency: 'USD' });
    await expect(setCreditLimit(t.ctx, 'acme', MAX_MONEY + 1, 'op')).rejects.toMatchObject({
      code: 'invalid_request',
    });
    await expect(setCreditLimit(t.ctx, 'acme', -1, 'op')).rejects.toMatchObject({ code: 'invalid_request' });
    expect((await readPartner(t.ctx.store, 'acme')).credit_limit).toBe(MAX_MONEY);
    expect((await listAudit(t.ctx, 1))[0]).toMatchObject({
      action: 'partner.set_credit',
      details: { from: 0, to: MAX_MONEY },
    });
  });
});
