import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { startSendgridFake, type SendgridFake } from '../fakes/sendgrid.js';
import { newDispatcher } from './helpers.js';

// The fakes are shared by integration tests, so their refusals must match the real APIs.

const dispatcher = newDispatcher();
let graph: GraphFake;
let twilio: TwilioFake;
let sendgrid: SendgridFake;

async function post(url: string, headers: Record<string, string>, body: string) {
  const res = await request(url, { method: 'POST', headers, body, dispatcher });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, json: text ? JSON.parse(text) : undefined };
}

beforeAll(async () => {
  graph = await startGraphFake({
    accounts: [
      { id: '111', kind: 'page', token: 'ptok' },
      { id: '222', kind: 'whatsapp', token: 'wtok' },
      { id: '333', kind: 'instagram', token: 'itok' },
    ],
  });
  twilio = await startTwilioFake({ accounts: { AC1: 'tok' } });
  sendgrid = await startSendgridFake({ apiKeys: ['SG.k'] });
});
afterAll(async () => {
  await Promise.all([graph.close(), twilio.close(), sendgrid.close()]);
  await dispatcher.close();
});

const JSON_CT = { 'content-type': 'application/json' };
const twilioAuth = { authorization: `Basic ${Buffer.from('AC1:tok').toString('base64')}` };
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

describe('graph fake', () => {
  it('accepts the page token as ?access_token and rejects a missing one with 190', async () => {
    const body = JSON.stringify({ recipient: { id: 'P' }, message: { text: 'x' } });
    const ok = await post(`${graph.url}/v21.0/me/messages?access_token=ptok`, JSON_CT, body);
    const none = await post(`${graph.url}/v21.0/111/messages`, JSON_CT, body);
    expect(ok.status).toBe(200);
    expect(ok.json.recipient_id).toBe('P');
    expect(none.status).toBe(401);
    expect(none.json.error).toMatchObject({ type: 'OAuthException', code: 190, fbtrace_id: expect.any(String) });
  });

  it('requires messaging_product on WhatsApp and refuses unknown object ids', async () => {
    const auth = { ...JSON_CT, authorization: 'Bearer wtok' };
    const noProduct = await post(
      `${graph.url}/v21.0/222/messages`,
      auth,
      JSON.stringify({ to: '16505551234', text: { body: 'x' } }),
    );
    const unknown = await post(`${graph.url}/v21.0/999/messages`, auth, '{}');
    expect(noProduct.status).toBe(400);
    expect(noProduct.json.error).toMatchObject({
      code: 100,
      message: '(#100) The parameter messaging_product is required.',
    });
    expect(unknown.json.error).toMatchObject({ code: 100, error_subcode: 33 });
  });

  it('reads the body only as JSON or a form, by its Content-Type, as Graph does', async () => {
    const wa = JSON.stringify({ messaging_product: 'whatsapp', to: '16505551234', type: 'text', text: { body: 'x' } });
    const page = JSON.stringify({ recipient: { id: 'P' }, message: { text: 'x' } });
    for (const type of [undefined, 'text/plain']) {
      const headers = (token: string): Record<string, string> => ({
        authorization: `Bearer ${token}`,
        ...(type ? { 'content-type': type } : {}),
      });
      const w = await post(`${graph.url}/v21.0/222/messages`, headers('wtok'), wa);
      const p = await post(`${graph.url}/v21.0/111/messages`, headers('ptok'), page);
      expect([w.status, w.json.error.message]).toEqual([400, '(#100) The parameter messaging_product is required.']);
      expect([p.status, p.json.error.message]).toEqual([400, '(#100) The parameter recipient is required']);
    }
    expect(
      (await post(`${graph.url}/v21.0/222/messages`, { ...JSON_CT, authorization: 'Bearer wtok' }, wa)).status,
    ).toBe(200);
  });

  it('limits Messenger text to 2000 characters and Instagram text to 1000 bytes of UTF-8', async () => {
    const send = (id: string, token: string, text: string) =>
      post(
        `${graph.url}/v21.0/${id}/messages`,
        { ...JSON_CT, authorization: `Bearer ${token}` },
        JSON.stringify({ recipient: { id: 'P' }, message: { text } }),
      );
    expect((await send('333', 'itok', 'x'.repeat(1000))).status).toBe(200);
    expect((await send('333', 'itok', 'x'.repeat(1001))).json.error.message).toBe(
      '(#100) Length of param message[text] must be less than or equal to 1000 bytes',
    );
    expect((await send('333', 'itok', 'é'.repeat(500))).status).toBe(200);
    expect((await send('333', 'itok', 'é'.repeat(501))).status).toBe(400);
    expect((await send('111', 'ptok', 'x'.repeat(2000))).status).toBe(200);
    expect((await send('111', 'ptok', 'x'.repeat(2001))).json.error.message).toBe(
      '(#100) Length of param message[text] must be less than or equal to 2000',
    );
  });
});

describe('twilio fake', () => {
  const url = () => `${twilio.url}/2010-04-01/Accounts/AC1/Messages.json`;

  it('answers 401 20003 without credentials', async () => {
    const r = await post(url(), FORM, 'To=%2B15550001111&From=%2B15550002222&Body=x');
    expect(r.status).toBe(401);
    expect(r.json).toEqual({
      code: 20003,
      message: 'Authenticate',
      more_info: 'https://www.twilio.com/docs/errors/20003',
      status: 401,
    });
  });

  it('needs From or MessagingServiceSid, and reads only form bodies', async () => {
    const noFrom = await post(url(), { ...FORM, ...twilioAuth }, 'To=%2B15550001111&Body=x');
    const asJson = await post(
      url(),
      { ...JSON_CT, ...twilioAuth },
      JSON.stringify({ To: '+15550001111', From: '+15550002222', Body: 'x' }),
    );
    expect(noFrom.json.code).toBe(21603);
    expect(asJson.json.code).toBe(21604);
  });

  it('counts UCS-2 segments as strings', async () => {
    const body = new URLSearchParams({
      To: '+15550001111',
      From: '+15550002222',
      Body: 'Grüße 👍 '.repeat(10),
    }).toString();
    const r = await post(url(), { ...FORM, ...twilioAuth }, body);
    expect(r.status).toBe(201);
    expect(r.json.num_segments).toBe('2');
    expect(r.json.status).toBe('queued');
  });
});

describe('sendgrid fake', () => {
  const url = () => `${sendgrid.url}/v3/mail/send`;
  const base = {
    personalizations: [{ to: [{ email: 'a@example.com' }] }],
    from: { email: 'b@example.com' },
    subject: 's',
  };

  it('refuses text/html before text/plain and a missing key', async () => {
    const auth = { ...JSON_CT, authorization: 'Bearer SG.k' };
    const wrongOrder = await post(
      url(),
      auth,
      JSON.stringify({
        ...base,
        content: [
          { type: 'text/html', value: '<b>x</b>' },
          { type: 'text/plain', value: 'x' },
        ],
      }),
    );
    const noKey = await post(url(), JSON_CT, JSON.stringify(base));
    expect(wrongOrder.status).toBe(400);
    expect(wrongOrder.json.errors[0]).toMatchObject({ field: 'content' });
    expect(noKey.status).toBe(401);
    expect(noKey.json).toEqual({ errors: [{ field: null, message: 'authorization required' }] });
  });

  it('answers 200 with no message id in sandbox mode', async () => {
    const auth = { ...JSON_CT, authorization: 'Bearer SG.k' };
    const body = {
      ...base,
      content: [{ type: 'text/plain', value: 'x' }],
      mail_settings: { sandbox_mode: { enable: true } },
    };
    const r = await post(url(), auth, JSON.stringify(body));
    expect(r.status).toBe(200);
    expect(r.headers['x-message-id']).toBeUndefined();
  });
});
