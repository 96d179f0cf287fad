import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openGatewayIn, openGatewaysOfKindIn } from '../../src/core/gateway-secrets.js';
import { addGateway } from '../../src/core/gateways.js';
import { verifySealedSecrets } from '../../src/core/sealed-secrets.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// Sealed secrets on both stores: a gateway opened with its secrets (for the provider layer and
// msgctl sandbox), and msgctl doctor's check that the master key opens every stored secret.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
});
afterEach(() => t.close());

describe('verifySealedSecrets', () => {
  it('opens every sealed secret with the right key, and names the rows another key does not open', async () => {
    expect(await verifySealedSecrets(t.ctx)).toEqual([
      { kind: 'gateway', rows: 0, failed: [] },
      { kind: 'webhook', rows: 0, failed: [] },
      { kind: 'totp', rows: 0, failed: [] },
    ]);
    const a = await addGateway(
      t.ctx,
      {
        kind: 'twilio',
        name: 'tw',
        settings: { account_sid: `AC${'0'.repeat(32)}` },
        secrets: { auth_token: 'x'.repeat(32) },
      },
      'op',
    );
    const b = await addGateway(t.ctx, { kind: 'sandbox', name: 'sbx', settings: {} }, 'op');
    const right = await verifySealedSecrets(t.ctx);
    expect(right[0]).toEqual({ kind: 'gateway', rows: 2, failed: [] });
    const wrong = await verifySealedSecrets({ ...t.ctx, masterKey: randomBytes(32) });
    expect(wrong[0]).toEqual({ kind: 'gateway', rows: 2, failed: [a.id, b.id].sort() });
    // Ids only: never a secret.
    expect(JSON.stringify(wrong)).not.toContain('x'.repeat(32));
  });
});

describe('openGatewayIn', () => {
  it('opens a gateway with its secrets, and the gateways of some kinds', async () => {
    const tw = await addGateway(
      t.ctx,
      {
        kind: 'twilio',
        name: 'tw',
        settings: { account_sid: `AC${'0'.repeat(32)}` },
        secrets: { auth_token: 'y'.repeat(32) },
      },
      'op',
    );
    const sbx = await addGateway(t.ctx, { kind: 'sandbox', name: 'sbx', settings: {} }, 'op');
    expect(await openGatewayIn(t.ctx, tw.id)).toMatchObject({
      id: tw.id,
      kind: 'twilio',
      name: 'tw',
      status: 'active',
      settings: { account_sid: `AC${'0'.repeat(32)}` },
      secrets: { auth_token: 'y'.repeat(32) },
    });
    const sandboxes = await openGatewaysOfKindIn(t.ctx, ['sandbox']);
    expect(sandboxes.map((g) => g.id)).toEqual([sbx.id]);
    expect(sandboxes[0].secrets.signing_secret).toMatch(/.{16,}/);
    await expect(openGatewayIn(t.ctx, 'gw_nope')).rejects.toMatchObject({ code: 'not_found' });
    await expect(openGatewayIn({ ...t.ctx, masterKey: randomBytes(32) }, tw.id)).rejects.toThrow(
      /master key does not match/,
    );
  });
});
