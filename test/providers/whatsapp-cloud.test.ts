import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { whatsappCloudAdapter as adapter } from '../../src/providers/whatsapp-cloud/send.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { makeCert } from '../helpers/webhook-receiver.js';
import { makeCtx, makeGw, makeMsg, newDispatcher, text } from './helpers.js';

const PHONE_ID = '106540352242922';
const TOKEN = 'EAAtesttoken';
const dispatcher = newDispatcher();
const ctx = makeCtx(dispatcher);
let fake: GraphFake;

const gw = () =>
  makeGw(
    'whatsapp_cloud',
    { base_url: `${fake.url}/`, api_version: 'v21.0', phone_number_id: PHONE_ID },
    { access_token: TOKEN },
  );
const msg = (to = '+16505551234') => makeMsg('whatsapp', to, '+15550783881', text('Hello there'));

beforeAll(async () => {
  fake = await startGraphFake({
    accounts: [{ id: PHONE_ID, kind: 'whatsapp', token: TOKEN }],
    templates: [{ name: 'order_update', language: 'en_US' }],
  });
});
afterAll(async () => {
  await fake.close();
  await dispatcher.close();
});
beforeEach(() => fake.reset());

describe('whatsapp_cloud adapter', () => {
  it('posts a text message the way the Cloud API expects and returns the wamid', async () => {
    const r = await adapter.send(gw(), msg(), ctx);
    const req = fake.last()!;
    expect(req.method).toBe('POST');
    expect(req.path).toBe(`/v21.0/${PHONE_ID}/messages`);
    expect(req.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.body).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '16505551234',
      type: 'text',
      text: { body: 'Hello there', preview_url: false },
    });
    const answered = JSON.parse(req.reply!.body);
    expect(answered.contacts).toEqual([{ input: '16505551234', wa_id: '16505551234' }]);
    expect(answered.messages[0].id).toMatch(/^wamid\./);
    expect(r).toEqual({ outcome: 'accepted', providerMessageId: answered.messages[0].id });
  });

  it('sends templates with language and components and reports message_status', async () => {
    const components = [{ type: 'body', parameters: [{ type: 'text', text: '42' }] }];
    const m = makeMsg('whatsapp', '16505551234', 'x', {
      kind: 'template',
      template: { name: 'order_update', language: 'en_US', components },
    });
    const r = await adapter.send(gw(), m, ctx);
    expect(fake.last()!.body).toMatchObject({
      type: 'template',
      template: { name: 'order_update', language: { code: 'en_US' }, components },
    });
    expect(r).toMatchObject({ outcome: 'accepted', providerStatus: 'accepted' });
  });

  it('fails permanently with 132001 when the template does not exist', async () => {
    const m = makeMsg('whatsapp', '16505551234', 'x', {
      kind: 'template',
      template: { name: 'nope', language: 'en_US' },
    });
    const r = await adapter.send(gw(), m, ctx);
    expect(fake.last()!.reply!.status).toBe(404);
    expect(r).toMatchObject({ outcome: 'failed', code: '132001' });
    expect(r.outcome === 'failed' && r.message).toContain('template name (nope) does not exist in en_US');
  });

  it('retries a 130429 rate limit, honouring Retry-After when present', async () => {
    fake.failNext({ kind: 'rate_limit', retryAfterS: 7 });
    const r = await adapter.send(gw(), msg(), ctx);
    expect(fake.last()!.reply!.status).toBe(400);
    expect(r).toMatchObject({ outcome: 'retry', code: '130429', retryAfterMs: 7000 });
  });

  it('retries a rate limit without a hint after a few seconds', async () => {
    fake.failNext({ kind: 'error', code: 131056 });
    const r = await adapter.send(gw(), msg(), ctx);
    expect(r).toMatchObject({ outcome: 'retry', code: '131056', retryAfterMs: 5000 });
  });

  it('retries a 408: the provider gave up waiting for the request and took nothing', async () => {
    fake.failNext({ kind: 'status', status: 408 });
    const r = await adapter.send(gw(), msg(), ctx);
    expect(fake.last()!.reply!.status).toBe(408);
    expect(r).toMatchObject({ outcome: 'retry' });
    expect((r as { maybeDelivered?: boolean }).maybeDelivered ?? false).toBe(false);
  });

  it('retries an unverifiable certificate without suspecting a duplicate: the handshake failed before the request', async () => {
    const tls = makeCert();
    let requests = 0;
    const server = https.createServer({ key: readFileSync(tls.key), cert: readFileSync(tls.cert) }, (_req, res) => {
      requests++;
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const g = makeGw(
        'whatsapp_cloud',
        { base_url: url, api_version: 'v21.0', phone_number_id: PHONE_ID },
        { access_token: TOKEN },
      );
      const r = await adapter.send(g, msg(), ctx);
      expect(r).toMatchObject({ outcome: 'retry', code: 'network_error' });
      expect(r.outcome === 'retry' && r.message).toMatch(/DEPTH_ZERO_SELF_SIGNED_CERT/);
      expect((r as { maybeDelivered?: boolean }).maybeDelivered ?? false).toBe(false);
      expect(requests).toBe(0);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      tls.cleanup();
    }
  });

  it('retries 5xx and 131000', async () => {
    fake.failNext({ kind: 'status', status: 503 });
    fake.failNext({ kind: 'error', code: 131000 });
    const a = await adapter.send(gw(), msg(), ctx);
    const b = await adapter.send(gw(), msg(), ctx);
    expect(a).toMatchObject({ outcome: 'retry', code: '2' });
    expect(b).toMatchObject({ outcome: 'retry', code: '131000' });
    expect(fake.requests.map((q) => q.reply!.status)).toEqual([503, 500]);
  });

  it('retries when the provider does not answer in time', async () => {
    fake.failNext({ kind: 'timeout' });
    const started = Date.now();
    const r = await adapter.send(gw(), msg(), makeCtx(dispatcher, { timeoutMs: 200 }));
    expect(r).toMatchObject({ outcome: 'retry', code: 'timeout' });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('retries on a connection reset', async () => {
    fake.failNext({ kind: 'reset' });
    const r = await adapter.send(gw(), msg(), ctx);
    expect(r).toMatchObject({ outcome: 'retry', code: 'network_error' });
  });

  it('fails on an invalid token (401, code 190)', async () => {
    const bad = makeGw(
      'whatsapp_cloud',
      { base_url: fake.url, api_version: 'v21.0', phone_number_id: PHONE_ID },
      { access_token: 'wrong' },
    );
    const r = await adapter.send(bad, msg(), ctx);
    expect(fake.last()!.reply!.status).toBe(401);
    expect(r).toMatchObject({ outcome: 'failed', code: '190' });
  });

  it('fails with the Meta code on a permanent 4xx for one recipient only', async () => {
    fake.failFor('+16505550000', { kind: 'error', code: 131026 });
    const bad = await adapter.send(gw(), msg('+16505550000'), ctx);
    const good = await adapter.send(gw(), msg('+16505551234'), ctx);
    expect(bad).toMatchObject({ outcome: 'failed', code: '131026' });
    expect(bad.outcome === 'failed' && bad.message).toContain('not a WhatsApp user');
    expect(good.outcome).toBe('accepted');
  });

  it('retries while the provider is down and succeeds on the same URL once it is back', async () => {
    await fake.down();
    const down = await adapter.send(gw(), msg(), ctx);
    await fake.up();
    const back = await adapter.send(gw(), msg(), ctx);
    expect(down).toMatchObject({ outcome: 'retry', code: 'network_error' });
    expect(back.outcome).toBe('accepted');
  });

  it('waits out injected latency and still accepts', async () => {
    fake.failNext({ kind: 'latency', ms: 150 });
    const started = Date.now();
    const r = await adapter.send(gw(), msg(), ctx);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(r.outcome).toBe('accepted');
  });

  it('refuses email content and a missing token without calling Meta', async () => {
    const email = makeMsg('whatsapp', '1', 'x', { kind: 'email', subject: 's', text: 't' });
    const noToken = makeGw('whatsapp_cloud', { base_url: fake.url, phone_number_id: PHONE_ID }, {});
    expect(await adapter.send(gw(), email, ctx)).toMatchObject({ outcome: 'failed', code: 'unsupported_content' });
    expect(await adapter.send(noToken, msg(), ctx)).toMatchObject({ outcome: 'failed', code: 'missing_secret' });
    expect(fake.requests).toHaveLength(0);
  });
});
