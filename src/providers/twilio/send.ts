import { baseUrl, callProvider, isResponse, originPool, retryAfterMs, truncate, type HttpResponse } from '../http.js';
import { missingSecret, unsupported } from '../send-results.js';
import type { ProviderAdapter, SendResult } from '../types.js';
import type { TwilioSettings } from './kind.js';

const DEFAULT_BASE = 'https://api.twilio.com';

export const twilioAdapter: ProviderAdapter<TwilioSettings> = {
  kind: 'twilio',
  callPool: (gw) => originPool(baseUrl(gw.settings, DEFAULT_BASE)),
  async send(gw, msg, ctx) {
    const sid = gw.settings.account_sid ?? '';
    const token = gw.secrets.auth_token;
    if (!token) return missingSecret('auth_token');
    // An API key (SK…) authenticates the same requests; the auth token then only checks webhooks.
    const keySid = gw.settings.api_key_sid || undefined;
    if (keySid && !gw.secrets.api_key_secret) return missingSecret('api_key_secret');
    const credentials = keySid ? `${keySid}:${gw.secrets.api_key_secret}` : `${sid}:${token}`;
    if (msg.content.kind !== 'text') return unsupported('Twilio SMS', msg.content.kind);

    const form = new URLSearchParams();
    form.set('To', msg.to);
    // A Messaging Service picks the sender from its pool, so From must then be left out.
    if (gw.settings.messaging_service_sid) form.set('MessagingServiceSid', gw.settings.messaging_service_sid);
    else form.set('From', msg.from);
    form.set('Body', msg.content.text);
    // The callback URL names the message too, so its status reports find it by msgd's id. Twilio
    // signs the whole URL, so the name cannot be changed on the way.
    const callback = ctx.publicUrl
      ? `${ctx.publicUrl.replace(/\/+$/, '')}/api/webhook.php?gateway=${encodeURIComponent(gw.id)}&message=${encodeURIComponent(msg.id)}`
      : null;
    if (callback) form.set('StatusCallback', callback);

    const res = await callProvider(ctx, {
      url: `${baseUrl(gw.settings, DEFAULT_BASE)}/2010-04-01/Accounts/${encodeURIComponent(sid)}/Messages.json`,
      headers: {
        authorization: `Basic ${Buffer.from(credentials).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
      },
      body: form.toString(),
    });
    if (!isResponse(res)) return res;
    if (res.status >= 200 && res.status < 300) {
      const id = res.json?.sid;
      if (typeof id === 'string' && id !== '') {
        const status = res.json?.status;
        // Without a StatusCallback, reports (if any: a Messaging Service's own callback URL)
        // name the message only by its SID.
        const accepted = { outcome: 'accepted' as const, providerMessageId: id, namedInReports: callback !== null };
        return typeof status === 'string' ? { ...accepted, providerStatus: status } : accepted;
      }
      return {
        outcome: 'retry',
        code: 'bad_response',
        message: `HTTP ${res.status} without a sid: ${truncate(res.text)}`,
        maybeDelivered: true,
      };
    }
    return classifyTwilioError(res, ctx.now());
  },
};

export function classifyTwilioError(res: HttpResponse, now: number): SendResult {
  const code = res.json?.code;
  const codeStr = typeof code === 'number' || typeof code === 'string' ? String(code) : `http_${res.status}`;
  const message =
    typeof res.json?.message === 'string'
      ? truncate(res.json.message, 1000)
      : `HTTP ${res.status}: ${truncate(res.text) || 'empty body'}`;
  // 408: the provider gave up waiting for the request, so it took nothing; try again.
  if (res.status === 429 || codeStr === '20429' || res.status === 408 || res.status >= 500) {
    const after = retryAfterMs(res, now);
    return after === undefined
      ? { outcome: 'retry', code: codeStr, message }
      : { outcome: 'retry', code: codeStr, message, retryAfterMs: after };
  }
  if (codeStr === TWILIO_OPTED_OUT)
    return {
      outcome: 'failed',
      code: codeStr,
      message,
      suppress: { reason: 'provider_refused', scope: 'opt_out', detail: `Twilio error 21610: ${message}` },
    };
  return { outcome: 'failed', code: codeStr, message };
}

/** Twilio's "the recipient replied STOP to this sender" (FACTS D1), refused at no charge. */
export const TWILIO_OPTED_OUT = '21610';
