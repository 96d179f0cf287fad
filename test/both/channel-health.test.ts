import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HEALTH_WINDOW_MS, partnerChannels } from '../../src/core/channel-health.js';
import { statusCounts } from '../../src/core/message-stats.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { idAt, message, partner } from './read-fixtures.js';

// A partner's channels with the health of each (GET /v1/channels, the console) and the
// Overview's counts by status, on both stores.

const NOW = Date.UTC(2026, 0, 2, 12);

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  t.clock.now = NOW;
  await partner(t, 'p1');
  await partner(t, 'p2');
  await t.exec(`INSERT INTO gateways (id, kind, name, secrets, status, created_at, updated_at) VALUES
    ('gw_1', 'sandbox', 'one', '', 'active', 0, 0), ('gw_2', 'sandbox', 'two', '', 'disabled', 0, 0)`);
  await t.exec(`INSERT INTO channels (id, partner_id, gateway_id, type, sender, status, position, created_at, updated_at) VALUES
    ('ch_sms1', 'p1', 'gw_1', 'sms', '+15550000001', 'active', 0, 3, 0),
    ('ch_sms2', 'p1', 'gw_1', 'sms', '+15550000002', 'active', 1, 2, 0),
    ('ch_wa', 'p1', 'gw_2', 'whatsapp', '+15550000003', 'active', 0, 1, 0),
    ('ch_gone', 'p1', 'gw_1', 'sms', '+15550000004', 'removed', 2, 0, 0),
    ('ch_other', 'p2', 'gw_1', 'sms', '+15550000005', 'active', 0, 0, 0)`);
});
afterEach(() => t.close());

let n = 0;
const send = (channelId: string, status: string, ago: number, extra: { errorCode?: string; inbound?: boolean } = {}) =>
  message(t, {
    id: idAt('msg', NOW - ago, n++),
    partner: channelId === 'ch_other' ? 'p2' : 'p1',
    channel: channelId === 'ch_wa' ? 'whatsapp' : 'sms',
    channelId,
    status,
    direction: extra.inbound ? 'inbound' : 'outbound',
    errorCode: extra.errorCode ?? null,
    at: NOW - ago,
  });

describe('channel health', () => {
  it('lists the active channels by type and position, each judged by its recent sends', async () => {
    for (let i = 0; i < 5; i++) await send('ch_sms1', 'delivered', 60_000 + i);
    await send('ch_sms1', 'failed', 1000);
    await send('ch_sms1', 'queued', 500);
    // Outside the window, inbound, or another partner's: not counted.
    await send('ch_sms1', 'failed', HEALTH_WINDOW_MS + 1000);
    await send('ch_sms1', 'received', 1000, { inbound: true });
    await send('ch_other', 'failed', 1000);
    for (let i = 0; i < 3; i++) await send('ch_sms2', 'failed', 2000 + i);
    await send('ch_sms2', 'sending', 100, { errorCode: 'provider_timeout' });

    const rows = await partnerChannels(t.ctx, 'p1');
    expect(rows.map((r) => [r.id, r.role, r.status, r.health, r.recent])).toEqual([
      ['ch_sms1', 'primary', 'active', 'ok', { window_seconds: 900, accepted: 5, failed: 1, retrying: 0, queued: 1 }],
      [
        'ch_sms2',
        'fallback',
        'active',
        'down',
        { window_seconds: 900, accepted: 0, failed: 3, retrying: 1, queued: 0 },
      ],
      [
        'ch_wa',
        'primary',
        'disabled',
        'disabled',
        { window_seconds: 900, accepted: 0, failed: 0, retrying: 0, queued: 0 },
      ],
    ]);
    expect(rows[0]).toMatchObject({ type: 'sms', sender: '+15550000001', provider: 'sandbox', position: 0 });
    expect(rows[0].created_at).toBe(new Date(3).toISOString());
    expect((await partnerChannels(t.ctx, 'p2')).map((r) => [r.id, r.health])).toEqual([['ch_other', 'degraded']]);
  });
});

describe('status counts', () => {
  it('counts the last day’s outbound messages by status, most first, ties by status', async () => {
    for (let i = 0; i < 3; i++) await send('ch_sms1', 'delivered', 1000 + i);
    await send('ch_sms1', 'sent', 1000);
    await send('ch_sms1', 'failed', 1000);
    await send('ch_sms1', 'failed', 25 * 3_600_000);
    await send('ch_sms1', 'received', 1000, { inbound: true });
    await send('ch_other', 'queued', 1000);
    expect(await statusCounts(t.ctx, 'p1', 24)).toEqual([
      { status: 'delivered', n: 3 },
      { status: 'failed', n: 1 },
      { status: 'sent', n: 1 },
    ]);
    expect(await statusCounts(t.ctx, 'p2', 24)).toEqual([{ status: 'queued', n: 1 }]);
  });
});
