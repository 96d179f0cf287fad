import { createHmac } from 'node:crypto';

// Two signatures over the same bytes: msgd's own (the spec's X-Msgd-Signature, HMAC of the
// raw body keyed with the secret string) and Standard Webhooks' (HMAC of "id.timestamp.body"
// keyed with the base64-decoded bytes after "whsec_"), so receivers can use either.

// Secrets are made in src/core/endpoints.ts (newSigningSecret): "whsec_" + base64 of 32 bytes.
const SECRET_PREFIX = 'whsec_';

/** The Standard Webhooks HMAC key: the decoded bytes, not the string. */
export function standardKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

/** `sha256=<hex>` of the raw body, keyed with the secret exactly as shown to the partner. */
export function msgdSignature(body: string | Buffer, secret: string): string {
  return 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
}

/** One `v1,<base64>` entry of the webhook-signature header. */
export function standardSignature(id: string, timestamp: number, body: string | Buffer, key: Buffer): string {
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

export interface SigningSecrets {
  current: string;
  /** The secret before the last rotation, while its grace period lasts. */
  previous: string | null;
}

interface Keyed {
  secret: string;
  key: Buffer;
}

/** Secrets with their decoded Standard Webhooks keys, prepared once per endpoint version. */
export class PreparedSecrets {
  readonly current: Keyed;
  readonly previous: Keyed | null;

  constructor(s: SigningSecrets) {
    this.current = { secret: s.current, key: standardKey(s.current) };
    this.previous = s.previous ? { secret: s.previous, key: standardKey(s.previous) } : null;
  }
}

/**
 * The signature headers of one attempt. During a rotation webhook-signature carries both
 * signatures (new first). X-Msgd-Signature holds one value by its format: the new secret's;
 * the old secret's goes in X-Msgd-Signature-Previous so a receiver not yet updated still verifies.
 */
export function signatureHeaders(
  eventId: string,
  timestamp: number,
  body: string,
  s: PreparedSecrets,
): Record<string, string> {
  const sigs = [standardSignature(eventId, timestamp, body, s.current.key)];
  const headers: Record<string, string> = {
    'x-msgd-signature': msgdSignature(body, s.current.secret),
    'x-msgd-event-id': eventId,
    'webhook-id': eventId,
    'webhook-timestamp': String(timestamp),
  };
  if (s.previous) {
    sigs.push(standardSignature(eventId, timestamp, body, s.previous.key));
    headers['x-msgd-signature-previous'] = msgdSignature(body, s.previous.secret);
  }
  headers['webhook-signature'] = sigs.join(' ');
  return headers;
}

export const REDACTED = '[redacted]';

/**
 * The headers an attempt sent, as the console shows them: the same names and values as
 * signatureHeaders, with every signature replaced by REDACTED (a signature of a known body
 * would let anyone test guesses of the secret offline).
 */
export function shownSignatureHeaders(eventId: string, timestamp: number, rotating: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    'x-msgd-signature': REDACTED,
    'x-msgd-event-id': eventId,
    'webhook-id': eventId,
    'webhook-timestamp': String(timestamp),
  };
  if (rotating) headers['x-msgd-signature-previous'] = REDACTED;
  headers['webhook-signature'] = rotating ? `${REDACTED} ${REDACTED}` : REDACTED;
  return headers;
}
