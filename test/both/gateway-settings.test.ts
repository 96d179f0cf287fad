import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assignChannel } from '../../src/core/channels.js';
import type { GatewayKindRegistry } from '../../src/core/gateway-kinds.js';
import { addGateway, getGateway, updateGateway } from '../../src/core/gateways.js';
import { createPartner } from '../../src/core/partners.js';
import { gatewayKinds } from '../../src/providers/kinds.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

let t: StoreCtx;
beforeAll(async () => {
  t = await openStoreCtx();
});
afterAll(() => t?.close());

describe('gateway settings checked when they change', () => {
  it('a Messenger gateway stored before MESSAGE_TAG needed a tag can still be disabled and rotated; the next --set says what to fix', async () => {
    const g = await addGateway(
      t.ctx,
      { kind: 'meta_messenger', name: 'fb-old', settings: { page_id: '123' }, secrets: { page_access_token: 'x' } },
      'test',
    );
    // As an older msgd stored it: tagged sending without a tag (Meta refuses every such send).
    await t.ctx.store.run(
      sql`UPDATE gateways SET settings = ${JSON.stringify({ ...g.settings, messaging_type: 'MESSAGE_TAG' })} WHERE id = ${g.id}`,
    );
    expect((await updateGateway(t.ctx, g.id, { status: 'disabled' }, 'test')).status).toBe('disabled');
    expect(
      (await updateGateway(t.ctx, g.id, { secrets: { page_access_token: 'rotated' } }, 'test')).secret_names,
    ).toEqual(['page_access_token']);
    await expect(updateGateway(t.ctx, g.id, { settings: { rate_per_second: 10 } }, 'test')).rejects.toThrow(
      /invalid settings for a meta_messenger gateway/,
    );
    const fixed = await updateGateway(t.ctx, g.id, { settings: { tag: 'HUMAN_AGENT' } }, 'test');
    expect(fixed.settings).toMatchObject({ messaging_type: 'MESSAGE_TAG', tag: 'HUMAN_AGENT' });
    expect((await getGateway(t.ctx, g.id)).status).toBe('disabled');
  });
});

describe('the gateway kinds core is given', () => {
  it('are the only ones it takes, with their settings, secrets and channels', async () => {
    // A registry holding only the sandbox, serving SMS alone: core knows no kind of its own.
    const sandbox = gatewayKinds.get('sandbox');
    const onlySandbox: GatewayKindRegistry = {
      specs: [{ ...sandbox, channels: ['sms'] }],
      has: (kind): kind is 'sandbox' => kind === 'sandbox',
      get: () => ({ ...sandbox, channels: ['sms'] }),
    };
    const ctx = { ...t.ctx, gatewayKinds: onlySandbox };
    await expect(
      addGateway(
        ctx,
        { kind: 'twilio', name: 'tw', settings: { account_sid: 'AC1' }, secrets: { auth_token: 'x' } },
        'test',
      ),
    ).rejects.toThrow(
      expect.objectContaining({
        message: 'unknown gateway kind "twilio"',
        details: [{ field: 'kind', message: 'one of sandbox' }],
      }),
    );
    const g = await addGateway(ctx, { kind: 'sandbox', name: 'sbx-sms', settings: {} }, 'test');
    // Its defaults and its generated secret come from the spec.
    expect(g.settings).toEqual({ delivery_delay_ms: 300 });
    expect(g.secret_names).toEqual(['signing_secret']);
    const p = await createPartner(t.ctx, { slug: 'kinds', name: 'Kinds' }, 'test');
    await expect(
      assignChannel(ctx, { partner: p.id, gateway: g.id, type: 'email', sender: 'a@example.com' }, 'test'),
    ).rejects.toThrow('a sandbox gateway cannot serve email; it serves sms');
    expect(
      (await assignChannel(ctx, { partner: p.id, gateway: g.id, type: 'sms', sender: '+15550001111' }, 'test')).type,
    ).toBe('sms');
  });
});
