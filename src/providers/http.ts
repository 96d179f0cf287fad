import { urlTarget } from '../lib/url-target.js';
import type { CallPool, SendContext, SendResult } from './types.js';

// One way to call a provider over HTTP: every adapter gets the same timeout, body
// handling and network-error classification, so "the provider did not answer" means
// the same thing for all of them.

export interface HttpCall {
  url: string;
  method?: 'POST' | 'GET';
  headers: Record<string, string>;
  body?: string;
}

export interface HttpResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The body parsed as JSON, or undefined when it is empty or not JSON. */
  json: any;
}

export type RetryResult = Extract<SendResult, { outcome: 'retry' }>;

// Error pages and envelopes are small; a misbehaving endpoint must not fill memory.
const MAX_BODY_BYTES = 1024 * 1024;

export function baseUrl(settings: { base_url?: string }, fallback: string): string {
  const raw = typeof settings.base_url === 'string' && settings.base_url !== '' ? settings.base_url : fallback;
  return raw.replace(/\/+$/, '');
}

/**
 * The HTTP client's connections to the origin of a provider's base URL: every gateway calling
 * that origin shares them, whatever its kind (WhatsApp, Messenger and Instagram on
 * graph.facebook.com) or the way its base_url is written.
 */
export function originPool(base: string): CallPool {
  try {
    return { key: urlTarget(base).origin };
  } catch {
    return { key: base };
  }
}

export function isResponse(r: HttpResponse | RetryResult): r is HttpResponse {
  return !('outcome' in r);
}

/**
 * Sends one request. Any answer (whatever its status) comes back as an HttpResponse;
 * no answer at all (refused, reset, DNS, timeout) comes back as a retry result. Only the
 * failures that happen before a byte of the request left (refused, DNS, unreachable, connect
 * timeout) are certain not to have reached the provider; the others carry maybeDelivered.
 */
export async function callProvider(ctx: SendContext, call: HttpCall): Promise<HttpResponse | RetryResult> {
  let res;
  try {
    const { origin, path } = urlTarget(call.url);
    res = await ctx.dispatcher.request({
      origin,
      path,
      method: call.method ?? 'POST',
      headers: call.headers,
      body: call.body,
      // The status and headers within timeoutMs of sending, then no pause in the body longer
      // than that: undici's own coarse timers. AbortSignal.timeout() per call kept a timer
      // alive for the whole timeout after the answer came (tens of thousands under load).
      headersTimeout: ctx.timeoutMs,
      bodyTimeout: ctx.timeoutMs,
    });
  } catch (err) {
    return networkRetry(err, ctx);
  }
  try {
    const text = await readCapped(res.body);
    return { status: res.statusCode, headers: res.headers, text, json: parseJson(text) };
  } catch (err) {
    // The status line arrived but the body did not: we cannot tell what the provider
    // decided, so a 2xx cut short is treated like no answer at all.
    res.body.destroy();
    return { ...networkRetry(err, ctx), maybeDelivered: true };
  }
}

async function readCapped(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      body.destroy();
      break;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string): any {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Failures that happen before the request is sent: the provider cannot have seen it. */
export const NOT_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

// A certificate that fails verification ends the TLS handshake, before a byte of the request
// is written (OpenSSL's verify codes, and Node's own for a name or a handshake that timed out).
const TLS_HANDSHAKE =
  /^(ERR_TLS_CERT_ALTNAME_INVALID|ERR_TLS_HANDSHAKE_TIMEOUT|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_[A-Z_]+|HOSTNAME_MISMATCH|INVALID_CA|INVALID_PURPOSE|PATH_LENGTH_EXCEEDED)$/;

/** Whether a failure with this (system, undici or TLS) error code came before the request was sent. */
export function notSent(code: string | undefined): boolean {
  return code !== undefined && (NOT_SENT.has(code) || TLS_HANDSHAKE.test(code));
}

function networkRetry(err: unknown, ctx: SendContext): RetryResult {
  const e = err as { name?: string; code?: string; message?: string; cause?: { code?: string } };
  if (e?.code === 'UND_ERR_BODY_TIMEOUT') {
    return {
      outcome: 'retry',
      code: 'timeout',
      message: `provider began to answer, then sent nothing for ${ctx.timeoutMs} ms`,
      maybeDelivered: true,
    };
  }
  if (e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.name === 'TimeoutError' || e?.name === 'AbortError') {
    return {
      outcome: 'retry',
      code: 'timeout',
      message: `provider did not answer within ${ctx.timeoutMs} ms`,
      maybeDelivered: true,
    };
  }
  const code = e?.code ?? e?.cause?.code ?? 'network_error';
  const retry: RetryResult = {
    outcome: 'retry',
    code: 'network_error',
    message: `${code}: ${e?.message ?? String(err)}`,
  };
  return notSent(code) || notSent(e?.cause?.code) ? retry : { ...retry, maybeDelivered: true };
}

export function header(res: HttpResponse, name: string): string | undefined {
  const v = res.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/** Retry-After as delta-seconds or an HTTP-date, in ms from now; undefined when absent or unreadable. */
export function retryAfterMs(res: HttpResponse, now: number): number | undefined {
  const v = header(res, 'retry-after')?.trim();
  if (!v) return undefined;
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export function truncate(s: string, max = 300): string {
  return s.length > max ? `${s.slice(0, max)}…` : s;
}
