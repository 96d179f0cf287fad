import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contactOut, pageOf } from '../../src/http/schemas/v1.js';
import { serverStore, setupPartner, type TestServer } from '../helpers/server.js';
import { call, richPartner, startV1 } from './helpers.js';

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startV1();
  token = (await richPartner(server.ctx, 1)).token;
});
afterAll(() => server.stop());

const post = (body: unknown) => call(server, 'POST', '/v1/contacts', { token, body });
const get = (path: string) => call(server, 'GET', path, { token });

describe('POST /v1/contacts (upsert)', () => {
  it('201 when created, 200 when the same address comes again; fields and attributes merge', async () => {
    const a = await post({ phone: '+14155550101', name: 'Ann', attributes: { plan: 'gold', tier: 1 } });
    expect(a.status).toBe(201);
    expect(contactOut.parse(a.body)).toBeTruthy();
    expect(a.body).toMatchObject({
      id: expect.stringMatching(/^ct_/),
      name: 'Ann',
      phone: '+14155550101',
      attributes: { plan: 'gold', tier: 1 },
    });

    const b = await post({ phone: '+14155550101', email: 'ann@example.com', attributes: { tier: null, city: 'Oslo' } });
    expect(b.status).toBe(200);
    expect(b.body).toMatchObject({
      id: a.body.id,
      name: 'Ann',
      phone: '+14155550101',
      email: 'ann@example.com',
      attributes: { plan: 'gold', city: 'Oslo' },
    });
    expect(b.body.attributes).not.toHaveProperty('tier');

    // Found by the other address now.
    const c = await post({ email: 'ann@example.com', name: 'Ann B', messenger_psid: '555777' });
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ id: a.body.id, name: 'Ann B', messenger_psid: '555777' });
    expect((await get(`/v1/contacts/${a.body.id}`)).body).toEqual(c.body);
  });

  it('409 when the addresses belong to two different contacts', async () => {
    const x = await post({ phone: '+14155550102' });
    const y = await post({ email: 'y@example.com' });
    const r = await post({ phone: '+14155550102', email: 'y@example.com' });
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe('conflict');
    expect(r.body.error.details.map((d: any) => d.message).join(' ')).toContain(x.body.id);
    expect(r.body.error.details.map((d: any) => d.message).join(' ')).toContain(y.body.id);
  });

  it.each([
    [{}, 'phone'],
    [{ name: 'no address' }, 'phone'],
    [{ phone: '555' }, 'phone'],
    [{ email: 'nope' }, 'email'],
    [{ messenger_psid: 'abc' }, 'messenger_psid'],
    [{ phone: '+14155550103', attributes: 'x' }, 'attributes'],
  ])('400 naming the field for %j', async (body, field) => {
    const r = await post(body);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_request');
    expect(r.body.error.details.map((d: any) => d.field)).toContain(field);
  });

  it('400 invalid_json for a malformed body, 415 for another content type', async () => {
    expect((await call(server, 'POST', '/v1/contacts', { token, body: '{"phone":' })).body.error.code).toBe(
      'invalid_json',
    );
    const r = await call(server, 'POST', '/v1/contacts', {
      token,
      body: 'phone=1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(r.status).toBe(415);
  });

  it('a later send to the upserted number joins that contact', async () => {
    const ct = await post({ phone: '+14155550104', name: 'Known' });
    const sent = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'sms', to: '+14155550104', body: 'hi' },
    });
    const m = await get(`/v1/messages/${sent.body.id}`);
    expect(m.body.contact_id).toBe(ct.body.id);
    const conv = await get(`/v1/conversations/${m.body.conversation_id}`);
    expect(conv.body.contact).toMatchObject({ id: ct.body.id, name: 'Known' });
  });
});

describe('email addresses are one contact whatever their case', () => {
  it('upsert, list filter and sends find the same contact; the message goes to the address as written', async () => {
    const a = await post({ email: 'Case.Test@Example.COM', name: 'Cased' });
    expect(a.status).toBe(201);
    expect(a.body.email).toBe('case.test@example.com');
    const again = await post({ email: 'case.test@example.com' });
    expect([again.status, again.body.id]).toEqual([200, a.body.id]);
    expect((await get('/v1/contacts?email=CASE.TEST@example.com')).body.data.map((c: any) => c.id)).toEqual([
      a.body.id,
    ]);
    const sent = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'email', to: 'CASE.test@EXAMPLE.com', subject: 'Hi', body: 'hello' },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const m = await get(`/v1/messages/${sent.body.id}`);
    expect(m.body).toMatchObject({ contact_id: a.body.id, to: 'CASE.test@EXAMPLE.com' });
  });

  // SQLite's migration, replayed on its database: PostgreSQL's schema (migrations/pg/) starts with lowercased addresses.
  it.skipIf(serverStore === 'postgres')(
    'the 0003 migration lowercases stored addresses, except where two contacts would collide',
    async () => {
      const { readFileSync } = await import('node:fs');
      const db = server.ctx.db.sqlite;
      const partner = (await setupPartner(server.ctx)).partnerId;
      const ins = db.prepare(
        `INSERT INTO contacts (id, partner_id, email, attributes, created_at, updated_at) VALUES (?, ?, ?, '{}', 1, 1)`,
      );
      ins.run('ct_mig1', partner, 'Old.Mixed@Example.com');
      ins.run('ct_mig2', partner, 'DUP@example.com');
      ins.run('ct_mig3', partner, 'dup@example.com');
      db.exec(readFileSync(new URL('../../migrations/0003_contact_emails_lowercase.sql', import.meta.url), 'utf8'));
      const email = (id: string) =>
        (db.prepare('SELECT email FROM contacts WHERE id = ?').get(id) as { email: string }).email;
      expect([email('ct_mig1'), email('ct_mig2'), email('ct_mig3')]).toEqual([
        'old.mixed@example.com',
        'DUP@example.com',
        'dup@example.com',
      ]);
    },
  );
});

describe('GET /v1/contacts', () => {
  it('pages newest first, searches by q, finds exact phone and email', async () => {
    const made: string[] = [];
    for (let i = 0; i < 12; i++)
      made.push((await post({ phone: `+1415555${String(2000 + i)}`, name: i % 2 ? `Odd ${i}` : `Even_${i}` })).body.id);
    const first = await get('/v1/contacts?limit=5');
    expect(pageOf(contactOut).parse(first.body)).toBeTruthy();
    expect(first.body.data.map((c: any) => c.id)).toEqual(made.slice(-5).reverse());
    const second = await get(`/v1/contacts?limit=5&cursor=${first.body.next_cursor}`);
    expect(second.body.data.map((c: any) => c.id)).toEqual(made.slice(-10, -5).reverse());

    const odd = await get('/v1/contacts?q=odd&limit=200');
    expect(odd.body.data).toHaveLength(6);
    // LIKE wildcards in q are literal characters.
    expect((await get('/v1/contacts?q=n_1&limit=200')).body.data.map((c: any) => c.name)).toEqual(['Even_10']);
    expect((await get('/v1/contacts?q=d_1&limit=200')).body.data).toEqual([]);
    expect((await get('/v1/contacts?q=%25&limit=200')).body.data).toEqual([]);

    const byPhone = await get(`/v1/contacts?phone=${encodeURIComponent('+14155552003')}`);
    expect(byPhone.body.data.map((c: any) => c.id)).toEqual([made[3]]);
    expect((await get('/v1/contacts?email=ann@example.com')).body.data).toHaveLength(1);
    expect((await get('/v1/contacts/ct_01kzzzzzzzzzzzzzzzzzzzzzzz')).status).toBe(404);
  });
});
