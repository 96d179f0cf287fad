import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channelOut } from '../../src/http/schemas/v1.js';
import { connect, setupPartner, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { call, startV1 } from './helpers.js';
import { sql } from '../../src/db/sql.js';

let server: TestServer;

beforeAll(async () => {
  server = await startV1();
});
afterAll(() => server.stop());

describe('GET /v1/channels', () => {
  it('lists type, sender, provider and health, never credentials or gateway settings', async () => {
    const p = await setupPartner(server.ctx, { balance: '10', prices: { sms: '0.01' } });
    await connect(
      server.ctx,
      p.partnerId,
      {
        kind: 'twilio',
        settings: { account_sid: 'AC0123456789abcdef', base_url: 'http://127.0.0.1:9' },
        secrets: { auth_token: 'sekret-auth-token-XYZ' },
      },
      'sms',
      '+15550001234',
    );
    await connect(server.ctx, p.partnerId, { kind: 'sandbox' }, 'email', 'news@partner.example.com');
    const r = await call(server, 'GET', '/v1/channels', { token: p.token });
    expect(r.status).toBe(200);
    expect(r.body.next_cursor).toBeNull();
    for (const c of r.body.data) expect(channelOut.parse(c)).toBeTruthy();
    expect(r.body.data.map((c: any) => [c.type, c.sender, c.provider, c.status, c.health])).toEqual([
      ['email', 'news@partner.example.com', 'sandbox', 'active', 'unknown'],
      ['sms', '+15550001234', 'twilio', 'active', 'unknown'],
    ]);
    expect(r.text).not.toMatch(/sekret|auth_token|AC0123456789abcdef|127\.0\.0\.1:9|settings|secrets/);
  });

  it('health follows the outcomes of recent sends and the gateway status', async () => {
    const p = await setupPartner(server.ctx, { balance: '10', prices: { sms: '0.01' } });
    const { gateway } = await connect(
      server.ctx,
      p.partnerId,
      { kind: 'sandbox', settings: { delivery_delay_ms: 60_000 } },
      'sms',
      '+15550004321',
    );
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push(
        (
          await call(server, 'POST', '/v1/messages', {
            token: p.token,
            body: { channel: 'sms', to: '+14155550123', body: `m${i}` },
          })
        ).body.id,
      );
    }
    // Let dispatch finish first: it must not overwrite the outcomes set below.
    await waitFor(
      async () =>
        (
          await server.ctx.store.all<{ status: string }>(
            sql`SELECT status FROM messages WHERE id IN (${sql.join(ids.map((id) => sql`${id}`))})`,
          )
        ).every((m) => m.status === 'sent'),
      'sent',
      5000,
    );
    const health = async () => (await call(server, 'GET', '/v1/channels', { token: p.token })).body.data[0];
    const set = async (status: string, which: string[], error: string | null = null) => {
      for (const id of which)
        await server.ctx.store.run(sql`UPDATE messages SET status = ${status}, error_code = ${error} WHERE id = ${id}`);
    };

    await set('sent', ids);
    expect(await health()).toMatchObject({ health: 'ok', recent: { accepted: 4, failed: 0 } });
    await set('failed', ids.slice(0, 1), 'provider_error');
    expect(await health()).toMatchObject({ health: 'degraded', recent: { accepted: 3, failed: 1 } });
    await set('failed', ids.slice(1, 3), 'provider_error');
    await set('sending', ids.slice(3), 'timeout');
    expect(await health()).toMatchObject({ health: 'down', recent: { accepted: 0, failed: 3, retrying: 1 } });
    await server.ctx.store.run(sql`UPDATE gateways SET status = 'disabled' WHERE id = ${gateway.id}`);
    expect(await health()).toMatchObject({ health: 'disabled', status: 'disabled' });
    // Outside the window the history no longer counts.
    await server.ctx.store.run(sql`UPDATE gateways SET status = 'active' WHERE id = ${gateway.id}`);
    await server.ctx.store.run(
      sql`UPDATE messages SET created_at = created_at - 3600000 WHERE partner_id = ${p.partnerId}`,
    );
    expect(await health()).toMatchObject({ health: 'unknown' });
  });
});
