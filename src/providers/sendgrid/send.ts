import {
  baseUrl,
  callProvider,
  header,
  isResponse,
  originPool,
  retryAfterMs,
  truncate,
  type HttpResponse,
} from '../http.js';
import { missingSecret, unsupported } from '../send-results.js';
import type { OutboundMessage, ProviderAdapter, SendResult } from '../types.js';
import type { SendgridSettings } from './kind.js';

const DEFAULT_BASE = 'https://api.sendgrid.com';

function buildBody(msg: OutboundMessage): Record<string, unknown> | null {
  const c = msg.content;
  if (c.kind !== 'email') return null;
  // SendGrid rejects text/html before text/plain, so the order here is the API's rule.
  const content: Array<{ type: string; value: string }> = [];
  if (c.text) content.push({ type: 'text/plain', value: c.text });
  if (c.html) content.push({ type: 'text/html', value: c.html });
  const body: Record<string, unknown> = {
    personalizations: [{ to: [{ email: msg.to }], custom_args: { msgd_message_id: msg.id } }],
    from: c.fromName ? { email: msg.from, name: c.fromName } : { email: msg.from },
    subject: c.subject,
    content,
  };
  if (c.replyTo) body.reply_to = { email: c.replyTo };
  return body;
}

export const sendgridAdapter: ProviderAdapter<SendgridSettings> = {
  kind: 'sendgrid',
  callPool: (gw) => originPool(baseUrl(gw.settings, DEFAULT_BASE)),
  async send(gw, msg, ctx) {
    const key = gw.secrets.api_key;
    if (!key) return missingSecret('api_key');
    const body = buildBody(msg);
    if (!body) return unsupported('SendGrid', msg.content.kind);
    const res = await callProvider(ctx, {
      url: `${baseUrl(gw.settings, DEFAULT_BASE)}/v3/mail/send`,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/json',
      },
      body: JSON.stringify(body),
    });
    if (!isResponse(res)) return res;
    if (res.status === 202 || res.status === 200) {
      // 200 is sandbox mode: valid but never queued, so no X-Message-Id and no events;
      // our own id keeps the message addressable. custom_args carries it on real events too.
      const id = header(res, 'x-message-id');
      if (id) return { outcome: 'accepted', providerMessageId: id };
      return res.status === 200
        ? { outcome: 'accepted', providerMessageId: msg.id, providerStatus: 'sandbox' }
        : { outcome: 'accepted', providerMessageId: msg.id };
    }
    return classifySendgridError(res, ctx.now());
  },
};

export function classifySendgridError(res: HttpResponse, now: number): SendResult {
  const code = `sendgrid_${res.status}`;
  const errors: Array<{ message?: string; field?: string | null }> = Array.isArray(res.json?.errors)
    ? res.json.errors
    : [];
  const message = errors.length
    ? truncate(errors.map((e) => (e.field ? `${e.field}: ${e.message ?? ''}` : (e.message ?? ''))).join('; '), 1000)
    : `HTTP ${res.status}: ${truncate(res.text) || 'empty body'}`;
  // 408: the provider gave up waiting for the request, so it took nothing; try again.
  if (res.status === 429 || res.status === 408 || res.status >= 500) {
    const after = retryAfterMs(res, now) ?? rateLimitResetMs(res, now);
    return after === undefined
      ? { outcome: 'retry', code, message }
      : { outcome: 'retry', code, message, retryAfterMs: after };
  }
  return { outcome: 'failed', code, message };
}

/** X-RateLimit-Reset is the Unix second at which the window reopens. */
function rateLimitResetMs(res: HttpResponse, now: number): number | undefined {
  const v = header(res, 'x-ratelimit-reset');
  if (!v || !/^\d+$/.test(v.trim())) return undefined;
  return Math.max(0, Number(v) * 1000 - now);
}
