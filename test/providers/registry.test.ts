import { describe, expect, it } from 'vitest';
import type { GatewayKind } from '../../src/core/context.js';
import { gatewayKinds } from '../../src/providers/kinds.js';
import { closeAdapters, getAdapter } from '../../src/providers/registry.js';
import { makeCtx, makeGw, makeMsg, newDispatcher } from './helpers.js';

describe('provider registry', () => {
  it('has an adapter for every gateway kind, each reporting its own kind', () => {
    expect(gatewayKinds.specs.map((s) => s.kind)).toEqual([
      'whatsapp_cloud',
      'meta_messenger',
      'meta_instagram',
      'twilio',
      'sendgrid',
      'smtp',
      'sandbox',
    ]);
    for (const { kind } of gatewayKinds.specs) {
      expect(getAdapter(kind).kind).toBe(kind);
      expect(gatewayKinds.get(kind).kind).toBe(kind);
    }
  });

  it('throws for an unknown kind', () => {
    expect(() => getAdapter('carrier_pigeon' as GatewayKind)).toThrow(/carrier_pigeon/);
    expect(gatewayKinds.has('carrier_pigeon')).toBe(false);
    // Not a key of a plain object either: a kind named after Object.prototype is unknown.
    expect(gatewayKinds.has('toString')).toBe(false);
    expect(() => gatewayKinds.get('carrier_pigeon' as GatewayKind)).toThrow(/unknown gateway kind "carrier_pigeon"/);
  });

  it('sandbox accepts anything with a fresh sbx_ id', async () => {
    const d = newDispatcher();
    const sandbox = getAdapter('sandbox');
    const gw = makeGw('sandbox', { delivery_delay_ms: 0 }, {});
    const a = await sandbox.send(
      gw,
      makeMsg('sms', '+15550001111', '+15550002222', { kind: 'text', text: 'x' }),
      makeCtx(d),
    );
    const b = await sandbox.send(
      gw,
      makeMsg('email', 'a@example.com', 'b@example.com', { kind: 'email', subject: 's' }),
      makeCtx(d),
    );
    expect(a).toMatchObject({ outcome: 'accepted', providerMessageId: expect.stringMatching(/^sbx_[0-9a-f]{24}$/) });
    expect(b.outcome).toBe('accepted');
    expect(a.outcome === 'accepted' && b.outcome === 'accepted' && a.providerMessageId !== b.providerMessageId).toBe(
      true,
    );
    await d.close();
  });

  it('closeAdapters resolves and can be called twice', async () => {
    await closeAdapters();
    await expect(closeAdapters()).resolves.toBeUndefined();
  });
});
