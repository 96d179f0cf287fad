import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PartnerSetup, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';

// A JSON number beyond a double's range (1e400) parses as Infinity, which JSON cannot hold: kept,
// it would become null (in a contact's attributes, null removes the key). msgd refuses it.

let t: TestServer;
let p: PartnerSetup;
beforeAll(async () => {
  t = await startTestServer();
  p = await setupPartner(t.ctx);
}, 60_000);
afterAll(() => t?.stop());

async function post(path: string, body: string) {
  const res = await fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${p.token}`, 'content-type': 'application/json' },
    body,
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
}

describe('a number too large for a double in a JSON body', () => {
  it('is 400 invalid_json and changes nothing', async () => {
    const made = await post('/v1/contacts', '{"phone":"+14155550123","attributes":{"plan":"gold","n":1}}');
    expect(made.status).toBe(201);
    for (const n of ['1e400', '-1e400']) {
      const r = await post('/v1/contacts', `{"phone":"+14155550123","attributes":{"plan":"silver","n":${n}}}`);
      expect(r).toEqual({
        status: 400,
        body: {
          error: {
            code: 'invalid_json',
            message: 'the body has a number too large to read (beyond ±1.8e308)',
            details: [],
          },
        },
      });
    }
    const res = await fetch(`${t.url}/v1/contacts?phone=%2B14155550123`, {
      headers: { authorization: `Bearer ${p.token}` },
    });
    const list = (await res.json()) as { data: { attributes: unknown }[] };
    expect(list.data.map((c) => c.attributes)).toEqual([{ plan: 'gold', n: 1 }]);
    // The largest double is still a number.
    expect((await post('/v1/contacts', '{"phone":"+14155550123","attributes":{"n":1.7e308}}')).status).toBe(200);
  });
});
