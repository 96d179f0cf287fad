import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channelOut } from '../../src/http/schemas/v1.js';
import { connect, setupPartner, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { call, startV1 } from './helpers.js';

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
      () =>
        ids.every(
          (id) =>
            (server.ctx.db.sqlite.prepare('SELECT status FROM messages WHERE id = ?').get(id) as any).status === 'sent',
        ),
      'sent',
      5000,
    );
    const health = async () => (await call(server, 'GET', '/v1/channels', { token: p.token })).body.data[0];
    const db = server.ctx.db.sqlite;
    const set = (status: string, which: string[], error: string | null = null) =>
      which.forEach((id) =>
        db.prepare('UPDATE messages SET status = ?, error_code = ? WHERE id = ?').run(status, error, id),
      );

    set('sent', ids);
    expect(await health()).toMatchObject({ health: 'ok', recent: { accepted: 4, failed: 0 } });
    set('failed', ids.slice(0, 1), 'provider_error');
    expect(await health()).toMatchObject({ health: 'degraded', recent: { accepted: 3, failed: 1 } });
    set('failed', ids.slice(1, 3), 'provider_error');
    set('sending', ids.slice(3), 'timeout');
    expect(await health()).toMatchObject({ health: 'down', recent: { accepted: 0, failed: 3, retrying: 1 } });
    db.prepare(`UPDATE gateways SET status = 'disabled' WHERE id = ?`).run(gateway.id);
    expect(await health()).toMatchObject({ health: 'disabled', status: 'disabled' });
    // Outside the window the history no longer counts.
    db.prepare(`UPDATE gateways SET status = 'active' WHERE id = ?`).run(gateway.id);
    db.prepare('UPDATE messages SET created_at = created_at - 3600000 WHERE partner_id = ?').run(p.partnerId);
    expect(await health()).toMatchObject({ health: 'unknown' });
  });
});
