import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../src/core/audit.js';
import { addFallback, assignChannel, listChannels, removeFallback, unassignChannel } from '../../src/core/channels.js';
import {
  addGateway,
  gatewayNames,
  getGateway,
  listGateways,
  listGatewaySummaries,
  removeGateway,
  updateGateway,
} from '../../src/core/gateways.js';
import { listPrices, setPrice, unsetPrice } from '../../src/core/prices.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The operator's gateways, channels and prices on both stores: what is written is read back,
// refusals change nothing, lists come in their order.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await insertPartner(t, { id: 'prt_a', slug: 'acme' });
  await insertPartner(t, { id: 'prt_b', slug: 'globex' });
});
afterEach(() => t.close());

const sandbox = (name: string) => addGateway(t.ctx, { kind: 'sandbox', name, settings: {} }, 'op');

describe('gateways', () => {
  it('adds, lists by name, updates and removes; secrets only by name', async () => {
    t.clock.now = 1_000;
    const tw = await addGateway(
      t.ctx,
      { kind: 'twilio', name: 'tw', settings: { account_sid: 'AC1' }, secrets: { auth_token: 'tok-secret' } },
      'op',
    );
    const sb = await sandbox('a-sandbox');
    expect(tw).toMatchObject({ kind: 'twilio', name: 'tw', status: 'active', secret_names: ['auth_token'] });
    expect((await listGateways(t.ctx)).map((g) => g.name)).toEqual(['a-sandbox', 'tw']);
    expect(await listGatewaySummaries(t.ctx)).toEqual([
      { id: sb.id, name: 'a-sandbox', kind: 'sandbox', status: 'active' },
      { id: tw.id, name: 'tw', kind: 'twilio', status: 'active' },
    ]);
    expect((await gatewayNames(t.ctx)).get(tw.id)).toBe('tw');
    expect(JSON.stringify(await listGateways(t.ctx))).not.toContain('tok-secret');

    t.clock.now = 2_000;
    const after = await updateGateway(t.ctx, 'tw', { settings: { rate_per_second: 5 }, status: 'disabled' }, 'op');
    expect(after).toMatchObject({ status: 'disabled', updated_at: new Date(2_000).toISOString() });
    expect((await getGateway(t.ctx, tw.id)).settings).toMatchObject({ account_sid: 'AC1', rate_per_second: 5 });

    expect(await removeGateway(t.ctx, 'a-sandbox', 'op')).toMatchObject({ id: sb.id });
    expect((await listGateways(t.ctx)).map((g) => g.name)).toEqual(['tw']);
    expect((await listAudit(t.ctx, 10)).map((a) => a.action)).toEqual([
      'gateway.remove',
      'gateway.update',
      'gateway.add',
      'gateway.add',
    ]);
  });

  it('refuses a taken name, bad settings and an unknown gateway, changing nothing', async () => {
    await sandbox('sbx');
    await expect(sandbox('sbx')).rejects.toMatchObject({ code: 'conflict' });
    await expect(
      addGateway(t.ctx, { kind: 'sandbox', name: 'bad', settings: { nope: 1 } }, 'op'),
    ).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(updateGateway(t.ctx, 'missing', { status: 'disabled' }, 'op')).rejects.toMatchObject({
      code: 'not_found',
    });
    expect((await listGateways(t.ctx)).map((g) => g.name)).toEqual(['sbx']);
    expect(await listAudit(t.ctx, 10)).toHaveLength(1);
  });
});

describe('channels', () => {
  it('assigns, orders fallbacks, closes the gap, and refuses a sender another partner uses', async () => {
    const a = await sandbox('a');
    const b = await sandbox('b');
    const c = await sandbox('c');
    const primary = await assignChannel(
      t.ctx,
      { partner: 'acme', gateway: a.id, type: 'sms', sender: '+15550001111' },
      'op',
    );
    expect(primary).toMatchObject({ position: 0, status: 'active', sender: '+15550001111' });
    await addFallback(t.ctx, { partner: 'acme', type: 'sms', gateway: 'b' }, 'op');
    await addFallback(t.ctx, { partner: 'acme', type: 'sms', gateway: 'c' }, 'op');
    const order = async () =>
      (await listChannels(t.ctx, { partner: 'acme' })).map((ch) => [ch.gateway_name, ch.position, ch.sender]);
    expect(await order()).toEqual([
      ['a', 0, '+15550001111'],
      ['b', 1, '+15550001111'],
      ['c', 2, '+15550001111'],
    ]);
    await expect(addFallback(t.ctx, { partner: 'acme', type: 'sms', gateway: 'b' }, 'op')).rejects.toMatchObject({
      code: 'conflict',
    });
    await expect(
      assignChannel(t.ctx, { partner: 'globex', gateway: b.id, type: 'sms', sender: '+15550001111' }, 'op'),
    ).rejects.toMatchObject({ code: 'conflict' });
    await expect(addFallback(t.ctx, { partner: 'acme', type: 'whatsapp', gateway: 'c' }, 'op')).rejects.toMatchObject({
      code: 'invalid_request',
    });

    await removeFallback(t.ctx, { partner: 'acme', type: 'sms', gateway: 'b' }, 'op');
    expect(await order()).toEqual([
      ['a', 0, '+15550001111'],
      ['c', 1, '+15550001111'],
    ]);
    await unassignChannel(t.ctx, { partner: 'acme', type: 'sms' }, 'op');
    expect(await order()).toEqual([['c', 0, '+15550001111']]);
    expect((await listChannels(t.ctx, { includeInactive: true })).length).toBe(3);
    await expect(removeGateway(t.ctx, c.id, 'op')).rejects.toMatchObject({ code: 'conflict' });
  });
});

describe('prices', () => {
  it('sets, replaces and unsets, listed with the partner and gateway they are for', async () => {
    const g = await sandbox('sbx');
    await setPrice(t.ctx, { channel: 'sms', amount: 7_500 }, 'op');
    await setPrice(t.ctx, { channel: 'sms', amount: 9_000, partner: 'acme' }, 'op');
    await setPrice(t.ctx, { channel: 'sms', amount: 8_000, partner: 'acme' }, 'op');
    await setPrice(t.ctx, { channel: 'email', amount: 100, gateway: 'sbx' }, 'op');
    await setPrice(t.ctx, { channel: 'whatsapp', amount: 50_000, category: 'marketing' }, 'op');
    const rows = (await listPrices(t.ctx)).map((p) => [
      p.channel_type,
      p.partner_slug,
      p.gateway_name,
      p.category,
      p.amount,
    ]);
    expect(rows).toEqual([
      ['email', null, 'sbx', '', 100],
      ['sms', null, null, '', 7_500],
      ['sms', 'acme', null, '', 8_000],
      ['whatsapp', null, null, 'marketing', 50_000],
    ]);
    expect((await listPrices(t.ctx, { partner: 'globex' })).map((p) => p.amount)).toEqual([100, 7_500, 50_000]);
    await expect(setPrice(t.ctx, { channel: 'sms', amount: -1 }, 'op')).rejects.toMatchObject({
      code: 'invalid_request',
    });
    await expect(unsetPrice(t.ctx, { channel: 'sms', partner: 'globex' }, 'op')).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(await unsetPrice(t.ctx, { channel: 'email', gateway: g.id }, 'op')).toMatchObject({ amount: 100 });
    expect((await listPrices(t.ctx)).length).toBe(3);
    expect((await listAudit(t.ctx, 1))[0]).toMatchObject({ action: 'price.unset' });
  });
});
