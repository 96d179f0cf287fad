import { readFileSync } from 'node:fs';
import { createSecureContext, rootCertificates } from 'node:tls';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import { urlTarget } from '../lib/url-target.js';
import { guardIpLiteral, guardedLookup } from './ssrf.js';
import { parseRetryAfter } from './schedule.js';

// The HTTP side of a delivery: msgd's own undici Agent (never the global one), TLS verified
// against Node's roots plus webhooksOut.caFile, the SSRF guard on every connection, no
// redirects (undici follows none unless told), and a hard timeout.

const SNIPPET_BYTES = 1024;
/** Read at most this much of a response; the rest is dropped with the connection. */
const READ_LIMIT = 64 * 1024;

export type OutConfig = Config['webhooksOut'];

export function createWebhookAgent(cfg: OutConfig): Agent {
  // `ca` replaces the default trust store, so the default roots are passed along with the file.
  // Built once: a context per connection would parse every root certificate again each time.
  const secureContext = cfg.caFile
    ? createSecureContext({ ca: [...rootCertificates, readFileSync(cfg.caFile, 'utf8')] })
    : undefined;
  const base = buildConnector({
    ...(secureContext ? { secureContext } : {}),
    ...(cfg.allowPrivateTargets ? {} : { lookup: guardedLookup as any }),
    rejectUnauthorized: true,
    timeout: cfg.timeoutMs,
  });
  const connect: buildConnector.connector = (opts, cb) => {
    const refused = cfg.allowPrivateTargets ? null : guardIpLiteral(opts.hostname);
    if (refused) return cb(refused, null);
    return base(opts, cb);
  };
  return new Agent({
    connect,
    connections: Math.max(8, cfg.concurrency),
    keepAliveTimeout: 10_000,
    headersTimeout: cfg.timeoutMs,
    bodyTimeout: cfg.timeoutMs,
  });
}

export interface AttemptOutcome {
  ok: boolean;
  /** HTTP status, or null when no response came (timeout, refused, TLS, SSRF guard). */
  status: number | null;
  durationMs: number;
  /** First 1 KB of the response body. */
  snippet: string | null;
  error: string | null;
  retryAfterMs: number | null;
}

function describe(err: any, timeoutMs: number): string {
  const code: string | undefined = err?.code ?? err?.cause?.code;
  if (
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT' ||
    code === 'UND_ERR_CONNECT_TIMEOUT' ||
    err?.name === 'TimeoutError'
  ) {
    return `timeout: no complete answer within ${timeoutMs} ms`;
  }
  if (code === 'ERR_WEBHOOK_TARGET_REFUSED') return `refused by the private-address guard: ${err.message}`;
  const msg = err?.message ?? String(err);
  return code && !msg.includes(code) ? `${code}: ${msg}` : msg;
}

function readSnippet(body: Dispatcher.ResponseData['body']): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => resolve(Buffer.concat(chunks).subarray(0, SNIPPET_BYTES).toString('utf8'));
    body.on('data', (chunk: Buffer) => {
      if (size < SNIPPET_BYTES) chunks.push(chunk);
      size += chunk.length;
      // Enough for the log; the rest is not read (the connection is dropped, not drained).
      if (size >= READ_LIMIT) {
        body.destroy();
        done();
      }
    });
    body.on('end', done);
    body.on('error', reject);
  });
}

/** Sent with every delivery, before its signature headers (the console shows them too). */
export const BASE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'application/json',
  'user-agent': 'msgd-webhooks/1',
};

/** POST the event body with its headers; never throws. */
export async function postEvent(
  agent: Dispatcher,
  url: string,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
  now: () => number = Date.now,
): Promise<AttemptOutcome> {
  const started = performance.now();
  try {
    const target = urlTarget(url);
    const res = await agent.request({
      origin: target.origin,
      path: target.path,
      method: 'POST',
      headers: { ...BASE_HEADERS, ...headers },
      body,
      // Headers, and then each body chunk, within timeoutMs (undici's own timers: no
      // AbortSignal per request on the hot path).
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    let snippet: string | null = null;
    let readError: string | null = null;
    try {
      snippet = await readSnippet(res.body);
    } catch (e) {
      readError = describe(e, timeoutMs);
    }
    const status = res.statusCode;
    const ok = status >= 200 && status < 300;
    return {
      ok,
      status,
      durationMs: Math.round(performance.now() - started),
      snippet,
      error: ok
        ? null
        : (readError ?? `HTTP ${status}${status >= 300 && status < 400 ? ' (redirects are not followed)' : ''}`),
      retryAfterMs: status === 429 || status === 503 ? parseRetryAfter(res.headers['retry-after'], now()) : null,
    };
  } catch (e) {
    return {
      ok: false,
      status: null,
      durationMs: Math.round(performance.now() - started),
      snippet: null,
      error: describe(e, timeoutMs),
      retryAfterMs: null,
    };
  }
}
