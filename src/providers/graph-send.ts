import type { SuppressionSignal } from '../core/suppressions.js';
import { callProvider, isResponse, retryAfterMs, truncate, type HttpResponse } from './http.js';
import { GRAPH_API_VERSION } from './meta-app/settings.js';
import type { SendContext, SendResult } from './types.js';

// WhatsApp Cloud, Messenger and Instagram all answer through the Graph API error
// envelope, so one classifier decides retry versus failed for the three of them.

export const GRAPH_DEFAULT_BASE = 'https://graph.facebook.com';

/** Throughput limits: the same message goes through once the window has passed. */
const RATE_LIMIT_CODES = new Set([4, 17, 32, 613, 80007, 130429, 131048, 131056]);
/** Meta's own "try again later" codes (unknown error, temporary outage, 131000 generic). */
const TRANSIENT_CODES = new Set([1, 2, 131000]);
/** Meta gives no hint on its 400 rate limits; a few seconds is what its docs suggest. */
const DEFAULT_RATE_LIMIT_BACKOFF_MS = 5_000;

interface GraphError {
  message?: string;
  type?: string;
  code?: number;
  error_subcode?: number;
  is_transient?: boolean;
  error_data?: { details?: string };
}

export async function postGraph(
  ctx: SendContext,
  url: string,
  token: string,
  body: unknown,
  pickId: (json: any) => unknown,
): Promise<SendResult> {
  const res = await callProvider(ctx, {
    url,
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json',
    },
    body: JSON.stringify(body),
  });
  if (!isResponse(res)) return res;
  if (res.status >= 200 && res.status < 300) {
    const id = res.json === undefined ? undefined : pickId(res.json);
    if (typeof id === 'string' && id !== '') {
      const status = res.json?.messages?.[0]?.message_status;
      return typeof status === 'string'
        ? { outcome: 'accepted', providerMessageId: id, providerStatus: status }
        : { outcome: 'accepted', providerMessageId: id };
    }
    // A 2xx without an id is most likely a proxy page, not Graph; Graph itself never does this.
    return {
      outcome: 'retry',
      code: 'bad_response',
      message: `HTTP ${res.status} without a message id: ${truncate(res.text)}`,
      maybeDelivered: true,
    };
  }
  return classifyGraphError(res, ctx.now());
}

export function classifyGraphError(res: HttpResponse, now: number): SendResult {
  const err: GraphError | undefined = res.json?.error;
  const code = typeof err?.code === 'number' ? err.code : undefined;
  const message = describe(res, err);
  const codeStr = code !== undefined ? String(code) : `http_${res.status}`;

  if (res.status === 429 || (code !== undefined && RATE_LIMIT_CODES.has(code))) {
    return {
      outcome: 'retry',
      code: codeStr,
      message,
      retryAfterMs: retryAfterMs(res, now) ?? DEFAULT_RATE_LIMIT_BACKOFF_MS,
    };
  }
  if (res.status === 401 || code === 190) {
    return { outcome: 'failed', code: codeStr, message };
  }
  // 408: Graph (or a proxy before it) gave up waiting for the request, so it took nothing.
  if (
    res.status >= 500 ||
    res.status === 408 ||
    err?.is_transient === true ||
    (code !== undefined && TRANSIENT_CODES.has(code))
  ) {
    const after = retryAfterMs(res, now);
    return after === undefined
      ? { outcome: 'retry', code: codeStr, message }
      : { outcome: 'retry', code: codeStr, message, retryAfterMs: after };
  }
  const suppress = code !== undefined ? graphRefusal(code, message) : undefined;
  return suppress
    ? { outcome: 'failed', code: codeStr, message, suppress }
    : { outcome: 'failed', code: codeStr, message };
}

/**
 * Meta's codes for a recipient who will not take the business's messages: WhatsApp 131050, the
 * customer stopped marketing messages from this number; Messenger/Instagram 551, the person is
 * not available (they blocked the page or left). Both hold for the sender it was sent from.
 */
export const GRAPH_OPT_OUT_CODES: ReadonlySet<number> = new Set([131050, 551]);

export function graphRefusal(code: number, message: string | null): SuppressionSignal | undefined {
  return GRAPH_OPT_OUT_CODES.has(code)
    ? { reason: 'provider_refused', scope: 'sender', detail: `Meta error ${code}${message ? `: ${message}` : ''}` }
    : undefined;
}

function describe(res: HttpResponse, err: GraphError | undefined): string {
  if (!err) return `HTTP ${res.status}: ${truncate(res.text) || 'empty body'}`;
  let m = err.message ?? `HTTP ${res.status}`;
  const details = err.error_data?.details;
  if (details) m += `: ${details}`;
  if (err.error_subcode !== undefined) m += ` (subcode ${err.error_subcode})`;
  return truncate(m, 1000);
}

/**
 * A Send API text message (Messenger, Instagram): `messaging_type` from the gateway's
 * settings (RESPONSE by default), and its tag when it is MESSAGE_TAG.
 */
export function sendApiBody(
  settings: { messaging_type?: string; tag?: string },
  to: string,
  text: string,
): Record<string, unknown> {
  const messagingType = typeof settings.messaging_type === 'string' ? settings.messaging_type : 'RESPONSE';
  const body: Record<string, unknown> = { recipient: { id: to }, messaging_type: messagingType, message: { text } };
  // Outside the 24 h window only a tagged message goes through; the tag is the operator's choice.
  if (messagingType === 'MESSAGE_TAG' && settings.tag) body.tag = settings.tag;
  return body;
}

export function graphUrl(settings: { api_version?: string }, base: string, objectId: string): string {
  const version = typeof settings.api_version === 'string' ? settings.api_version : GRAPH_API_VERSION;
  return `${base}/${encodeURIComponent(version)}/${encodeURIComponent(objectId)}/messages`;
}
