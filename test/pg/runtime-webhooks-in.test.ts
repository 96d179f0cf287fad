import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { assignChannel } from '../../src/core/channels.js';
import { addGateway } from '../../src/core/gateways.js';
import { sql } from '../../src/db/sql.js';
import { type Server, startServer } from '../../src/server.js';
import { WEBHOOK_PROCESS_JOB } from '../../src/webhooks-in/intake.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { postWebhook, twilioForm, twilioHeaders, type TwilioParams } from '../fakes/webhook-senders.js';
import { runCli } from '../helpers/cli.js';
import { TWILIO_SID, TWILIO_TOKEN, twilioGateway } from '../helpers/gateways.js';
import { postJson, setupPartner } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { migratedDatabase } from './helpers.js';

// msgd on PostgreSQL takes its providers' webhooks all the way: a partner sends an SMS over
// HTTP, Twilio (a fake on 127.0.0.1 answering as Twilio does) takes it, and its signed status
// callback, posted to the URL msgd gave it, moves the message to delivered, as /v1 shows. An
// inbound SMS to a number no channel has is unroutable until the operator adds the channel and
// runs `msgctl webhooks reprocess`.

const db = migratedDatabase();
let twilio: TwilioFake;
let server: Server;
let env: Record<string, string>;
beforeAll(async () => {
  twilio = await startTwilioFake();
  env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex') };
  const config = loadConfig({
    env,
    overrides: { 'server.port': 0, 'server.host': '127.0.0.1', 'demo.enabled': false, 'log.level': 'silent' },
  });
  server = await startServer({ config, env, print: () => {} });
});
afterAll(async () => {
  await server?.close();
  await twilio?.close();
});

/** The webhook's processing outcome, as msgctl webhooks log --json shows it. */
async function processing(id: string): Promise<string> {
  const r = await server.rt.ctx.store.get<{ processing: string }>(
    sql`SELECT processing FROM provider_webhooks WHERE id = ${id}`,
  );
  return r!.processing;
}

/** The message as the partner's GET /v1/messages lists it. */
async function listed(id: string, token: string): Promise<any> {
  const res = await fetch(`${server.url}/v1/messages?limit=10`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { data: { id: string }[] };
  return body.data.find((m) => m.id === id);
}

describe('provider webhooks on PostgreSQL', () => {
  it('a signed Twilio status callback over HTTP moves the sent message to delivered, as /v1 shows', async () => {
    const { rt, url } = server;
    expect(rt.sqliteOnly).not.toContain('webhooksIn');
    expect(rt.worker.registeredKinds()).toContain(WEBHOOK_PROCESS_JOB);
    const p = await setupPartner(rt.ctx, { balance: '10.00', prices: { sms: '0.01' } });
    const gw = await twilioGateway(rt.ctx, p.partnerId, twilio);

    const sent = await postJson(`${url}/api/send-sms.php`, { to: '+14155550123', text: 'over postgres' }, p.token);
    expect(sent.status).toBe(200);
    const id: string = sent.body.id;
    const message = await waitFor(
      async () => {
        const m = await listed(id, p.token);
        return m?.status === 'sent' ? m : undefined;
      },
      'the message sent',
      10_000,
    );
    // Where Twilio reports this message's statuses: the StatusCallback msgd gave it.
    const callback = twilio.requests.findLast((r) => r.body?.Body === 'over postgres')?.body?.StatusCallback as string;
    expect(callback).toBe(`${url}/api/webhook.php?gateway=${gw.gateway.id}&message=${id}`);
    const sid = message.provider_message_id as string;
    expect(sid).toMatch(/^SM/);

    const params: TwilioParams = {
      AccountSid: TWILIO_SID,
      ApiVersion: '2010-04-01',
      From: gw.from,
      MessageSid: sid,
      MessageStatus: 'delivered',
      SmsSid: sid,
      SmsStatus: 'delivered',
      To: '+14155550123',
    };
    const res = await postWebhook(callback, twilioForm(params), twilioHeaders(TWILIO_TOKEN, callback, params));
    expect(res.status).toBe(200);
    const delivered = await waitFor(
      async () => {
        const m = await listed(id, p.token);
        return m?.status === 'delivered' ? m : undefined;
      },
      'the message delivered',
      10_000,
    );
    expect(delivered).toMatchObject({ id, status: 'delivered', provider_message_id: sid });

    // The same callback signed with another token is refused, and changes nothing.
    const forged = await postWebhook(callback, twilioForm(params), twilioHeaders('not-the-token', callback, params));
    expect(forged.status).toBe(401);
  });

  it('an unroutable inbound SMS is processed again by msgctl webhooks reprocess once its channel exists', async () => {
    const { rt, url } = server;
    const p = await setupPartner(rt.ctx, { balance: '1.00' });
    // A Twilio number whose channel the operator has not assigned yet.
    const gw = await addGateway(
      rt.ctx,
      {
        kind: 'twilio',
        name: 'twilio-unassigned',
        settings: { base_url: twilio.url, account_sid: TWILIO_SID },
        secrets: { auth_token: TWILIO_TOKEN },
      },
      'test',
    );
    const number = '+15005550006';
    const hook = `${url}/api/webhook.php?gateway=${gw.id}`;
    const sid = 'SM'.padEnd(34, 'e');
    const params: TwilioParams = {
      ToCountry: 'US',
      SmsMessageSid: sid,
      NumMedia: '0',
      Body: 'is anyone there?',
      From: '+14155550177',
      To: number,
      MessageSid: sid,
      SmsSid: sid,
      SmsStatus: 'received',
      AccountSid: TWILIO_SID,
      NumSegments: '1',
      ApiVersion: '2010-04-01',
    };
    const res = await postWebhook(hook, twilioForm(params), twilioHeaders(TWILIO_TOKEN, hook, params));
    expect(res.status).toBe(200);
    const id = res.headers.get('x-msgd-webhook-id')!;
    await waitFor(async () => (await processing(id)) === 'unroutable', 'the webhook unroutable', 10_000);

    // The operator assigns the number to the partner, then processes the webhook again.
    await assignChannel(rt.ctx, { partner: p.partnerId, gateway: gw.id, type: 'sms', sender: number }, 'test');
    const cli = await runCli(['--json', 'webhooks', 'reprocess', id], { env });
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toEqual({ queued: [id] });
    await waitFor(async () => (await processing(id)) === 'processed', 'the webhook processed', 10_000);
    const inbound = await waitFor(
      async () => {
        const res = await fetch(`${url}/v1/messages?limit=10`, { headers: { authorization: `Bearer ${p.token}` } });
        const body = (await res.json()) as { data: { direction: string; from: string; to: string }[] };
        return body.data.find((m) => m.direction === 'inbound');
      },
      'the inbound message listed',
      10_000,
    );
    expect(inbound).toMatchObject({ from: '+14155550177', to: number });
  });
});
