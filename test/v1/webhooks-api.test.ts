import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pageOf, webhookOut, webhookWithSecret } from '../../src/http/schemas/v1.js';
import type { TestServer } from '../helpers/server.js';
import { call, richPartner, startV1 } from './helpers.js';
import { sql } from '../../src/db/sql.js';

// Endpoint management. Deliveries themselves are tested in test/webhooks-out.

let server: TestServer;
let token: string;

beforeAll(async () => {
  // No DNS in this file: private targets allowed, nothing listens at these URLs.
  server = await startV1({ 'webhooksOut.allowPrivateTargets': true, 'webhooksOut.retryScheduleMs': [0] });
  token = (await richPartner(server.ctx, 1)).token;
});
afterAll(() => server.stop());

const api = (method: string, path: string, body?: unknown) => call(server, method, path, { token, body });

describe('/v1/webhooks', () => {
  it('create shows the secret once; list and get never show it', async () => {
    const c = await api('POST', '/v1/webhooks', {
      url: 'https://hooks.example.com/msgd?x=1',
      events: ['message.received', 'message.sent'],
      description: 'crm',
    });
    expect(c.status).toBe(201);
    expect(webhookWithSecret.parse(c.body)).toBeTruthy();
    expect(c.body).toMatchObject({
      url: 'https://hooks.example.com/msgd?x=1',
      events: ['message.received', 'message.sent'],
      description: 'crm',
      status: 'enabled',
      disabled_reason: null,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const secret: string = c.body.secret;
    const list = await api('GET', '/v1/webhooks');
    const one = await api('GET', `/v1/webhooks/${c.body.id}`);
    expect(pageOf(webhookOut).parse(list.body)).toBeTruthy();
    expect(list.body.data.map((e: any) => e.id)).toContain(c.body.id);
    for (const r of [list, one]) {
      expect(r.status).toBe(200);
      expect(r.text).not.toContain(secret);
      expect(r.text).not.toContain(secret.slice(6, 20));
      expect(r.text).not.toContain('whsec_');
    }
    expect(one.body).not.toHaveProperty('secret');
    // At rest the secret is sealed, not stored in the clear.
    const row = (await server.ctx.store.get<{ secret: string }>(
      sql`SELECT secret FROM webhook_endpoints WHERE id = ${c.body.id}`,
    ))!;
    expect(row.secret).not.toContain(secret.slice(6));
    expect(row.secret.startsWith('v1:')).toBe(true);
  });

  it('rotate-secret returns a new secret and starts the grace period', async () => {
    const c = await api('POST', '/v1/webhooks', { url: 'https://hooks.example.com/r' });
    const r = await api('POST', `/v1/webhooks/${c.body.id}/rotate-secret`);
    expect(r.status).toBe(200);
    expect(r.body.secret).not.toBe(c.body.secret);
    expect(Date.parse(r.body.secret_rotation_ends_at) - Date.now()).toBeGreaterThan(23 * 3_600_000);
    expect((await api('GET', `/v1/webhooks/${c.body.id}`)).text).not.toContain(r.body.secret);
  });

  it('test sends a webhook.test event to that endpoint (202)', async () => {
    const c = await api('POST', '/v1/webhooks', { url: 'https://hooks.example.com/t' });
    const r = await api('POST', `/v1/webhooks/${c.body.id}/test`);
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ event_id: expect.stringMatching(/^evt_/), delivery_id: expect.stringMatching(/^dlv_/) });
    const d = await server.ctx.store.get(
      sql`SELECT endpoint_id, event_id FROM webhook_deliveries WHERE id = ${r.body.delivery_id}`,
    );
    expect(d).toEqual({ endpoint_id: c.body.id, event_id: r.body.event_id });
  });

  it('delete: 204, then gone from list and get; pending deliveries cancelled', async () => {
    const c = await api('POST', '/v1/webhooks', { url: 'https://hooks.example.com/d' });
    const del = await api('DELETE', `/v1/webhooks/${c.body.id}`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await api('GET', `/v1/webhooks/${c.body.id}`)).status).toBe(404);
    expect((await api('DELETE', `/v1/webhooks/${c.body.id}`)).status).toBe(404);
    expect((await api('POST', `/v1/webhooks/${c.body.id}/rotate-secret`)).status).toBe(404);
    expect((await api('GET', '/v1/webhooks?limit=200')).body.data.map((e: any) => e.id)).not.toContain(c.body.id);
  });

  it.each([
    [{ url: 'https://hooks.example.com/a', events: ['message.nope'] }, 'events.0'],
    [{ url: 'https://hooks.example.com/a', events: ['webhook.test'] }, 'events.0'],
    [{ url: 'https://hooks.example.com/a', events: [] }, 'events'],
    [{}, 'url'],
    [{ url: 'https://hooks.example.com/a', description: 'x'.repeat(501) }, 'description'],
  ])('400 for %j', async (body, field) => {
    const r = await api('POST', '/v1/webhooks', body);
    expect(r.status).toBe(400);
    expect(r.body.error.details.map((d: any) => d.field)).toContain(field);
  });

  it('pages with limit and cursor', async () => {
    const p = await richPartner(server.ctx, 2);
    const made: string[] = [];
    for (let i = 0; i < 5; i++)
      made.push(
        (await call(server, 'POST', '/v1/webhooks', { token: p.token, body: { url: `https://h${i}.example.com/` } }))
          .body.id,
      );
    const a = await call(server, 'GET', '/v1/webhooks?limit=3', { token: p.token });
    const b = await call(server, 'GET', `/v1/webhooks?limit=3&cursor=${a.body.next_cursor}`, { token: p.token });
    expect([...a.body.data, ...b.body.data].map((e: any) => e.id)).toEqual([...made].reverse());
    expect(b.body.next_cursor).toBeNull();
  });
});
