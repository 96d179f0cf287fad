import { metaAppWebhook } from './meta-app/webhook.js';
import { messengerWebhook, instagramWebhook } from './meta-messenger/webhook.js';
import { sandboxWebhook } from './sandbox/webhook.js';
import { sendgridWebhook } from './sendgrid/webhook.js';
import { twilioWebhook } from './twilio/webhook.js';
import { whatsappWebhook } from './whatsapp-cloud/webhook.js';
import type { ProviderEvent } from '../core/inbound.js';
import type { WebhookLogRow } from '../core/webhook-log.js';
import type { RawWebhook, WebhookHandler, WebhookProvider } from './webhook-common.js';

// Which provider sent a webhook. The shapes are disjoint (Meta's `object` names, SendGrid's
// arrays of `event`s, Twilio's form params with AccountSid, the sandbox's own object), and
// header-dependent forms (Twilio JSON, a lone SendGrid event) need their signature header
// present, so every handler is asked in turn and the first that recognises the body wins.

export type { ProviderEvent as NormalizedEvent, Receiver, StatusRef } from '../core/inbound.js';
export type { GatewayHint, RawWebhook, VerifyOptions, WebhookHandler, WebhookProvider } from './webhook-common.js';

const HANDLERS: readonly WebhookHandler[] = [
  whatsappWebhook,
  messengerWebhook,
  instagramWebhook,
  sendgridWebhook,
  twilioWebhook,
  sandboxWebhook,
  metaAppWebhook,
];

export const WEBHOOK_PROVIDERS: readonly WebhookProvider[] = HANDLERS.map((h) => h.provider);

export interface Detected {
  handler: WebhookHandler;
  payload: unknown;
}

export function detectWebhook(req: RawWebhook): Detected | null {
  for (const handler of HANDLERS) {
    const payload = handler.parse(req);
    if (payload !== null) return { handler, payload };
  }
  return null;
}

/**
 * The handler that checks a Meta signature when the body is not one Meta's handlers recognise
 * (cut short in transit, or not Meta's at all): the signature header says who claims to have
 * sent it, and a signature that does not verify is answered 401 whatever the body holds.
 */
export function metaSignedHandler(req: RawWebhook): WebhookHandler | null {
  return req.headers['x-hub-signature-256'] !== undefined || req.headers['x-hub-signature'] !== undefined
    ? metaAppWebhook
    : null;
}

export function webhookHandler(provider: string): WebhookHandler | undefined {
  return HANDLERS.find((h) => h.provider === provider);
}

export type StoredParse =
  | { handler: WebhookHandler; events: ProviderEvent[] }
  | { fault: 'no_handler' }
  | { fault: 'no_parse' }
  | { fault: 'threw'; error: unknown };

/**
 * A stored webhook back into events, the one way processing and the console's tail both read
 * it; the fault is returned rather than worded so each says it in its own place.
 */
export function parseStoredWebhook(
  row: Pick<WebhookLogRow, 'provider' | 'body' | 'headers' | 'path' | 'method' | 'received_at'>,
): StoredParse {
  const handler = webhookHandler(row.provider);
  if (!handler) return { fault: 'no_handler' };
  try {
    const payload = handler.parse({
      raw: row.body ?? Buffer.alloc(0),
      headers: JSON.parse(row.headers),
      path: row.path,
      url: row.path,
      method: row.method,
    });
    if (payload === null) return { fault: 'no_parse' };
    return { handler, events: replaceNul(handler.events(payload, row.received_at)) };
  } catch (error) {
    return { fault: 'threw', error };
  }
}

/** U+FFFD REPLACEMENT CHARACTER: what a NUL in a provider's text becomes. */
export const NUL_REPLACEMENT = '\uFFFD';

/**
 * Every NUL (U+0000) in the strings of a webhook's events, keys included, as U+FFFD. A provider
 * may send one (JSON "\u0000", a form's %00) in any text it relays (a message, a profile name, a
 * bounce reason), and PostgreSQL's text cannot hold it: left in, the webhook's events would fail
 * to apply there and the message would be lost. Done here, where both stores and the console's
 * tail read stored webhooks, so a message reads the same on either store. The stored request
 * body (bytes) keeps what the provider sent.
 */
export function replaceNul<T>(value: T): T {
  if (typeof value === 'string') return (value.includes('\0') ? value.replaceAll('\0', NUL_REPLACEMENT) : value) as T;
  if (Array.isArray(value)) return value.map((v) => replaceNul(v)) as T;
  if (value === null || typeof value !== 'object' || Buffer.isBuffer(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[replaceNul(k)] = replaceNul(v);
  return out as T;
}

/** Headers that prove or grant something: never stored. Signatures are per-request, but a log is not the place for them. */
const SECRET_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'cookie',
  'x-hub-signature',
  'x-hub-signature-256',
  'x-twilio-signature',
  'x-twilio-email-event-webhook-signature',
  'x-msgd-sandbox-signature',
]);

export function redactHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(headers)) out[k] = SECRET_HEADERS.has(k) ? '[redacted]' : headers[k];
  return out;
}
