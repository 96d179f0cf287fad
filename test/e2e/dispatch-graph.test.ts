import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseMoney } from '../../src/lib/money.js';
import { setupPartner, startTestServer, type PartnerSetup, type TestServer } from '../helpers/server.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import {
  FAST_DISPATCH,
  IG_ID,
  IG_TOKEN,
  PAGE_ID,
  PAGE_TOKEN,
  WA_PHONE_ID,
  WA_TOKEN,
  WHATSAPP,
  instagramGateway,
  messengerGateway,
  send,
  whatsappGateway,
} from '../helpers/gateways.js';
import { balanceOf, jobsOf, waitStatus } from '../helpers/rows.js';
import { expectFailedAndRefunded, expectSent } from '../helpers/expectations.js';

// WhatsApp Cloud, Messenger and Instagram through the full path to one Graph fake, which
// routes by the object id in the path exactly as graph.facebook.com does.

let s: TestServer;
let fake: GraphFake;
let p: PartnerSetup;

beforeAll(async () => {
  fake = await startGraphFake({ templates: [{ name: 'order_shipped', language: 'en_US' }] });
  s = await startTestServer(FAST_DISPATCH);
  p = await setupPartner(s.ctx, {
    balance: '10',
    prices: { whatsapp: '0.02', messenger: '0.001', instagram: '0.001' },
  });
  await whatsappGateway(s.ctx, p.partnerId, fake);
  await messengerGateway(s.ctx, p.partnerId, fake);
  await instagramGateway(s.ctx, p.partnerId, fake);
});
afterAll(async () => {
  await s?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

async function post(body: Record<string, unknown>) {
  const r = await send(s.url, WHATSAPP, body, p.token);
  expect(r.status, r.text).toBe(200);
  return r.body.id as string;
}
const wa = (text = 'Hello from msgd', to = '+14155550123') => post({ to, type: 'text', text });
const replyJson = (i: number) => JSON.parse(fake.requests[i].reply!.body);

describe('WhatsApp Cloud API', () => {
  it('text: POST /{version}/{phone_number_id}/messages with the SDK body, wamid stored', async () => {
    const id = await wa('Grüße aus msgd ✓', '+442071838750');
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests).toHaveLength(1);
    const req = fake.requests[0];
    expect(req.path).toBe(`/v21.0/${WA_PHONE_ID}/messages`);
    expect(req.headers.authorization).toBe(`Bearer ${WA_TOKEN}`);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.body).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '442071838750',
      type: 'text',
      text: { body: 'Grüße aus msgd ✓', preview_url: false },
    });
    const wamid = replyJson(0).messages[0].id;
    expect(wamid).toMatch(/^wamid\./);
    // Replies, reactions and statuses name a WhatsApp message by its wamid alone.
    await expectSent(s.ctx, m, wamid, { indexed: true });
  });

  it('template: name, language code and body parameters as the Cloud API takes them', async () => {
    const id = await post({
      to: '+14155550123',
      type: 'template',
      template: 'order_shipped',
      language: 'en_US',
      parameters: ['Ana', '#42'],
    });
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests[0].body).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '14155550123',
      type: 'template',
      template: {
        name: 'order_shipped',
        language: { code: 'en_US' },
        components: [
          {
            type: 'body',
            parameters: [
              { type: 'text', text: 'Ana' },
              { type: 'text', text: '#42' },
            ],
          },
        ],
      },
    });
    expect(replyJson(0).messages[0].message_status).toBe('accepted');
    await expectSent(s.ctx, m, replyJson(0).messages[0].id);
  });

  it('template, flat shape with components: Graph receives the components', async () => {
    const components = [{ type: 'body', parameters: [{ type: 'text', text: 'Ann' }] }];
    const id = await post({
      to: '+14155550123',
      type: 'template',
      template: 'order_shipped',
      language: 'en_US',
      components,
    });
    await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests[0].body.template).toEqual({ name: 'order_shipped', language: { code: 'en_US' }, components });
  });

  it('rate limit 130429 (HTTP 400) with a hint is retried after the hint, then sent', async () => {
    fake.failNext({ kind: 'rate_limit', retryAfterS: 1 });
    const id = await wa();
    const m = await waitStatus(s.ctx, id, 'sent', 5_000);
    expect(fake.requests.map((r) => r.reply?.status)).toEqual([400, 200]);
    expect(replyJson(0).error.code).toBe(130429);
    expect(fake.requests[1].at - fake.requests[0].at).toBeGreaterThanOrEqual(950);
    await expectSent(s.ctx, m, replyJson(1).messages[0].id);
  });

  it('a 5xx (131000 / transient) is retried, then sent', async () => {
    fake.failNext({ kind: 'status', status: 500 });
    fake.failNext({ kind: 'error', code: 131000 });
    const id = await wa();
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests.map((r) => r.reply?.status)).toEqual([500, 500, 200]);
    await expectSent(s.ctx, m, replyJson(2).messages[0].id);
  });

  it('a timeout is retried, then sent, flagged a possible duplicate', async () => {
    fake.failNext({ kind: 'timeout' });
    const id = await wa();
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[0].reply).toBeUndefined();
    await expectSent(s.ctx, m, replyJson(1).messages[0].id, { uncertain: true });
  });

  it('an unknown template (132001) fails with Meta code and message, refunded', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    const id = await post({ to: '+14155550123', type: 'template', template: 'no_such_template', language: 'en_US' });
    const m = await waitStatus(s.ctx, id, 'failed');
    expect(m.error_message).toMatch(/Template name does not exist/);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, '132001', start);
    expect(fake.requests).toHaveLength(1);
  });

  it('an expired token (190, HTTP 401) fails and refunds', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failNext({ kind: 'error', code: 190 });
    const id = await wa();
    const m = await waitStatus(s.ctx, id, 'failed');
    expect(fake.requests[0].reply!.status).toBe(401);
    expect(m.error_message).toMatch(/Session has expired/);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, '190', start);
  });

  it('retries exhausted: failed, refunded, job dead', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failFor('14155550177', { kind: 'status', status: 503 });
    const id = await wa('x', '+14155550177');
    const m = await waitStatus(s.ctx, id, 'failed', 10_000);
    expect(fake.requests).toHaveLength(4);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, 'retries_exhausted', start);
    expect(await jobsOf(s.ctx, id)).toMatchObject([{ state: 'dead', attempts: 4 }]);
  });
});

describe('Messenger Send API', () => {
  it('POST /{version}/{page_id}/messages with recipient, messaging_type and text; mid stored', async () => {
    const id = await post({ channel: 'messenger', to: '2460102340987654', text: 'Your table is ready' });
    const m = await waitStatus(s.ctx, id, 'sent');
    const req = fake.requests[0];
    expect(req.path).toBe(`/v26.0/${PAGE_ID}/messages`);
    expect(req.headers.authorization).toBe(`Bearer ${PAGE_TOKEN}`);
    expect(req.body).toEqual({
      recipient: { id: '2460102340987654' },
      messaging_type: 'RESPONSE',
      message: { text: 'Your table is ready' },
    });
    expect(replyJson(0)).toEqual({ recipient_id: '2460102340987654', message_id: expect.stringMatching(/^m_/) });
    await expectSent(s.ctx, m, replyJson(0).message_id);
  });

  it('outside the 24 h window (code 10) fails with the code and refunds', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failNext({ kind: 'error', code: 10 });
    const id = await post({ channel: 'messenger', to: '2460102340987654', text: 'late' });
    const m = await waitStatus(s.ctx, id, 'failed');
    expect(m.error_message).toMatch(/outside of allowed window.*subcode 2018278/);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, '10', start);
  });

  it('a 613 rate limit is retried after the hint, then sent', async () => {
    fake.failNext({ kind: 'rate_limit', retryAfterS: 1 });
    const id = await post({ channel: 'messenger', to: '2460102340987654', text: 'x' });
    const m = await waitStatus(s.ctx, id, 'sent', 5_000);
    expect(replyJson(0).error.code).toBe(613);
    await expectSent(s.ctx, m, replyJson(1).message_id);
  });
});

describe('Instagram messaging', () => {
  it('POST /{version}/{ig_account_id}/messages (the current Graph version by default) with recipient, messaging_type and text; mid stored', async () => {
    const id = await post({ channel: 'instagram', to: '6789012345678901', text: 'Thanks for the follow' });
    const m = await waitStatus(s.ctx, id, 'sent');
    const req = fake.requests[0];
    expect(req.path).toBe(`/v26.0/${IG_ID}/messages`);
    expect(req.headers.authorization).toBe(`Bearer ${IG_TOKEN}`);
    expect(req.body).toEqual({
      recipient: { id: '6789012345678901' },
      messaging_type: 'RESPONSE',
      message: { text: 'Thanks for the follow' },
    });
    await expectSent(s.ctx, m, replyJson(0).message_id);
    expect(m.price).toBe(parseMoney('0.001'));
  });

  it('a person who is unavailable (551) fails and refunds; a reset is retried', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failNext({ kind: 'reset' });
    fake.failNext({ kind: 'error', code: 551 });
    const id = await post({ channel: 'instagram', to: '6789012345678901', text: 'x' });
    const m = await waitStatus(s.ctx, id, 'failed');
    expect(fake.requests).toHaveLength(2);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, '551', start);
  });
});
