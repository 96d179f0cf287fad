import { afterEach, describe, expect, it } from 'vitest';
import { STATUS_COUNTS_TTL_MS, statusCounts } from '../../src/core/message-stats.js';
import { storeOutboundSmsIn } from '../helpers/outbound.js';
import { connect, setupPartner } from '../helpers/server.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The console's 24-hour counts by status: counted from the messages of the window, and reused
// for a short while so an Overview drawn again and again does not recount a busy day each time.

let t: StoreCtx;
afterEach(() => t?.close());

describe('outbound messages by status', () => {
  it('counts the last day, then reuses the counts until they are STATUS_COUNTS_TTL_MS old', async () => {
    t = await openStoreCtx({ clock: true });
    const p = await setupPartner(t.ctx, { balance: '1000' });
    const { gateway, channel } = await connect(t.ctx, p.partnerId, { kind: 'sandbox' }, 'sms', '+15550001111');
    const send = () =>
      t.ctx.store.transaction((tx) =>
        storeOutboundSmsIn(tx, t.ctx, p.partnerId, { id: channel.id, gateway_id: gateway.id, sender: '+15550001111' }),
      );
    await send();
    await send();
    expect(await statusCounts(t.ctx, p.partnerId, 24)).toEqual([{ status: 'queued', n: 2 }]);

    await send();
    t.clock.now += STATUS_COUNTS_TTL_MS - 1;
    expect(await statusCounts(t.ctx, p.partnerId, 24)).toEqual([{ status: 'queued', n: 2 }]);
    t.clock.now += 1;
    expect(await statusCounts(t.ctx, p.partnerId, 24)).toEqual([{ status: 'queued', n: 3 }]);

    // A day later the window has moved past all three.
    t.clock.now += 86_400_000 + STATUS_COUNTS_TTL_MS;
    expect(await statusCounts(t.ctx, p.partnerId, 24)).toEqual([]);
  });
});
