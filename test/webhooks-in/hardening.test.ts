import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { twilioForm, twilioHeaders } from '../fakes/webhook-senders.js';
import { lastRow, processed } from '../helpers/webhook-log.js';
import { waitFor } from '../helpers/wait.js';

// Inputs a provider would never send, but an attacker or a broken proxy might.

let s: TestServer;
const AUTH = 'hardening-auth-token';
const VERIFY = 'hardening-verify-token-XYZ';

beforeAll(async () => {
  // A short dispatch timeout: a status for an unknown message is waited on for about that long.
  s = await startTestServer({ 'log.level': 'debug', 'dispatch.timeoutMs': 2000 });
  const p = await setupPartner(s.ctx);
  await connect(
    s.ctx,
    p.partnerId,
    {
      kind: 'twilio',
      name: 'tw-hard',
      settings: { account_sid: 'AC' + '1'.repeat(32) },
      secrets: { auth_token: AUTH },
    },
    'sms',
    '+15017250604',
  );
  await connect(
    s.ctx,
    p.partnerId,
    {
      kind: 'meta_messenger',
      name: 'fb-hard',
      settings: { page_id: '4242' },
      secrets: { page_access_token: 't', app_secret: 's', verify_token: VERIFY },
    },
    'messenger',
  );
});
afterAll(() => s.stop());

function rawPost(path: string, host: string, headers: Record<string, string>, body: string): Promise<number> {
  const u = new URL(s.url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path,
        method: 'POST',
        setHost: false,
        headers: { host, ...headers, 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('webhooks in: hostile input', () => {
  it('a Twilio-shaped POST with a Host that makes no URL is a logged 401, not a 500', async () => {
    const params = { AccountSid: 'AC' + '1'.repeat(32), MessageSid: 'SM1', MessageStatus: 'delivered' };
    for (const host of ['a b', '[', 'x:99999']) {
      const status = await rawPost(
        '/api/webhook.php',
        host,
        { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': 'abc' },
        twilioForm(params),
      );
      expect(status, host).toBe(401);
      expect(await lastRow(s.ctx)).toMatchObject({ provider: 'twilio', verification: 'failed' });
    }
  });

  it('status names that are Object.prototype keys are ignored as unknown, not applied', async () => {
    const url = `${s.url}/api/webhook.php`;
    const params = {
      AccountSid: 'AC' + '1'.repeat(32),
      MessageSid: 'SMproto',
      MessageStatus: 'constructor',
      constructor: 'x',
      toString: 'y',
    };
    const res = await fetch(url, {
      method: 'POST',
      headers: twilioHeaders(AUTH, url, params),
      body: twilioForm(params),
    });
    expect(res.status).toBe(200);
    const row = await processed(s.ctx, (await lastRow(s.ctx)).id);
    expect(row.verification).toBe('ok');
    expect(row.processing).not.toBe('error');
  });

  it('the Meta verify token never reaches the log, even at debug level', async () => {
    const res = await fetch(
      `${s.url}/api/webhook-messenger.php?hub.mode=subscribe&hub.verify_token=${VERIFY}&hub.challenge=77`,
    );
    expect(await res.text()).toBe('77');
    await waitFor(() => s.logs.join('').includes('/api/webhook-messenger.php'), 'the request to be logged');
    expect(s.logs.join('')).not.toContain(VERIFY);
  });
});
