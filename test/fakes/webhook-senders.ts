import { createHmac, generateKeyPairSync, sign as ecSign, type KeyObject } from 'node:crypto';
import { asciiJson } from './common.js';

// The providers' side of inbound webhooks: payloads shaped and signed exactly as Meta,
// Twilio, SendGrid and msgd's sandbox send them (shared/providers/FACTS.md A2-A4, B2-B3,
// C2-C3, D2-D4). The signers are written from the providers' SDK algorithms, independently
// of src/, and test/webhooks-in/vectors.test.ts proves them against the official vectors.

export { asciiJson };

const hmacHex = (algo: string, key: string, body: string | Buffer) => createHmac(algo, key).update(body).digest('hex');

// ---- Meta (WhatsApp, Messenger, Instagram)

/** Both headers, as Meta sends them. */
export function metaHeaders(appSecret: string, body: string | Buffer): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-hub-signature-256': `sha256=${hmacHex('sha256', appSecret, body)}`,
    'x-hub-signature': `sha1=${hmacHex('sha1', appSecret, body)}`,
  };
}

export interface WaStatus {
  id: string;
  status: string;
  recipient_id?: string;
  timestamp?: string;
  errors?: unknown[];
}

function waEnvelope<V extends object>(phoneNumberId: string, value: V, display = '15550783881') {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: '102290129340398',
        changes: [
          {
            field: 'messages',
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: display, phone_number_id: phoneNumberId },
              ...value,
            },
          },
        ],
      },
    ],
  };
}

export function waStatuses(phoneNumberId: string, statuses: WaStatus[], display?: string) {
  const now = String(Math.floor(Date.now() / 1000));
  return waEnvelope(
    phoneNumberId,
    { statuses: statuses.map((s) => ({ recipient_id: '16505551234', timestamp: now, ...s })) },
    display,
  );
}

/** One entry of a WhatsApp webhook's `messages`: any of the message types' fields. */
export type WaMessage = Record<string, unknown> & { from: string; id: string };

export function waInbound(phoneNumberId: string, msg: WaMessage, opts: { name?: string; display?: string } = {}) {
  const messages: WaMessage[] = [{ timestamp: String(Math.floor(Date.now() / 1000)), type: 'text', ...msg }];
  return waEnvelope(
    phoneNumberId,
    {
      contacts: [{ profile: { name: opts.name ?? 'Sheena Nelson' }, wa_id: msg.from }],
      messages,
    },
    opts.display,
  );
}

export function pageEvent(pageId: string, messaging: Record<string, unknown>[]) {
  return { object: 'page', entry: [{ id: pageId, time: Date.now(), messaging }] };
}

export function instagramEvent(igId: string, messaging: Record<string, unknown>[], opts: { wrapped?: boolean } = {}) {
  const n = { object: 'instagram', entry: [{ id: igId, time: Date.now(), messaging }] };
  return opts.wrapped ? [n] : n;
}

// ---- Twilio

export type TwilioParams = Record<string, string | string[]>;

/** twilio-node getExpectedTwilioSignature: URL + each key (code-unit order) + value, HMAC-SHA1, base64. */
export function twilioSign(authToken: string, url: string, params: TwilioParams): string {
  const data = Object.keys(params)
    .sort()
    .reduce((acc, key) => {
      const v = params[key];
      return (
        acc +
        (Array.isArray(v)
          ? [...new Set(v)]
              .sort()
              .map((x) => key + x)
              .join('')
          : key + v)
      );
    }, url);
  return createHmac('sha1', authToken).update(Buffer.from(data, 'utf-8')).digest('base64');
}

export function twilioForm(params: TwilioParams): string {
  const f = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) for (const x of Array.isArray(v) ? v : [v]) f.append(k, x);
  return f.toString();
}

export function twilioHeaders(authToken: string, url: string, params: TwilioParams): Record<string, string> {
  return {
    'content-type': 'application/x-www-form-urlencoded',
    'x-twilio-signature': twilioSign(authToken, url, params),
    'user-agent': 'TwilioProxy/1.1',
  };
}

// ---- SendGrid

export interface SendgridSigner {
  /** base64 SPKI DER, as GET /v3/user/webhooks/event/settings/signed returns it. */
  publicKey: string;
  headers(body: string | Buffer, timestamp?: string): Record<string, string>;
}

export function sendgridSigner(): SendgridSigner {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return {
    publicKey: (publicKey as KeyObject).export({ format: 'der', type: 'spki' }).toString('base64'),
    headers(body, timestamp = String(Math.floor(Date.now() / 1000))) {
      const sig = ecSign('sha256', Buffer.concat([Buffer.from(timestamp), Buffer.from(body)]), {
        key: privateKey,
        dsaEncoding: 'der',
      });
      return {
        'content-type': 'application/json',
        'x-twilio-email-event-webhook-signature': sig.toString('base64'),
        'x-twilio-email-event-webhook-timestamp': timestamp,
      };
    },
  };
}

// ---- msgd sandbox

export function sandboxHeaders(secret: string, body: string | Buffer): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-msgd-sandbox-signature': `sha256=${hmacHex('sha256', secret, body)}`,
  };
}

// ---- HTTP

export interface Posted {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** POST the exact bytes given (a string is sent as its UTF-8 bytes, unchanged). */
export async function postWebhook(
  url: string,
  body: string | Buffer,
  headers: Record<string, string>,
): Promise<Posted> {
  // fetch's body type takes bytes over an ArrayBuffer, which a Buffer's memory need not be: copied, byte for byte.
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : new Uint8Array(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}
