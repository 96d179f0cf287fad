import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { metaHeaders, postWebhook } from '../fakes/webhook-senders.js';
import { META_VECTOR } from '../helpers/vectors.js';
import { processed, row } from '../helpers/webhook-log.js';

// Meta's signature is checked before the body is trusted for anything: only Meta's own
// spelling (lowercase hex) is taken, and a Meta-signed body that is cut short or not Meta's
// is a 401 unless the signature verifies with an app secret that could apply.

let s: TestServer;
let waGateway: string;

beforeAll(async () => {
  s = await startTestServer({ 'webhooksIn.acceptLegacySha1': true });
  const a = await setupPartner(s.ctx, { slug: 'alpha' });
  waGateway = (
    await connect(
      s.ctx,
      a.partnerId,
      {
        kind: 'whatsapp_cloud',
        name: 'wa-a',
        settings: { phone_number_id: '106540352242922' },
        secrets: { access_token: 't', app_secret: META_VECTOR.secret, verify_token: 'vt' },
      },
      'whatsapp',
      '+15550783881',
    )
  ).gateway.id;
});
afterAll(async () => {
  await s.stop();
});

const hook = () => `${s.url}/api/webhook.php`;
const jobsFor = async (id: string) =>
  ((await s.ctx.store.get(sql`SELECT COUNT(*) AS n FROM jobs WHERE payload LIKE ${`%${id}%`}`)) as { n: number }).n;

describe('the signature is lowercase hex, as Meta sends it (FACTS A3)', () => {
  it('accepts the documented vector as sent', async () => {
    const res = await postWebhook(hook(), META_VECTOR.body, {
      'content-type': 'application/json',
      'x-hub-signature-256': META_VECTOR.sha256,
    });
    expect(res.status).toBe(200);
    await processed(s.ctx, res.json.id);
  });

  it('refuses the same MAC written in uppercase hex, for X-Hub-Signature-256 and the legacy sha1 alike', async () => {
    const upper256 = 'sha256=' + META_VECTOR.sha256.slice(7).toUpperCase();
    const upper1 = 'sha1=' + META_VECTOR.sha1.slice(5).toUpperCase();
    const mixed256 = 'sha256=' + META_VECTOR.sha256.slice(7, 20) + META_VECTOR.sha256.slice(20).toUpperCase();
    const variants: Record<string, string>[] = [
      { 'x-hub-signature-256': upper256 },
      { 'x-hub-signature-256': mixed256 },
      { 'x-hub-signature': upper1 },
    ];
    for (const headers of variants) {
      const res = await postWebhook(hook(), META_VECTOR.body, { 'content-type': 'application/json', ...headers });
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.json.error.code).toBe('invalid_signature');
      expect(res.json.error.message).toMatch(/lowercase hex/);
      const r = await row(s.ctx, res.headers.get('x-msgd-webhook-id')!);
      expect(r.verification).toBe('failed');
      expect(await jobsFor(r.id)).toBe(0);
    }
  });
});

describe('signature first, then the body', () => {
  const cut = META_VECTOR.body.slice(0, 150);

  it('answers 401, not 400, to a Meta-signed body cut short in transit', async () => {
    // Signed over the whole body; only the first part arrived.
    const res = await postWebhook(hook(), cut, metaHeaders(META_VECTOR.secret, META_VECTOR.body));
    expect(res.status).toBe(401);
    expect(res.json.error.code).toBe('invalid_signature');
    const r = await row(s.ctx, res.headers.get('x-msgd-webhook-id')!);
    expect(r).toMatchObject({
      provider: 'meta',
      verification: 'failed',
      processing: 'rejected',
      gateway_id: waGateway,
    });
    expect(r.verification_reason).toMatch(/does not match the app_secret of gateway wa-a/);
    expect(await jobsFor(r.id)).toBe(0);
  });

  it('answers 401 to a Meta signature header on a body of no known shape, whatever it holds', async () => {
    for (const body of ['{"hello":"world"}', 'not json', '']) {
      const res = await postWebhook(hook(), body, metaHeaders('not_the_app_secret', body));
      expect(res.status, body).toBe(401);
      expect(res.json.error.code).toBe('invalid_signature');
    }
    const malformed = await postWebhook(hook(), cut, {
      'content-type': 'application/json',
      'x-hub-signature-256': 'sha256=xyz',
    });
    expect(malformed.status).toBe(401);
    expect(malformed.json.error.message).toMatch(/malformed X-Hub-Signature-256/);
  });

  it('answers 400 unknown_payload only once the signature verified, and names the gateway it verified with', async () => {
    const res = await postWebhook(hook(), cut, metaHeaders(META_VECTOR.secret, cut));
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('unknown_payload');
    const r = await row(s.ctx, res.headers.get('x-msgd-webhook-id')!);
    expect(r).toMatchObject({ provider: 'meta', verification: 'ok', processing: 'rejected', gateway_id: waGateway });
    expect(await jobsFor(r.id)).toBe(0);
  });

  it('checks the gateway named in the URL first', async () => {
    const res = await postWebhook(`${hook()}?gateway=${waGateway}`, cut, metaHeaders('wrong', META_VECTOR.body));
    expect(res.status).toBe(401);
    expect((await row(s.ctx, res.headers.get('x-msgd-webhook-id')!)).gateway_id).toBe(waGateway);
  });
});
