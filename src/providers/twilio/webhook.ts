import { TWILIO_OPTED_OUT } from './send.js';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import querystring from 'node:querystring';
import type { ProviderEvent } from '../../core/inbound.js';
import type { MediaRef, MessageContent } from '../../core/message-content.js';
import type { MessageStatus } from '../../core/statuses.js';
import { header, isObject, jsonBody, mediaType, note, type WebhookHandler } from '../webhook-common.js';

// Twilio status callbacks and inbound SMS (FACTS D2-D4): form-encoded params, signed with
// X-Twilio-Signature = base64 HMAC-SHA1(auth token, URL + sorted key+value pairs); a webhook
// set to GET carries the params in the query and is signed over the URL alone. The URL is
// the one configured at Twilio; like twilio-node we accept it with and without the standard
// port and with the query re-encoded, since Twilio's own signing is inconsistent there.
// JSON bodies are signed through a bodySHA256 query parameter instead of params.

export type TwilioParams = Record<string, string | string[]>;

interface TwilioPayload {
  params: TwilioParams;
  /**
   * How the params came: a form body (signed as URL + params), a JSON body (signed via
   * ?bodySHA256=, params not part of the signature), or a GET's query (signed as the URL alone).
   */
  from: 'form' | 'json' | 'query';
  /** msgd's message id from the signed URL: the StatusCallback msgd gave names the message (?message=). */
  messageId?: string;
}

/** The ?message= msgd put in a StatusCallback URL. */
function namedMessage(path: string): string | undefined {
  const q = path.indexOf('?');
  if (q < 0) return undefined;
  const v = new URLSearchParams(path.slice(q + 1)).get('message');
  return v || undefined;
}

export function twilioSignature(authToken: string, url: string, params: TwilioParams): string {
  let data = url;
  for (const key of Object.keys(params).sort()) {
    const v = params[key];
    if (Array.isArray(v)) for (const item of [...new Set(v)].sort()) data += key + item;
    else data += key + v;
  }
  return createHmac('sha1', authToken).update(Buffer.from(data, 'utf8')).digest('base64');
}

function withStandardPort(u: URL): string {
  const port = u.protocol === 'https:' ? ':443' : ':80';
  const auth = u.username || u.password ? `${u.username}${u.password ? `:${u.password}` : ''}@` : '';
  return `${u.protocol}//${auth}${u.host}${port}${u.pathname}${u.search}${u.hash}`;
}

/** Node's legacy querystring turns %27 back into ' (twilio-node #1061). */
function legacyQuery(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const h = url.indexOf('#', q);
  const query = url.slice(q + 1, h < 0 ? undefined : h);
  return url.slice(0, q + 1) + querystring.stringify(querystring.parse(query)) + (h < 0 ? '' : url.slice(h));
}

export function twilioUrlVariants(url: string): string[] {
  const u = new URL(url);
  const withPort = u.port ? u.toString() : withStandardPort(u);
  const bare = new URL(u.toString());
  bare.port = '';
  const withoutPort = bare.toString();
  return [...new Set([withoutPort, withPort, legacyQuery(withoutPort), legacyQuery(withPort)])];
}

export function validateTwilioSignature(
  authToken: string,
  signature: string,
  url: string,
  params: TwilioParams,
): boolean {
  const got = Buffer.from(signature);
  let ok = false;
  // Every variant is computed and compared: how many match reveals nothing.
  for (const v of twilioUrlVariants(url)) {
    const want = Buffer.from(twilioSignature(authToken, v, params));
    if (want.length === got.length && timingSafeEqual(want, got)) ok = true;
  }
  return ok;
}

export function validateTwilioBody(authToken: string, signature: string, url: string, raw: Buffer): boolean {
  const claimed = Buffer.from(new URL(url).searchParams.get('bodySHA256') ?? '');
  const actual = Buffer.from(createHash('sha256').update(raw).digest('hex'));
  const bodyOk = claimed.length === actual.length && timingSafeEqual(claimed, actual);
  return validateTwilioSignature(authToken, signature, url, {}) && bodyOk;
}

function formParams(form: string): TwilioParams {
  // No prototype: a parameter named "constructor" or "__proto__" is just a parameter.
  const out: TwilioParams = Object.create(null);
  for (const [k, v] of new URLSearchParams(form)) {
    const prev = out[k];
    // Pushed in place: copying the array per repeat made a 400 KB body of one key repeated
    // (unsigned: this runs before the signature check) block the event loop for a minute.
    if (prev === undefined) out[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else out[k] = [prev, v];
  }
  return out;
}

const STATUS: Record<string, MessageStatus | null> = {
  accepted: 'queued',
  scheduled: 'queued',
  queued: 'queued',
  sending: 'sending',
  sent: 'sent',
  delivered: 'delivered',
  undelivered: 'undelivered',
  failed: 'failed',
  read: 'read',
  canceled: 'failed',
};

const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v) || undefined;

/** How far ahead of our clock a carrier's done date may be (skewed clocks) before it is not believed. */
const DLR_FUTURE_SLACK_MS = 24 * 3600_000;

/**
 * RawDlrDoneDate (FACTS D2): when the carrier reports the SMS delivered or undelivered, as
 * YYMMDDhhmm in UTC, minute precision. Null when absent, malformed, not a real date or
 * implausibly far in the future; the caller then falls back to arrival time.
 */
export function dlrDoneDate(v: string | undefined, now: number): number | null {
  const m = /^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)$/.exec(v?.trim() ?? '');
  if (!m) return null;
  const [y, mo, d, h, mi] = m.slice(1).map(Number);
  const at = Date.UTC(2000 + y, mo - 1, d, h, mi);
  const back = new Date(at);
  // Date.UTC rolls 31 Feb into March: a round trip shows whether the date exists.
  if (back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d || h > 23 || mi > 59) return null;
  return at > now + DLR_FUTURE_SLACK_MS ? null : at;
}
const address = (v: string | undefined) => (v ?? '').replace(/^whatsapp:/i, '');

/** A MIME type in the media vocabulary WhatsApp Cloud uses (image, audio, video, document), so partners see one set of names. */
export function twilioMediaType(mime: string | undefined): string {
  const top = (mime ?? '').split('/')[0].trim().toLowerCase();
  return top === 'image' || top === 'audio' || top === 'video' ? top : 'document';
}

function inboundContent(p: TwilioParams): MessageContent {
  const body = one(p.Body) ?? '';
  const n = Math.min(Number(one(p.NumMedia) ?? 0) || 0, 10);
  const media: MediaRef[] = [];
  for (let i = 0; i < n; i++) {
    const url = one(p[`MediaUrl${i}`]);
    const mime = one(p[`MediaContentType${i}`]);
    if (url) media.push({ type: twilioMediaType(mime), url, mime_type: mime ?? null });
  }
  return media.length ? { kind: 'media', caption: body || null, media } : { kind: 'text', text: body };
}

function events({ params: p, messageId }: TwilioPayload, receivedAt: number): ProviderEvent[] {
  const sid = one(p.MessageSid) ?? one(p.SmsMessageSid) ?? one(p.SmsSid);
  if (!sid) return [note('Twilio request without a MessageSid')];
  const raw = (one(p.MessageStatus) ?? one(p.SmsStatus) ?? '').toLowerCase();
  const hasContent = p.Body !== undefined || p.NumMedia !== undefined;
  // receiving and received are an inbound message's states (FACTS D1's enum, D3), never a report
  // on one msgd sent. Twilio may post both for one SID: one key for both, so the second is a duplicate.
  const inboundState = raw === 'received' || raw === 'receiving';
  if (inboundState && !hasContent) return [note(`Twilio inbound ${sid} ${raw} callback without Body or NumMedia`)];
  if (inboundState || (raw === '' && hasContent)) {
    const to = one(p.To);
    const from = one(p.From);
    if (!to || !from) return [note(`Twilio inbound ${sid} without To or From`)];
    return [
      {
        type: 'message',
        key: `twilio:${sid}:received`,
        receiver: { channel: /^whatsapp:/i.test(to) ? 'whatsapp' : 'sms', addresses: [address(to)] },
        from: address(from),
        profileName: one(p.ProfileName) ?? null,
        providerMessageId: sid,
        content: inboundContent(p),
        // Twilio gives no time for an inbound SMS: when msgd received it.
        occurredAt: receivedAt,
      },
    ];
  }
  // WhatsApp read receipts arrive as EventType=READ beside the last status.
  const st = one(p.EventType)?.toUpperCase() === 'READ' ? 'read' : raw;
  if (!st) return [note(`Twilio callback for ${sid} without a status`)];
  const code = one(p.ErrorCode);
  const done = st === 'delivered' || st === 'undelivered' ? dlrDoneDate(one(p.RawDlrDoneDate), receivedAt) : null;
  return [
    {
      type: 'status',
      key: `twilio:${sid}:${st}`,
      ref: messageId ? { providerMessageId: sid, messageId } : { providerMessageId: sid },
      status: Object.hasOwn(STATUS, st) ? STATUS[st] : null,
      providerStatus: st,
      errorCode: code ?? null,
      errorMessage: one(p.ChannelStatusMessage) ?? one(p.ErrorMessage) ?? (code ? `Twilio error ${code}` : null),
      occurredAt: done ?? receivedAt,
      ...(code === TWILIO_OPTED_OUT && (st === 'failed' || st === 'undelivered')
        ? { suppress: { reason: 'provider_refused', scope: 'opt_out', detail: 'Twilio error 21610' } as const }
        : {}),
    },
  ];
}

export const twilioWebhook: WebhookHandler<TwilioPayload, string> = {
  provider: 'twilio',
  kinds: ['twilio'],
  secretName: 'auth_token',
  parse(req) {
    const twilioLike = (params: TwilioParams) =>
      params.AccountSid !== undefined || params.MessageSid !== undefined || params.SmsSid !== undefined;
    if (req.method === 'GET') {
      if (header(req, 'x-twilio-signature') === undefined) return null;
      const q = req.path.indexOf('?');
      const params = formParams(q < 0 ? '' : req.path.slice(q + 1));
      return twilioLike(params) ? { params, from: 'query', messageId: namedMessage(req.path) } : null;
    }
    const type = mediaType(req);
    if (type === 'application/x-www-form-urlencoded') {
      const params = formParams(req.raw.toString('utf8'));
      return twilioLike(params) ? { params, from: 'form', messageId: namedMessage(req.path) } : null;
    }
    if (
      type === 'application/json' &&
      header(req, 'x-twilio-signature') !== undefined &&
      /[?&]bodySHA256=/.test(req.path)
    ) {
      const j = jsonBody(req);
      if (!isObject(j)) return null;
      const params: TwilioParams = {};
      for (const [k, v] of Object.entries(j)) if (typeof v === 'string' || typeof v === 'number') params[k] = String(v);
      return { params, from: 'json', messageId: namedMessage(req.path) };
    }
    return null;
  },
  hints(p) {
    const sid = one(p.params.AccountSid);
    return sid ? [{ kind: 'twilio', setting: 'account_sid', value: sid }] : [];
  },
  signature(req) {
    const sig = header(req, 'x-twilio-signature');
    return sig ? { ok: true, sig } : { ok: false, reason: 'missing X-Twilio-Signature header' };
  },
  matches(req, p, sig, token) {
    if (p.from === 'json') return validateTwilioBody(token, sig, req.url, req.raw);
    // A GET has no body params: everything, ours (?gateway=) and Twilio's, is in the signed URL.
    return validateTwilioSignature(token, sig, req.url, p.from === 'query' ? {} : p.params);
  },
  events,
};
