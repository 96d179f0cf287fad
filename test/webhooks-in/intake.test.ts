import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import {
  metaHeaders,
  postWebhook,
  twilioForm,
  twilioHeaders,
  waInbound,
  waStatuses,
} from '../fakes/webhook-senders.js';
import { lastRow, processed, row } from '../helpers/webhook-log.js';
import { META_VECTOR } from '../helpers/vectors.js';

// The front door: handshake, recognition, verification over raw bytes, and every way a
// request is refused. Each refusal is logged with its reason and nothing is processed.

let s: TestServer;
let a: Awaited<ReturnType<typeof setupPartner>>;
let b: Awaited<ReturnType<typeof setupPartner>>;
let waGateway: string;
const PHONE_ID = '106540352242922';

beforeAll(async () => {
  s = await startTestServer({ 'server.bodyLimitBytes': 64 * 1024 });
  a = await setupPartner(s.ctx, { slug: 'alpha', balance: '5.00' });
  b = await setupPartner(s.ctx, { slug: 'bravo' });
  waGateway = (
    await connect(
      s.ctx,
      a.partnerId,
      {
        kind: 'whatsapp_cloud',
        name: 'wa-a',
        settings: { phone_number_id: PHONE_ID },
        secrets: { access_token: 't', app_secret: META_VECTOR.secret, verify_token: 'vt-alpha' },
      },
      'whatsapp',
      '+15550783881',
    )
  ).gateway.id;
  await connect(
    s.ctx,
    b.partnerId,
    {
      kind: 'meta_messenger',
      name: 'fb-b',
      settings: { page_id: '682498302938465' },
      secrets: { page_access_token: 't', app_secret: 'page_secret', verify_token: 'vt-bravo' },
    },
    'messenger',
  );
});
afterAll(async () => {
  await s.stop();
});

const hook = (path = '/api/webhook.php') => `${s.url}${path}`;
const jobsFor = async (id: string) =>
  ((await s.ctx.store.get(sql`SELECT COUNT(*) AS n FROM jobs WHERE payload LIKE ${`%${id}%`}`)) as { n: number }).n;

describe('GET verification handshake (FACTS A2)', () => {
  it('echoes the challenge as text/plain when the verify token matches any Meta gateway, on both paths', async () => {
    for (const [path, token] of [
      ['/api/webhook.php', 'vt-alpha'],
      ['/api/webhook-messenger.php', 'vt-bravo'],
      ['/api/webhook-messenger.php', 'vt-alpha'],
    ]) {
      const res = await fetch(`${hook(path)}?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=${token}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await res.text()).toBe('1158201444');
    }
  });

  it('answers 403 to a wrong token, a missing token or another mode', async () => {
    for (const q of [
      'hub.mode=subscribe&hub.challenge=1&hub.verify_token=nope',
      'hub.mode=subscribe&hub.challenge=1',
      'hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=vt-alpha',
      '',
    ]) {
      const res = await fetch(`${hook()}?${q}`);
      expect(res.status, q).toBe(403);
      expect(await res.text()).toBe('');
    }
  });
});

describe('Meta signature over the raw bytes', () => {
  it('takes the unicode-escaped FACTS vector, stores it raw with secrets redacted, and processes it', async () => {
    const res = await postWebhook(hook(), META_VECTOR.body, metaHeaders(META_VECTOR.secret, META_VECTOR.body));
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ received: true, id: expect.stringMatching(/^pwh_/) });
    const r = await processed(s.ctx, res.json.id);
    expect(r).toMatchObject({
      provider: 'whatsapp',
      gateway_id: waGateway,
      verification: 'ok',
      processing: 'processed',
      error: null,
    });
    expect(r.body!.toString('utf8')).toBe(META_VECTOR.body);
    const headers = JSON.parse(r.headers);
    expect(headers['x-hub-signature-256']).toBe('[redacted]');
    expect(headers['x-hub-signature']).toBe('[redacted]');
    expect(headers['content-type']).toBe('application/json');
    expect(r.headers).not.toContain(META_VECTOR.sha256.slice(7));

    const msg = (await s.ctx.store.get(sql`SELECT * FROM messages WHERE provider_message_id = 'wamid.TEST1'`)) as any;
    expect(msg).toMatchObject({
      partner_id: a.partnerId,
      direction: 'inbound',
      from: '+16505551234',
      to: '+15550783881',
      status: 'received',
    });
    expect(JSON.parse(msg.content)).toEqual({ kind: 'text', text: 'Grüß dich' });
    const contact = (await s.ctx.store.get(sql`SELECT * FROM contacts WHERE id = ${msg.contact_id}`)) as any;
    expect(contact).toMatchObject({
      partner_id: a.partnerId,
      phone: '+16505551234',
      name: 'Jürgen',
      last_inbound_at: 1739321024000,
    });
  });

  it('acknowledges a redelivery and ignores it', async () => {
    const res = await postWebhook(hook(), META_VECTOR.body, metaHeaders(META_VECTOR.secret, META_VECTOR.body));
    expect(res.status).toBe(200);
    expect((await processed(s.ctx, res.json.id)).processing).toBe('duplicate');
    const n = (await s.ctx.store.get(
      sql`SELECT COUNT(*) AS n FROM messages WHERE provider_message_id = 'wamid.TEST1'`,
    )) as { n: number };
    expect(n.n).toBe(1);
  });

  it('refuses the re-serialised body under the original signature: 401, logged, not processed', async () => {
    const reserialised = JSON.stringify(JSON.parse(META_VECTOR.body));
    const res = await postWebhook(hook(), reserialised, {
      'content-type': 'application/json',
      'x-hub-signature-256': META_VECTOR.sha256,
    });
    expect(res.status).toBe(401);
    // The caller is not told which gateways exist or whose secret failed; the log keeps it.
    expect(res.json.error).toMatchObject({
      code: 'invalid_signature',
      message: expect.stringContaining('the signature does not verify'),
    });
    expect(JSON.stringify(res.json)).not.toContain('wa-a');
    const id = res.headers.get('x-msgd-webhook-id')!;
    expect(await row(s.ctx, id)).toMatchObject({
      provider: 'whatsapp',
      verification: 'failed',
      processing: 'rejected',
      gateway_id: waGateway,
    });
    expect((await row(s.ctx, id)).verification_reason).toContain('does not match the app_secret of gateway wa-a');
    expect(await jobsFor(id)).toBe(0);
  });

  it('refuses a missing signature, a bad one, and the legacy sha1 alone (not enabled)', async () => {
    const body = JSON.stringify(waStatuses(PHONE_ID, [{ id: 'wamid.X', status: 'sent' }]));
    const cases: [Record<string, string>, string][] = [
      [{ 'content-type': 'application/json' }, 'missing X-Hub-Signature-256 header'],
      [{ ...metaHeaders('wrong_secret', body) }, 'signature does not match'],
      [{ 'content-type': 'application/json', 'x-hub-signature-256': 'sha256=abc' }, 'malformed X-Hub-Signature-256'],
      [
        {
          'content-type': 'application/json',
          'x-hub-signature': metaHeaders(META_VECTOR.secret, body)['x-hub-signature'],
        },
        'acceptLegacySha1 is off',
      ],
    ];
    for (const [headers, reason] of cases) {
      const res = await postWebhook(hook(), body, headers);
      expect(res.status, reason).toBe(401);
      const r = await row(s.ctx, res.headers.get('x-msgd-webhook-id')!);
      expect(r.verification).toBe('failed');
      expect(r.verification_reason).toContain(reason);
      expect(await jobsFor(r.id)).toBe(0);
      // A wrong gateway id in the URL is not confirmed or denied to the caller either.
    }
    for (const gateway of [waGateway, 'gw_does_not_exist']) {
      const res = await postWebhook(`${hook()}?gateway=${gateway}`, body, metaHeaders('wrong_secret', body));
      expect(res.status).toBe(401);
      expect(res.json.error.message).not.toMatch(/exist|gateway wa|app_secret/);
    }
  });
});

describe('refusals', () => {
  it('answers 400 unknown_payload to shapes no provider sends, and logs them', async () => {
    for (const [body, type] of [
      ['{"hello":"world"}', 'application/json'],
      ['[1,2,3]', 'application/json'],
      ['not json at all', 'text/plain'],
      ['foo=bar', 'application/x-www-form-urlencoded'],
      ['', 'application/json'],
    ]) {
      const res = await postWebhook(hook(), body, { 'content-type': type });
      expect(res.status, body).toBe(400);
      expect(res.json.error.code).toBe('unknown_payload');
      const r = await row(s.ctx, res.headers.get('x-msgd-webhook-id')!);
      expect(r).toMatchObject({ provider: 'unknown', verification: 'skipped', processing: 'rejected' });
    }
  });

  it('answers 200 to a signed Meta webhook for an object msgd does not use, logs it ignored, and still refuses a bad signature', async () => {
    // An app also subscribed to "user" or "permissions": a 400 would have Meta retry for days.
    const body = JSON.stringify({
      object: 'user',
      entry: [
        {
          id: '10210299214172187',
          uid: '10210299214172187',
          time: 1520383571,
          changes: [{ field: 'photos', value: { verb: 'update' } }],
        },
      ],
    });
    const ok = await postWebhook(hook('/api/webhook-messenger.php'), body, metaHeaders(META_VECTOR.secret, body));
    expect(ok.status).toBe(200);
    const r = await processed(s.ctx, ok.json.id);
    expect(r).toMatchObject({ provider: 'meta', verification: 'ok', processing: 'ignored', gateway_id: waGateway });
    expect(r.error).toContain('Meta "user" webhook (photos) is not used by msgd');
    const bad = await postWebhook(hook(), body, metaHeaders('not_the_app_secret', body));
    expect(bad.status).toBe(401);
    expect(await row(s.ctx, bad.headers.get('x-msgd-webhook-id')!)).toMatchObject({
      provider: 'meta',
      verification: 'failed',
      processing: 'rejected',
    });
    // Without Meta's signature header the shape is nobody's.
    const unsigned = await postWebhook(hook(), body, { 'content-type': 'application/json' });
    expect(unsigned.status).toBe(400);
  });

  it('keeps only the first 64 KiB of a refused body, logs a compressed one, never stores x-api-key', async () => {
    const big = await startTestServer();
    try {
      const url = `${big.url}/api/webhook.php`;
      const unsigned = JSON.stringify({ object: 'whatsapp_business_account', entry: [], pad: 'x'.repeat(300 * 1024) });
      const res = await postWebhook(url, unsigned, {
        'content-type': 'application/json',
        'x-hub-signature-256': 'sha256=' + '0'.repeat(64),
        'x-api-key': 'k-secret',
      });
      expect(res.status).toBe(401);
      const r = await row(big.ctx, res.headers.get('x-msgd-webhook-id')!);
      expect(r.body!.length).toBe(64 * 1024);
      expect(r.error).toContain(`only the first 65536 of ${Buffer.byteLength(unsigned)} bytes of the body are kept`);
      expect(JSON.parse(r.headers)['x-api-key']).toBe('[redacted]');
      const gz = await postWebhook(url, 'x', { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      expect(gz.status).toBe(400);
      expect(await row(big.ctx, gz.headers.get('x-msgd-webhook-id')!)).toMatchObject({ processing: 'rejected' });
    } finally {
      await big.stop();
    }
  });

  it('answers 413 to an oversized body and logs that it came', async () => {
    const big = JSON.stringify({ object: 'whatsapp_business_account', entry: [], pad: 'x'.repeat(70 * 1024) });
    const res = await postWebhook(hook(), big, metaHeaders(META_VECTOR.secret, big));
    expect(res.status).toBe(413);
    expect(res.json.error.code).toBe('payload_too_large');
    const r = await row(s.ctx, res.headers.get('x-msgd-webhook-id')!);
    expect(r).toMatchObject({
      provider: 'meta',
      processing: 'rejected',
      body: null,
      error: expect.stringContaining('larger than 65536'),
    });
  });

  it('logs a webhook for a phone number no gateway has as unroutable, and still answers 200', async () => {
    const body = JSON.stringify(
      waInbound('999000111', { from: '16505550000', id: 'wamid.LOST', text: { body: 'hi' } }),
    );
    const res = await postWebhook(hook(), body, metaHeaders(META_VECTOR.secret, body));
    expect(res.status).toBe(200);
    const r = await processed(s.ctx, res.json.id);
    expect(r.processing).toBe('unroutable');
    expect(r.error).toContain('no active whatsapp channel for phone_number_id 999000111');
  });

  it('refuses what no configured gateway can verify: unknown ?gateway=, no gateway of the kind', async () => {
    const body = JSON.stringify(waStatuses(PHONE_ID, [{ id: 'wamid.Y', status: 'sent' }]));
    let res = await postWebhook(`${hook()}?gateway=gw_nope`, body, metaHeaders('someone_elses_secret', body));
    expect(res.status).toBe(401);
    expect((await lastRow(s.ctx)).verification_reason).toContain('gateway "gw_nope" in the URL does not exist');
    const form = twilioForm({ AccountSid: 'AC123', MessageSid: 'SM1', MessageStatus: 'sent' });
    res = await postWebhook(
      hook(),
      form,
      twilioHeaders('tok', hook(), { AccountSid: 'AC123', MessageSid: 'SM1', MessageStatus: 'sent' }),
    );
    expect(res.status).toBe(401);
    expect((await lastRow(s.ctx)).verification_reason).toContain('no twilio gateway matches');
    expect(await lastRow(s.ctx)).toMatchObject({ provider: 'twilio', verification: 'failed' });
  });

  it('a stale ?gateway= that still verifies by payload is processed normally', async () => {
    const body = JSON.stringify(waStatuses(PHONE_ID, [{ id: 'wamid.NOT_OURS', status: 'sent' }]));
    const res = await postWebhook(`${hook()}?gateway=gw_gone`, body, metaHeaders(META_VECTOR.secret, body));
    expect(res.status).toBe(200);
    expect((await row(s.ctx, res.json.id)).gateway_id).toBe(waGateway);
  });

  it('leaves the send API its own JSON parser (no raw-body leak out of the webhook scope)', async () => {
    const form = await fetch(`${s.url}/api/send-sms.php`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'to=%2B15550001111&text=hi',
    });
    expect(form.status).toBe(415);
    const bad = await fetch(`${s.url}/api/send-whatsapp.php`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body: '{not json',
    });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.code).toBe('invalid_json');
  });
});
