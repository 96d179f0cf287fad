import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../src/core/audit.js';
import {
  activatePartner,
  createPartner,
  findPartner,
  getPartner,
  listPartners,
  lowBalancePartners,
  partnerJson,
  readPartner,
  setCreditLimit,
  setPartnerLimits,
  suspendPartner,
} from '../../src/core/partners.js';
import { MAX_MONEY } from '../../src/lib/money.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The partner admin on both stores: creating and finding a partner, suspending and activating it,
// its credit limit and limits, the low-balance list.

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

  it('creates a partner, read back by slug and id, with its audit entry', async () => {
    t.clock.now = 7_000;
    const p = await createPartner(
      t.ctx,
      { slug: 'globex', name: '  Globex Corp ', currency: 'eur', creditLimit: 5_000_000 },
      'op',
    );
    expect(p.id).toMatch(/^prt_/);
    const read = await getPartner(t.ctx, 'globex');
    expect(read).toEqual(p);
    expect(partnerJson(read)).toMatchObject({
      slug: 'globex',
      name: 'Globex Corp',
      status: 'active',
      currency: 'EUR',
      balance: { micro: 0, currency: 'EUR' },
      credit_limit: { micro: 5_000_000, currency: 'EUR' },
      available: { micro: 5_000_000, currency: 'EUR' },
      created_at: new Date(7_000).toISOString(),
    });
    expect((await findPartner(t.ctx, p.id))?.slug).toBe('globex');
    expect(await findPartner(t.ctx, 'initech')).toBeUndefined();
    await expect(getPartner(t.ctx, 'initech')).rejects.toMatchObject({ code: 'not_found' });
    expect((await listAudit(t.ctx, 1))[0]).toMatchObject({
      action: 'partner.create',
      target_id: p.id,
      details: { slug: 'globex', name: 'Globex Corp', currency: 'EUR' },
    });
  });

  it('refuses a slug taken, also by a creation racing for it, and bad input, writing nothing', async () => {
    await expect(createPartner(t.ctx, { slug: 'acme', name: 'Acme again' }, 'op')).rejects.toMatchObject({
      code: 'conflict',
      message: 'a partner with slug "acme" already exists',
    });
    const raced = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) => createPartner(t.ctx, { slug: 'initech', name: `Initech ${i}` }, 'op')),
    );
    expect(raced.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of raced.filter((x) => x.status === 'rejected')) expect(r.reason).toMatchObject({ code: 'conflict' });
    await expect(createPartner(t.ctx, { slug: 'A', name: '' }, 'op')).rejects.toMatchObject({
      code: 'invalid_request',
      details: [
        { field: 'slug', message: expect.any(String) },
        { field: 'name', message: expect.any(String) },
      ],
    });
    expect((await listPartners(t.ctx)).map((p) => p.slug)).toEqual(['acme', 'initech']);
    expect((await listAudit(t.ctx)).filter((a) => a.action === 'partner.create')).toHaveLength(1);
  });

  it('lists partners by slug', async () => {
    for (const slug of ['zeta', 'beta', 'b-2', 'omega']) await createPartner(t.ctx, { slug, name: slug }, 'op');
    expect((await listPartners(t.ctx)).map((p) => p.slug)).toEqual(['acme', 'b-2', 'beta', 'omega', 'zeta']);
  });

  it('sets the rate limit and low-balance threshold, each kept when left out', async () => {
    let p = await setPartnerLimits(t.ctx, 'acme', { rateLimitPerMinute: 120 }, 'op');
    expect([p.rate_limit_per_minute, p.low_balance_threshold]).toEqual([120, null]);
    p = await setPartnerLimits(t.ctx, 'acme', { lowBalanceThreshold: 2_000_000 }, 'op');
    expect([p.rate_limit_per_minute, p.low_balance_threshold]).toEqual([120, 2_000_000]);
    p = await setPartnerLimits(t.ctx, 'acme', { rateLimitPerMinute: null }, 'op');
    expect([p.rate_limit_per_minute, p.low_balance_threshold]).toEqual([null, 2_000_000]);
    await expect(setPartnerLimits(t.ctx, 'acme', { rateLimitPerMinute: 0 }, 'op')).rejects.toMatchObject({
      code: 'invalid_request',
    });
    await expect(setPartnerLimits(t.ctx, 'nobody', { rateLimitPerMinute: 5 }, 'op')).rejects.toMatchObject({
      code: 'not_found',
    });
    expect((await readPartner(t.ctx.store, 'acme')).low_balance_threshold).toBe(2_000_000);
  });

  it('lists active partners below their threshold, furthest below first', async () => {
    await insertPartner(t, { id: 'prt_b', slug: 'bolt' });
    await insertPartner(t, { id: 'prt_c', slug: 'coda', status: 'suspended' });
    await t.exec(`UPDATE partners SET balance = 500000 WHERE id = 'prt_a'`);
    await t.exec(`UPDATE partners SET balance = -100000, low_balance_threshold = 0 WHERE id = 'prt_b'`);
    await t.exec(`UPDATE partners SET balance = -900000000 WHERE id = 'prt_c'`);
    await setPartnerLimits(t.ctx, 'acme', { lowBalanceThreshold: 2_000_000 }, 'op');
    // bolt is 100,000 below its own threshold; acme 1,500,000 below its; coda is suspended.
    expect(await lowBalancePartners(t.ctx)).toEqual([
      { slug: 'acme', balance: 500_000, threshold: 2_000_000, currency: 'USD' },
      { slug: 'bolt', balance: -100_000, threshold: 0, currency: 'USD' },
    ]);
  });
});
