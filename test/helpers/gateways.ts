import { randomBytes } from 'node:crypto';
import type { CoreCtx } from '../../src/core/context.js';
import { connect, postJson, setupPartner, type PartnerSetup } from './server.js';
import type { GraphFake } from '../fakes/graph.js';
import type { TwilioFake } from '../fakes/twilio.js';
import type { SendgridFake } from '../fakes/sendgrid.js';
import type { SmtpFake } from '../fakes/smtp.js';

// Partners with gateways: on the sandbox for the send-API tests, pointed at the fake providers
// for dispatch. Every sender is unique in its data dir, so many partners can share one server.

let seq = 0;
const run = randomBytes(2).readUInt16BE(0) % 9000;

/** A sender address no other partner in this data dir has for the channel type. */
export function sender(type: string): string {
  seq += 1;
  const n = String(run * 1000 + seq).padStart(7, '0');
  switch (type) {
    case 'sms':
    case 'whatsapp':
      return `+1555${n}`;
    case 'email':
      return `sender${n}@example.com`;
    default:
      return `9${n}`;
  }
}

export const SMS = '/api/send-sms.php';
export const EMAIL = '/api/send-email.php';
export const WHATSAPP = '/api/send-whatsapp.php';

/** A partner with a sandbox gateway on the given channel types. */
export async function sandboxPartner(
  ctx: CoreCtx,
  opts: Parameters<typeof setupPartner>[1] & { channels?: string[] } = {},
): Promise<PartnerSetup & { gateways: Record<string, string> }> {
  const p = await setupPartner(ctx, opts);
  const channels = opts.channels ?? ['sms', 'email', 'whatsapp', 'messenger', 'instagram'];
  const gateways: Record<string, string> = {};
  for (const type of channels) {
    // The delivery report is far away: these tests are about the send API, not the sandbox.
    const { gateway } = await connect(
      ctx,
      p.partnerId,
      { kind: 'sandbox', settings: { delivery_delay_ms: 600_000 } },
      type,
      sender(type),
    );
    gateways[type] = gateway.id;
  }
  return { ...p, gateways };
}

export const send = (base: string, path: string, body: unknown, token?: string, headers: Record<string, string> = {}) =>
  postJson(base + path, body, token, headers);

// Gateways pointed at the fakes. Rates are high unless a test is about shaping.

export const TWILIO_SID = `AC${'1a2b3c4d'.repeat(4)}`;
export const TWILIO_TOKEN = 'twilio_auth_token_1';
export const WA_PHONE_ID = '106540352242922';
export const WA_TOKEN = 'EAAG-whatsapp-token';
export const PAGE_ID = '682498302938465';
export const PAGE_TOKEN = 'EAAG-page-token';
export const IG_ID = '17841400000000001';
export const IG_TOKEN = 'IGQ-instagram-token';
export const SG_KEY = 'SG.test-key.abcdef';

export async function twilioGateway(
  ctx: CoreCtx,
  partnerId: string,
  fake: TwilioFake,
  settings: Record<string, unknown> = {},
) {
  fake.addAccount(TWILIO_SID, TWILIO_TOKEN);
  const from = sender('sms');
  const r = await connect(
    ctx,
    partnerId,
    {
      kind: 'twilio',
      settings: { base_url: fake.url, account_sid: TWILIO_SID, rate_per_second: 10_000, ...settings },
      secrets: { auth_token: TWILIO_TOKEN },
    },
    'sms',
    from,
  );
  return { ...r, from };
}

export async function whatsappGateway(
  ctx: CoreCtx,
  partnerId: string,
  fake: GraphFake,
  settings: Record<string, unknown> = {},
) {
  fake.addAccount({ id: WA_PHONE_ID, kind: 'whatsapp', token: WA_TOKEN });
  const from = sender('whatsapp');
  const r = await connect(
    ctx,
    partnerId,
    {
      kind: 'whatsapp_cloud',
      settings: {
        base_url: fake.url,
        api_version: 'v21.0',
        phone_number_id: WA_PHONE_ID,
        rate_per_second: 10_000,
        // Off: these sends reach Graph for customers who never wrote, to test dispatch and Graph's
        // own answers; msgd's window check has its own suite (test/http/customer-window.test.ts).
        customer_service_window: 'off',
        ...settings,
      },
      secrets: { access_token: WA_TOKEN },
    },
    'whatsapp',
    from,
  );
  return { ...r, from };
}

export async function messengerGateway(ctx: CoreCtx, partnerId: string, fake: GraphFake) {
  fake.addAccount({ id: PAGE_ID, kind: 'page', token: PAGE_TOKEN });
  return await connect(
    ctx,
    partnerId,
    {
      kind: 'meta_messenger',
      settings: { base_url: fake.url, page_id: PAGE_ID, rate_per_second: 10_000, customer_service_window: 'off' },
      secrets: { page_access_token: PAGE_TOKEN },
    },
    'messenger',
  );
}

export async function instagramGateway(ctx: CoreCtx, partnerId: string, fake: GraphFake) {
  fake.addAccount({ id: IG_ID, kind: 'instagram', token: IG_TOKEN });
  return await connect(
    ctx,
    partnerId,
    {
      kind: 'meta_instagram',
      settings: { base_url: fake.url, ig_account_id: IG_ID, rate_per_second: 10_000, customer_service_window: 'off' },
      secrets: { access_token: IG_TOKEN },
    },
    'instagram',
  );
}

export async function sendgridGateway(ctx: CoreCtx, partnerId: string, fake: SendgridFake) {
  fake.apiKeys.add(SG_KEY);
  const from = sender('email');
  const r = await connect(
    ctx,
    partnerId,
    { kind: 'sendgrid', settings: { base_url: fake.url, rate_per_second: 10_000 }, secrets: { api_key: SG_KEY } },
    'email',
    from,
  );
  return { ...r, from };
}

export async function smtpGateway(
  ctx: CoreCtx,
  partnerId: string,
  fake: SmtpFake,
  auth?: { user: string; pass: string },
) {
  const from = sender('email');
  const r = await connect(
    ctx,
    partnerId,
    {
      kind: 'smtp',
      settings: {
        host: fake.host,
        port: fake.port,
        secure: false,
        rate_per_second: 10_000,
        ...(auth ? { user: auth.user } : {}),
      },
      secrets: auth ? { password: auth.pass } : {},
    },
    'email',
    from,
  );
  return { ...r, from };
}

/** Fast retries and a short provider timeout, so failure paths run in test time. */
export const FAST_DISPATCH = {
  'dispatch.timeoutMs': 300,
  'jobs.backoffBaseMs': 10,
  'jobs.backoffCapMs': 1000,
  'jobs.maxAttempts': 4,
};
