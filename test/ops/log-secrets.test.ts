import { afterEach, describe, expect, it } from 'vitest';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { connect, postJson, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { postWebhook } from '../fakes/webhook-senders.js';
import { waitFor } from '../helpers/wait.js';
import { SMS, TWILIO_SID, WHATSAPP, send } from '../helpers/gateways.js';
import { redactLine } from '../../src/web/logger.js';

// Canary secrets sent through every path that logs — partner tokens, provider credentials in
// failed sends, webhook signatures and verify tokens, errors carrying request headers, provider
// settings under their own names — appear nowhere in msgd's log output, at the most verbose
// level with the access log on.

let s: TestServer | undefined;
let fake: TwilioFake | undefined;
afterEach(async () => {
  await s?.stop();
  await fake?.close();
  s = fake = undefined;
});

const canary = (n: number) => `CANARY${n}x${Math.random().toString(36).slice(2, 10)}`;

describe('secrets never reach the log', () => {
  it('canaries through requests, sends, webhooks and errors are all redacted', async () => {
    fake = await startTwilioFake();
    s = await startTestServer({ 'log.level': 'trace', 'log.accessLog': true, 'jobs.maxAttempts': 1 });
    const c = Array.from({ length: 14 }, (_, i) => canary(i));
    const p = await setupPartner(s.ctx, { balance: '10', prices: { sms: '0.01', whatsapp: '0.01' } });

    // A Twilio gateway whose credentials the provider refuses: the failure is logged.
    fake.addAccount(TWILIO_SID, 'the-real-token');
    await connect(
      s.ctx,
      p.partnerId,
      {
        kind: 'twilio',
        settings: { base_url: fake.url, account_sid: TWILIO_SID, api_key_sid: `SK${'0'.repeat(32)}` },
        secrets: { auth_token: c[0], api_key_secret: c[1] },
      },
      'sms',
      '+15550002222',
    );
    // A WhatsApp gateway on a dead address: the connection error is logged. The window check is
    // off so the send to a customer who never wrote goes out.
    await connect(
      s.ctx,
      p.partnerId,
      {
        kind: 'whatsapp_cloud',
        settings: {
          base_url: 'http://127.0.0.1:9',
          phone_number_id: '106540352242922',
          customer_service_window: 'off',
        },
        secrets: { access_token: c[2], app_secret: c[3], verify_token: c[4] },
      },
      'whatsapp',
      '+15550003333',
    );
    const sms = await send(s.url, SMS, { to: '+14155550123', text: 'canary' }, p.token);
    expect(sms.status).toBe(200);
    const wa = await send(s.url, WHATSAPP, { to: '+14155550123', type: 'text', text: 'canary' }, p.token);
    expect(wa.status).toBe(200);
    // The partner's own token, a forged one, and one in a second header.
    expect((await postJson(`${s.url}${SMS}`, { to: '+1', text: 'x' }, `msgd_live_${c[5]}`)).status).toBe(401);
    // Webhooks in: a verify token in the query, forged signatures in headers.
    await fetch(`${s.url}/api/webhook.php?hub.mode=subscribe&hub.verify_token=${c[6]}&hub.challenge=1`);
    const body = JSON.stringify({ object: 'whatsapp_business_account', entry: [] });
    const forged = await postWebhook(`${s.url}/api/webhook.php`, body, {
      'content-type': 'application/json',
      'x-hub-signature-256': `sha256=${c[7]}`,
      'x-hub-signature': `sha1=${c[8]}`,
    });
    expect(forged.status).toBe(401);
    await postWebhook(`${s.url}/api/webhook.php`, 'To=%2B1&Body=x', {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': c[9],
    });
    await postWebhook(`${s.url}/api/webhook.php`, '{}', {
      'content-type': 'application/json',
      'x-msgd-sandbox-signature': c[10],
    });
    // Errors and objects that carry secrets deep down, logged as msgd's code would.
    const err = Object.assign(new Error('provider call failed'), {
      request: { headers: { authorization: `Bearer ${c[11]}` } },
    });
    s.rt.logger.error({ err }, 'an error with its request');
    s.rt.logger.info(
      {
        gateway: {
          settings: { page_id: '1' },
          secrets: { page_access_token: c[12] },
          nested: { signing_secret: c[13] },
        },
      },
      'a gateway',
    );
    s.rt.logger.info({ sent: { page_access_token: c[12], api_key_secret: c[1], signing_secret: c[13] } }, 'names');

    await waitFor(
      () => s!.logs.join('').includes('send failed') || s!.logs.join('').includes('send attempt failed'),
      'the failed sends in the log',
      10_000,
    );
    await waitFor(
      () => (s!.logs.join('').match(/send (attempt )?failed/g) ?? []).length >= 2,
      'both failed sends',
      10_000,
    );
    const out = s.logs.join('');
    expect(out).toContain('provider webhook refused');
    expect(out).toContain('"msg":"request"');
    expect(out).toContain('[redacted]');
    for (const secret of [...c, p.token]) expect(out, secret).not.toContain(secret);
  }, 30_000);

  it('redactLine censors secret-named string fields at any depth and leaves the rest', () => {
    const line = JSON.stringify({
      a: { b: { c: { authorization: 'Bearer x1', 'x-hub-signature-256': 'sha256=x2', ok: 'kept' } } },
      page_access_token: 'x3',
      api_key_secret: 'x4',
      signing_secret: 'x5',
      'x-msgd-sandbox-signature': 'x6',
      sessionId: 'x7',
      token_prefix_len: 4,
      message_id: 'msg_1',
      note: 'a "quoted" \\ value',
    });
    const out = redactLine(line);
    for (const x of ['x1', 'x2', 'x3', 'x4', 'x5', 'x6', 'x7']) expect(out).not.toContain(`"${x}`);
    const parsed = JSON.parse(out);
    expect(parsed.a.b.c).toEqual({ authorization: '[redacted]', 'x-hub-signature-256': '[redacted]', ok: 'kept' });
    expect(parsed.message_id).toBe('msg_1');
    expect(parsed.token_prefix_len).toBe(4);
    expect(parsed.note).toBe('a "quoted" \\ value');
  });
});
