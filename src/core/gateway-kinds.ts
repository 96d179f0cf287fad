import { createPublicKey } from 'node:crypto';
import { z } from 'zod';
import { CHANNEL_TYPES, type ChannelType, type GatewayKind } from './context.js';

// The declarative shape of each provider account: which channels it can serve, which
// non-secret settings it takes (validated here) and which secrets it needs. How each
// provider is spoken to lives in src/providers/<kind>/.

const url = z.url({ protocol: /^https?$/ });
/**
 * The Graph API version a Meta gateway calls unless its `api_version` says otherwise: the one
 * Meta's docs use (FACTS A1). Meta keeps each version for about two years; a gateway stores the
 * version it was created with, and `msgctl gateway update <gw> --set api_version=vNN.0` moves it.
 */
export const GRAPH_API_VERSION = 'v26.0';

/** The kinds that call Meta's Graph API: one app secret signs their webhooks, one api_version each. */
export const META_KINDS: readonly GatewayKind[] = ['whatsapp_cloud', 'meta_messenger', 'meta_instagram'];
const version = z.string().regex(/^v\d+\.\d+$/, `expected a Graph API version such as ${GRAPH_API_VERSION}`);
// Settings arrive as JSON values or as strings from the command line: "false" must mean false
// (z.coerce.boolean would read any non-empty string as true) and "" must not become 0.
const TRUE = ['true', 'yes', 'on', '1'];
const FALSE = ['false', 'no', 'off', '0'];
const bool = z.unknown().transform((v, ctx) => {
  if (typeof v === 'boolean') return v;
  const s = typeof v === 'string' ? v.trim().toLowerCase() : undefined;
  if (s !== undefined && TRUE.includes(s)) return true;
  if (s !== undefined && FALSE.includes(s)) return false;
  ctx.addIssue({ code: 'custom', message: `expected true or false, got ${JSON.stringify(v)}` });
  return z.NEVER;
});
const num = (min: number, max: number, opts: { integer?: boolean } = {}) =>
  z.unknown().transform((v, ctx) => {
    const shape = opts.integer ? /^-?\d+$/ : /^-?\d+(\.\d+)?$/;
    const n = typeof v === 'number' ? v : typeof v === 'string' && shape.test(v.trim()) ? Number(v) : NaN;
    if (!Number.isFinite(n) || (opts.integer && !Number.isInteger(n))) {
      ctx.addIssue({ code: 'custom', message: `expected a number, got ${JSON.stringify(v)}` });
      return z.NEVER;
    }
    if (n < min || n > max) {
      ctx.addIssue({ code: 'custom', message: `expected a number from ${min} to ${max}, got ${n}` });
      return z.NEVER;
    }
    return n;
  });
const int = (min: number, max: number) => num(min, max, { integer: true });
// Messages per second: a fraction is fine (Twilio long codes: 1/s, or 0.5/s).
const rate = num(0.001, 100_000).optional();

export interface GatewayKindSpec {
  kind: GatewayKind;
  label: string;
  channels: readonly ChannelType[];
  settings: z.ZodObject<any>;
  secrets: { required: readonly string[]; optional: readonly string[] };
  /** Checks of a secret's form where one is knowable (a key that must parse): the problem, or null. */
  secretChecks?: Record<string, (value: string) => string | null>;
  /**
   * A setting and a secret that work only together. `needs: 'secret'`: the setting makes the
   * secret required (Twilio's api_key_sid needs api_key_secret); `needs: 'setting'`: the secret
   * is used only with the setting (SMTP's password is sent only with a user).
   */
  pairs?: readonly { setting: string; secret: string; needs: 'secret' | 'setting' }[];
}

/** SendGrid shows its Event Webhook verification key as base64 SPKI DER; PEM is taken too. */
function ecPublicKeyProblem(value: string): string | null {
  const text = value.trim();
  try {
    const key = text.startsWith('-----BEGIN')
      ? createPublicKey({ key: text, format: 'pem' })
      : createPublicKey({ key: Buffer.from(text, 'base64'), format: 'der', type: 'spki' });
    if (key.asymmetricKeyType !== 'ec')
      return `expected an ECDSA public key, got ${key.asymmetricKeyType ?? 'another kind'}`;
    return null;
  } catch {
    return 'not a public key: paste the Verification Key from SendGrid (Settings > Mail Settings > Event Webhook > Signed Event Webhook), base64 or PEM';
  }
}

/**
 * Meta's 24-hour customer-service window (src/core/customer-window.ts): msgd refuses a free-form
 * message outside it unless this is `off` (for a business number or page whose inbound messages
 * go elsewhere, so msgd cannot see the window).
 */
const customerServiceWindow = {
  customer_service_window: z.enum(['enforce', 'off']).optional(),
};

/** The Send API's messaging_type (Messenger and Instagram), and the tag a MESSAGE_TAG send needs. */
const messagingType = {
  messaging_type: z.enum(['RESPONSE', 'UPDATE', 'MESSAGE_TAG']).default('RESPONSE'),
  /** Sent only with MESSAGE_TAG: Meta's message tag, e.g. HUMAN_AGENT or ACCOUNT_UPDATE. */
  tag: z
    .string()
    .regex(/^[A-Z][A-Z_]*$/, 'expected a Meta message tag such as HUMAN_AGENT or ACCOUNT_UPDATE')
    .optional(),
};

/** Graph refuses every MESSAGE_TAG send without a tag: refuse the setting instead. */
function tagRequired(s: { messaging_type: string; tag?: string }, ctx: z.RefinementCtx) {
  if (s.messaging_type === 'MESSAGE_TAG' && !s.tag) {
    ctx.addIssue({
      code: 'custom',
      path: ['tag'],
      message: 'messaging_type MESSAGE_TAG needs a tag, e.g. tag=HUMAN_AGENT: Meta refuses tagged messages without one',
    });
  }
}

export const GATEWAY_KINDS: Record<GatewayKind, GatewayKindSpec> = {
  whatsapp_cloud: {
    kind: 'whatsapp_cloud',
    label: 'Meta WhatsApp Cloud API',
    channels: ['whatsapp'],
    settings: z
      .object({
        base_url: url.default('https://graph.facebook.com'),
        api_version: version.default(GRAPH_API_VERSION),
        phone_number_id: z.string().regex(/^\d+$/, 'expected the numeric phone number id'),
        waba_id: z.string().regex(/^\d+$/).optional(),
        ...customerServiceWindow,
        rate_per_second: rate,
      })
      .strict(),
    secrets: { required: ['access_token'], optional: ['app_secret', 'verify_token'] },
  },
  meta_messenger: {
    kind: 'meta_messenger',
    label: 'Meta Messenger Send API',
    channels: ['messenger'],
    settings: z
      .object({
        base_url: url.default('https://graph.facebook.com'),
        api_version: version.default(GRAPH_API_VERSION),
        page_id: z.string().regex(/^\d+$/, 'expected the numeric page id'),
        ...messagingType,
        ...customerServiceWindow,
        rate_per_second: rate,
      })
      .strict()
      .superRefine(tagRequired),
    secrets: { required: ['page_access_token'], optional: ['app_secret', 'verify_token'] },
  },
  meta_instagram: {
    kind: 'meta_instagram',
    label: 'Meta Instagram Messaging',
    channels: ['instagram'],
    settings: z
      .object({
        /** Unset: graph.facebook.com with page_id (Facebook Login), graph.instagram.com without (Instagram Login). */
        base_url: url.optional(),
        api_version: version.default(GRAPH_API_VERSION),
        ig_account_id: z.string().regex(/^\d+$/, 'expected the numeric Instagram account id'),
        /** Facebook Login flow sends through the page; Instagram Login flow through the IG account. */
        page_id: z.string().regex(/^\d+$/).optional(),
        ...messagingType,
        ...customerServiceWindow,
        rate_per_second: rate,
      })
      .strict()
      .superRefine(tagRequired),
    secrets: { required: ['access_token'], optional: ['app_secret', 'verify_token'] },
  },
  twilio: {
    kind: 'twilio',
    label: 'Twilio Programmable Messaging',
    channels: ['sms'],
    settings: z
      .object({
        base_url: url.default('https://api.twilio.com'),
        account_sid: z.string().regex(/^AC[0-9a-zA-Z]{1,64}$/, 'expected an account SID starting with AC'),
        messaging_service_sid: z
          .string()
          .regex(/^MG[0-9a-zA-Z]+$/)
          .optional(),
        /** Send with an API key (SK…, with the secret api_key_secret) instead of the auth token, as Twilio recommends. */
        api_key_sid: z
          .string()
          .regex(/^SK[0-9a-zA-Z]{1,64}$/, 'expected an API key SID starting with SK')
          .optional(),
        rate_per_second: rate,
      })
      .strict(),
    // auth_token stays required with an API key: Twilio signs its webhooks with it.
    secrets: { required: ['auth_token'], optional: ['api_key_secret'] },
    pairs: [{ setting: 'api_key_sid', secret: 'api_key_secret', needs: 'secret' }],
  },
  sendgrid: {
    kind: 'sendgrid',
    label: 'SendGrid v3 Mail Send',
    channels: ['email'],
    settings: z
      .object({
        base_url: url.default('https://api.sendgrid.com'),
        rate_per_second: rate,
      })
      .strict(),
    secrets: { required: ['api_key'], optional: ['webhook_public_key'] },
    secretChecks: { webhook_public_key: ecPublicKeyProblem },
  },
  smtp: {
    kind: 'smtp',
    label: 'SMTP relay',
    channels: ['email'],
    settings: z
      .object({
        host: z.string().min(1),
        /** Default: 465 with secure, else 587. */
        port: int(1, 65535).optional(),
        /** true: TLS from the first byte (port 465); false: STARTTLS when offered. */
        secure: bool.default(false),
        require_tls: bool.default(false),
        tls_reject_unauthorized: bool.default(true),
        user: z.string().optional(),
        rate_per_second: rate,
      })
      .strict(),
    secrets: { required: [], optional: ['password'] },
    // A password without a user is never sent. (A user without a password is sent no AUTH by a
    // relay that offers none, and meets a 535 at one that does: nodemailer logs in only when offered.)
    pairs: [{ setting: 'user', secret: 'password', needs: 'setting' }],
  },
  sandbox: {
    kind: 'sandbox',
    label: 'Sandbox (no provider: accepts and reports delivered)',
    channels: CHANNEL_TYPES,
    settings: z
      .object({
        delivery_delay_ms: int(0, 600_000).default(300),
        rate_per_second: rate,
      })
      .strict(),
    secrets: { required: [], optional: ['signing_secret'] },
  },
};

export function isGatewayKind(k: string): k is GatewayKind {
  return Object.prototype.hasOwnProperty.call(GATEWAY_KINDS, k);
}
