import { createHmac, timingSafeEqual } from 'node:crypto';
import type { GatewayKind } from '../core/context.js';
import type { ProviderEvent } from '../core/inbound.js';

// The contract every provider's webhook module fulfils, and the small helpers they share.
// A module never sees a database: it recognises its shape, checks its signature against a
// secret it is handed, and turns the payload into msgd's events (src/core/inbound.ts).

export type WebhookProvider = 'whatsapp' | 'messenger' | 'instagram' | 'twilio' | 'sendgrid' | 'sandbox' | 'meta';

export interface RawWebhook {
  /** The body exactly as received: every signature is over these bytes. */
  raw: Buffer;
  headers: Record<string, string | string[] | undefined>;
  /** Path and query as requested. */
  path: string;
  /** The full URL the provider called, as configured there (Twilio signs it). */
  url: string;
  /** The HTTP method; POST when absent. Twilio can be set to call with GET (params in the query). */
  method?: string;
}

export interface VerifyOptions {
  /** ms since the epoch. */
  now: number;
  acceptLegacySha1: boolean;
  sendgridToleranceSeconds: number;
}

/** A gateway setting whose value the payload names (phone number id, page id, account SID). */
export interface GatewayHint {
  kind: GatewayKind;
  setting: string;
  value: string;
}

export type SignatureCheck<S> = { ok: true; sig: S } | { ok: false; reason: string };

export interface WebhookHandler<P = any, S = any> {
  provider: WebhookProvider;
  /** Gateway kinds whose secret can sign this provider's webhooks. */
  kinds: readonly GatewayKind[];
  /** The gateway secret that verifies the signature. */
  secretName: string;
  /** The payload if the request has this provider's shape, else null. */
  parse(req: RawWebhook): P | null;
  hints(payload: P): GatewayHint[];
  /** Presence, form and freshness of the signature, before any gateway's secret is tried. */
  signature(req: RawWebhook, opts: VerifyOptions): SignatureCheck<S>;
  /** Whether the signature verifies with this secret; constant time. */
  matches(req: RawWebhook, payload: P, sig: S, secret: string): boolean;
  /**
   * The events the payload reports. receivedAt (when msgd received the request) stands in for a
   * time the provider does not give, so processing later (a wait, a reprocess) does not move it.
   */
  events(payload: P, receivedAt: number): ProviderEvent[];
}

export function header(req: Pick<RawWebhook, 'headers'>, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export function mediaType(req: Pick<RawWebhook, 'headers'>): string {
  return (header(req, 'content-type') ?? '').split(';')[0].trim().toLowerCase();
}

const parsedJson = new WeakMap<RawWebhook, unknown>();
const INVALID = Symbol('invalid json');

/** The body as JSON (parsed once per request, whichever module asks first); undefined if it is not JSON. */
export function jsonBody(req: RawWebhook): unknown {
  let v = parsedJson.get(req);
  if (v === undefined) {
    const text = req.raw.toString('utf8');
    const first = text.trimStart()[0];
    // Only objects and arrays are payloads; a form body is not worth a failed parse.
    try {
      v = first === '{' || first === '[' ? JSON.parse(text) : INVALID;
    } catch {
      v = INVALID;
    }
    parsedJson.set(req, v);
  }
  return v === INVALID ? undefined : v;
}

export function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function str(v: unknown): string | undefined {
  if (typeof v === 'string' && v !== '') return v;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return undefined;
}

/** Unix seconds (number or digit string) to ms; the fallback when absent or no time a Date can hold. */
export function fromSeconds(v: unknown, fallback: number): number {
  const s = str(v);
  return s && /^\d+(\.\d+)?$/.test(s) ? timeOr(Math.round(Number(s) * 1000), fallback) : fallback;
}

/** ms since the epoch if a Date can hold it (up to the year 275760), else the fallback. */
export function timeOr(ms: number, fallback: number): number {
  return Number.isSafeInteger(ms) && ms >= 0 && ms <= 8.64e15 ? ms : fallback;
}

/** Constant-time comparison of a MAC we computed with the one received. */
export function hmacEquals(algo: 'sha1' | 'sha256', secret: string, data: Buffer | string, received: Buffer): boolean {
  const mac = createHmac(algo, secret).update(data).digest();
  return mac.length === received.length && timingSafeEqual(mac, received);
}

/** Largest provider object kept verbatim in an `other` content (content is stored with every message). */
export const MAX_KEPT_BYTES = 16 * 1024;

/** A provider object to keep as it came, or null when absent or too large to keep. */
export function kept(v: unknown): unknown {
  if (v === undefined || v === null) return null;
  const json = JSON.stringify(v);
  return json === undefined || Buffer.byteLength(json) > MAX_KEPT_BYTES ? null : v;
}

export function note(text: string): ProviderEvent {
  return { type: 'note', note: text };
}
