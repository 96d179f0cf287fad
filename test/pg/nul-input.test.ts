import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { type PartnerSetup, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';

// A NUL character (U+0000) is one value PostgreSQL text cannot hold: a statement given one fails
// with "invalid byte sequence for encoding UTF8" (22021). msgd refuses it before any statement, in
// every place a partner or a console visitor can put one: JSON bodies (json-body.ts), URLs (a
// path id, a query filter) and the console's forms. Each answer is a 400 in the documented
// shape, never a 500, and the database is as it was.

let t: TestServer;
let p: PartnerSetup;
beforeAll(async () => {
  t = await startTestServer();
  p = await setupPartner(t.ctx);
}, 60_000);
afterAll(() => t?.stop());

async function get(path: string, method = 'GET') {
  const res = await fetch(`${t.url}${path}`, { method, headers: { authorization: `Bearer ${p.token}` } });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
}

describe('a NUL character on PostgreSQL', () => {
  it('in a /v1 path id or query filter is a 400 naming it, not a 500', async () => {
    const contact = await fetch(`${t.url}/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ phone: '+14155550123', name: 'Ann' }),
    });
    expect(contact.status).toBe(201);
    for (const [method, path] of [
      ['GET', '/v1/contacts?q=A%00nn'],
      ['GET', '/v1/contacts?email=a%00b%40example.com'],
      ['GET', '/v1/suppressions?address=%2B1415%00'],
      ['GET', '/v1/templates?status=a%00'],
      ['GET', '/v1/messages/msg_%00'],
      ['GET', '/v1/contacts/ct_a%00b'],
      ['GET', '/v1/conversations/%00'],
      ['GET', '/v1/webhooks/%00'],
      ['POST', '/v1/messages/msg_a%00b/cancel'],
    ]) {
      const r = await get(path, method);
      expect({ path, status: r.status, code: r.body.error?.code }).toEqual({
        path,
        status: 400,
        code: 'invalid_request',
      });
      expect(r.body.error?.message).toBe('the URL has a NUL character (%00), which msgd does not take');
    }
    // The same requests without the NUL are answered, and nothing was added or changed.
    const found = await get('/v1/contacts?q=Ann');
    expect(found.status).toBe(200);
    expect((found.body as unknown as { data: unknown[] }).data).toHaveLength(1);
    const errors = t.logs.filter((l) => l.includes('"level":50'));
    expect(errors).toEqual([]);
  });

  it('in a console form field is a 400 page saying so, and the login is not counted', async () => {
    const page = await fetch(`${t.url}/ui/login`);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1];
    const cookie = page.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const before = await t.ctx.store.get<{ n: number }>(sql`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM login_attempts`);
    const res = await fetch(`${t.url}/ui/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie,
        origin: t.url,
        'sec-fetch-site': 'same-origin',
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ _csrf: csrf, email: 'ann\u0000@example.com', password: 'x' }).toString(),
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('a form field has a NUL character (%00), which msgd does not take');
    const after = await t.ctx.store.get<{ n: number }>(sql`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM login_attempts`);
    expect(after).toEqual(before);
  });
});
