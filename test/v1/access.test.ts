import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activatePartner, suspendPartner } from '../../src/core/partners.js';
import { SCOPES, issueToken } from '../../src/core/tokens.js';
import type { PartnerSetup, TestServer } from '../helpers/server.js';
import { call, richPartner, startV1 } from './helpers.js';
import { sql } from '../../src/db/sql.js';

// Every /v1 route: its scope (403 insufficient_scope without it), a suspended partner (403),
// no token (401), and another partner's ids answering exactly like ids that do not exist.

let server: TestServer;
let a: PartnerSetup;
let b: PartnerSetup;
const ids: Record<string, string> = {};

interface Route {
  method: string;
  path: (i: Record<string, string>) => string;
  scope: string;
  body?: () => unknown;
  /** The kind of id in the path, for the isolation check. */
  idKind?: 'msg' | 'conv' | 'ct' | 'whe';
}

const ROUTES: Route[] = [
  {
    method: 'POST',
    path: () => '/v1/messages',
    scope: 'messages:send',
    body: () => ({ channel: 'sms', to: '+14155550160', body: 'x' }),
  },
  { method: 'GET', path: (i) => `/v1/messages/${i.msg}`, scope: 'messages:read', idKind: 'msg' },
  { method: 'GET', path: () => '/v1/conversations', scope: 'conversations:read' },
  { method: 'GET', path: (i) => `/v1/conversations/${i.conv}`, scope: 'conversations:read', idKind: 'conv' },
  { method: 'POST', path: () => '/v1/contacts', scope: 'contacts:write', body: () => ({ phone: '+14155550161' }) },
  { method: 'GET', path: () => '/v1/contacts', scope: 'contacts:read' },
  { method: 'GET', path: (i) => `/v1/contacts/${i.ct}`, scope: 'contacts:read', idKind: 'ct' },
  {
    method: 'POST',
    path: () => '/v1/webhooks',
    scope: 'webhooks:manage',
    body: () => ({ url: 'https://hooks.example.com/x' }),
  },
  { method: 'GET', path: () => '/v1/webhooks', scope: 'webhooks:manage' },
  { method: 'GET', path: (i) => `/v1/webhooks/${i.whe}`, scope: 'webhooks:manage', idKind: 'whe' },
  { method: 'POST', path: (i) => `/v1/webhooks/${i.whe}/rotate-secret`, scope: 'webhooks:manage', idKind: 'whe' },
  { method: 'POST', path: (i) => `/v1/webhooks/${i.whe}/test`, scope: 'webhooks:manage', idKind: 'whe' },
  { method: 'DELETE', path: (i) => `/v1/webhooks/${i.whe2}`, scope: 'webhooks:manage', idKind: 'whe' },
  { method: 'GET', path: () => '/v1/channels', scope: 'channels:read' },
  { method: 'GET', path: () => '/v1/templates', scope: 'templates:read' },
  { method: 'GET', path: () => '/v1/messages', scope: 'messages:read' },
];

const MISSING: Record<string, string> = {
  msg: 'msg_01kzzzzzzzzzzzzzzzzzzzzzzz',
  conv: 'conv_01kzzzzzzzzzzzzzzzzzzzzzzz',
  ct: 'ct_01kzzzzzzzzzzzzzzzzzzzzzzz',
  whe: 'whe_01kzzzzzzzzzzzzzzzzzzzzzzz',
  whe2: 'whe_01kzzzzzzzzzzzzzzzzzzzzzzz',
};

const req = (r: Route, token: string | null, i = ids) => call(server, r.method, r.path(i), { token, body: r.body?.() });

beforeAll(async () => {
  server = await startV1({ 'webhooksOut.allowPrivateTargets': true, 'webhooksOut.retryScheduleMs': [0] });
  a = await richPartner(server.ctx, 1);
  b = await richPartner(server.ctx, 2);
  const sent = await call(server, 'POST', '/v1/messages', {
    token: a.token,
    body: { channel: 'sms', to: '+14155550150', body: 'a' },
  });
  ids.msg = sent.body.id;
  const m = await call(server, 'GET', `/v1/messages/${ids.msg}`, { token: a.token });
  ids.conv = m.body.conversation_id;
  ids.ct = m.body.contact_id;
  ids.whe = (
    await call(server, 'POST', '/v1/webhooks', { token: a.token, body: { url: 'https://a.example.com/' } })
  ).body.id;
  ids.whe2 = (
    await call(server, 'POST', '/v1/webhooks', { token: a.token, body: { url: 'https://a2.example.com/' } })
  ).body.id;
});
afterAll(() => server.stop());

describe.each(
  ROUTES.map(
    (r) => [`${r.method} ${r.path({ msg: '{id}', conv: '{id}', ct: '{id}', whe: '{id}', whe2: '{id}' })}`, r] as const,
  ),
)('%s', (_name, route) => {
  it('401 without a token and with an unknown one', async () => {
    for (const t of [null, 'msgd_live_unknown']) {
      const r = await req(route, t);
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe('unauthorized');
    }
  });

  it(`403 insufficient_scope without ${route.scope}; allowed with only it`, async () => {
    // contacts:write implies contacts:read, so it is left out too.
    const others = SCOPES.filter(
      (s) => s !== route.scope && !(route.scope === 'contacts:read' && s === 'contacts:write'),
    );
    const without = (
      await issueToken(server.ctx, { partner: a.partnerId, name: 'w', scopes: others.join(' ') }, 'test')
    ).secret;
    const r = await req(route, without);
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: 'insufficient_scope' });
    expect(r.body.error.message).toContain(route.scope);
    const only = (await issueToken(server.ctx, { partner: a.partnerId, name: 'o', scopes: route.scope }, 'test'))
      .secret;
    const ok = await req(route, only, { ...ids, whe2: MISSING.whe2 });
    expect([200, 201, 202, 204, 404]).toContain(ok.status);
  });

  it('403 partner_suspended', async () => {
    await suspendPartner(server.ctx, a.partnerId, 'test');
    try {
      const r = await req(route, a.token);
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe('partner_suspended');
    } finally {
      await activatePartner(server.ctx, a.partnerId, 'test');
    }
  });

  if (route.idKind) {
    it("another partner's id is a 404 exactly like a missing one", async () => {
      const foreign = await req(route, b.token);
      const missing = await req(route, b.token, MISSING);
      expect(foreign.status).toBe(404);
      expect(missing.status).toBe(404);
      const shape = (r: typeof foreign, id: string) => ({
        ...r.body,
        error: { ...r.body.error, message: r.body.error.message.replace(id, '<id>') },
      });
      const key = route.path === ROUTES[12].path ? 'whe2' : route.idKind!;
      expect(shape(foreign, ids[key])).toEqual(shape(missing, MISSING[key]));
    });
  }
});

describe('isolation of lists and writes', () => {
  it("B's lists never include A's rows", async () => {
    await call(server, 'POST', '/v1/messages', {
      token: b.token,
      body: { channel: 'sms', to: '+14155550151', body: 'b' },
    });
    const convs = await call(server, 'GET', '/v1/conversations?limit=200', { token: b.token });
    expect(convs.body.data.length).toBeGreaterThan(0);
    expect(convs.body.data.map((c: any) => c.id)).not.toContain(ids.conv);
    expect((await call(server, 'GET', `/v1/conversations?contact=${ids.ct}`, { token: b.token })).body.data).toEqual(
      [],
    );
    const contacts = await call(server, 'GET', '/v1/contacts?limit=200', { token: b.token });
    expect(contacts.body.data.map((c: any) => c.id)).not.toContain(ids.ct);
    expect((await call(server, 'GET', '/v1/contacts?phone=%2B14155550150', { token: b.token })).body.data).toEqual([]);
    const hooks = await call(server, 'GET', '/v1/webhooks?limit=200', { token: b.token });
    expect(hooks.body.data.map((e: any) => e.id)).not.toContain(ids.whe);
    const chA = (await call(server, 'GET', '/v1/channels', { token: a.token })).body.data.map((c: any) => c.id);
    const chB = (await call(server, 'GET', '/v1/channels', { token: b.token })).body.data.map((c: any) => c.id);
    expect(chA).toHaveLength(5);
    expect(chB).toHaveLength(5);
    expect(chA.filter((x: string) => chB.includes(x))).toEqual([]);
  });

  it("B upserting A's contact's phone makes B its own contact; A's stays untouched", async () => {
    const before = await call(server, 'GET', `/v1/contacts/${ids.ct}`, { token: a.token });
    const r = await call(server, 'POST', '/v1/contacts', {
      token: b.token,
      body: { phone: '+14155550150', name: 'B says' },
    });
    expect(r.status).toBe(201);
    expect(r.body.id).not.toBe(ids.ct);
    expect((await call(server, 'GET', `/v1/contacts/${ids.ct}`, { token: a.token })).body).toEqual(before.body);
  });

  it("B cannot delete, rotate or test A's endpoint; it stays as it was", async () => {
    const endpoint = () => server.ctx.store.get(sql`SELECT * FROM webhook_endpoints WHERE id = ${ids.whe}`);
    const before = await endpoint();
    expect(before).toBeDefined();
    for (const path of [
      `/v1/webhooks/${ids.whe}`,
      `/v1/webhooks/${ids.whe}/rotate-secret`,
      `/v1/webhooks/${ids.whe}/test`,
    ]) {
      const r = await call(server, path.endsWith(ids.whe) ? 'DELETE' : 'POST', path, { token: b.token });
      expect(r.status).toBe(404);
    }
    expect(await endpoint()).toEqual(before);
  });
});
