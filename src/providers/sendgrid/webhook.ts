import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import type { EventType } from '../../core/events.js';
import type { ProviderEvent } from '../../core/inbound.js';
import type { MessageStatus } from '../../core/statuses.js';
import type { SuppressionSignal } from '../../core/suppressions.js';
import { fromSeconds, header, isObject, jsonBody, note, str, type WebhookHandler } from '../webhook-common.js';

// SendGrid Event Webhook (FACTS C2-C3): a JSON array of events, signed with ECDSA P-256 over
// timestamp + raw body; the public key is base64 SPKI DER, the signature base64 DER.
// custom_args arrive as top-level keys of each event: msgd puts its message id in one.

interface SgPayload {
  events: Record<string, any>[];
}

interface SgSignature {
  timestamp: string;
  sig: Buffer;
}

/** Event -> message status; null = recorded in history only. */
const STATUS: Record<string, MessageStatus | null> = {
  processed: null,
  delivered: 'delivered',
  open: 'opened',
  click: 'clicked',
  bounce: 'bounced',
  deferred: 'deferred',
  dropped: 'dropped',
  spamreport: null,
  unsubscribe: null,
  group_unsubscribe: null,
  group_resubscribe: null,
};

/** History-only events the partner is told of: complaints and unsubscribes concern who may be mailed. */
const NOTIFY: Record<string, EventType> = {
  spamreport: 'message.complained',
  unsubscribe: 'message.unsubscribed',
  group_unsubscribe: 'message.unsubscribed',
  group_resubscribe: 'message.resubscribed',
};

/**
 * What an event says about the address (FACTS C2): a bounce (not a "blocked" one, which is the
 * receiving server's temporary or policy refusal), a drop because the address bounced before or
 * is invalid, a spam report, an unsubscribe (global or from a group) suppress it; a group
 * resubscribe lifts its group's entry.
 */
export function sendgridSuppression(e: Record<string, any>): SuppressionSignal | undefined {
  const event = String(e.event);
  const reason = str(e.reason) ?? null;
  const detail = reason ? reason.slice(0, 300) : null;
  switch (event) {
    case 'bounce':
      return e.type === 'blocked' ? undefined : { reason: 'hard_bounce', scope: 'partner', detail };
    case 'dropped': {
      // SendGrid's drop reasons name its own lists: "Bounced Address", "Invalid", "Spam Reporting Address", ...
      const r = (reason ?? '').toLowerCase();
      if (r.includes('bounced address') || /^invalid\b(?!.*smtpapi)/.test(r))
        return { reason: 'hard_bounce', scope: 'partner', detail };
      if (r.includes('spam reporting address')) return { reason: 'spam_report', scope: 'partner', detail };
      if (r.includes('unsubscribed address')) return { reason: 'unsubscribe', scope: 'partner', detail };
      return undefined;
    }
    case 'spamreport':
      return { reason: 'spam_report', scope: 'partner', detail: null };
    case 'unsubscribe':
      return { reason: 'unsubscribe', scope: 'partner', detail: null };
    case 'group_unsubscribe':
    case 'group_resubscribe': {
      const group = e.asm_group_id === undefined || e.asm_group_id === null ? null : String(e.asm_group_id);
      if (group === null || !/^\d{1,12}$/.test(group)) return undefined;
      return {
        reason: 'group_unsubscribe',
        scope: 'partner',
        groupId: group,
        detail: `unsubscribe group ${group}`,
        ...(event === 'group_resubscribe' ? { lift: true } : {}),
      };
    }
    default:
      return undefined;
  }
}

const keys = new Map<string, KeyObject | null>();

/** SendGrid shows the key as bare base64 (DER, SPKI); a key pasted as PEM is taken too. */
function publicKey(b64: string): KeyObject | null {
  let k = keys.get(b64);
  if (k === undefined) {
    try {
      const text = b64.trim();
      k = text.startsWith('-----BEGIN')
        ? createPublicKey({ key: text, format: 'pem' })
        : createPublicKey({ key: Buffer.from(text, 'base64'), format: 'der', type: 'spki' });
    } catch {
      k = null;
    }
    if (keys.size > 100) keys.clear();
    keys.set(b64, k);
  }
  return k;
}

export function verifySendgridSignature(
  publicKeyB64: string,
  timestamp: string,
  raw: Buffer,
  signature: Buffer,
): boolean {
  const key = publicKey(publicKeyB64);
  if (!key) return false;
  try {
    return verify(
      'sha256',
      Buffer.concat([Buffer.from(timestamp, 'utf8'), raw]),
      { key, dsaEncoding: 'der' },
      signature,
    );
  } catch {
    return false;
  }
}

function events(p: SgPayload, receivedAt: number): ProviderEvent[] {
  return p.events.map((e): ProviderEvent => {
    const event = String(e.event);
    if (!Object.hasOwn(STATUS, event)) return note(`SendGrid event "${event}" is not handled`);
    // Async bounces come without sg_message_id; custom_args still name the message.
    const sgId = str(e.sg_message_id);
    const failing = event === 'bounce' || event === 'dropped';
    const suppress = sendgridSuppression(e);
    return {
      ...(suppress ? { suppress } : {}),
      type: 'status',
      key: `sendgrid:${str(e.sg_event_id) ?? createHash('sha256').update(JSON.stringify(e)).digest('base64url')}`,
      ref: { messageId: str(e.msgd_message_id), providerMessageId: sgId?.split('.')[0], recipient: str(e.email) },
      status: STATUS[event],
      providerStatus: event === 'bounce' && e.type === 'blocked' ? 'bounce:blocked' : event,
      errorCode: failing ? (str(e.status) ?? str(e.type) ?? null) : null,
      // The reason for a failure or a deferral; a delivered event's response ("250 2.0.0 OK") is no error.
      errorMessage: failing || event === 'deferred' ? (str(e.reason) ?? str(e.response) ?? null) : null,
      occurredAt: fromSeconds(e.timestamp, receivedAt),
      ...(Object.hasOwn(NOTIFY, event)
        ? {
            notify: NOTIFY[event],
            detail: {
              email: str(e.email) ?? null,
              ...(e.asm_group_id !== undefined ? { asm_group_id: e.asm_group_id } : {}),
            },
          }
        : {}),
    };
  });
}

export const sendgridWebhook: WebhookHandler<SgPayload, SgSignature> = {
  provider: 'sendgrid',
  kinds: ['sendgrid'],
  secretName: 'webhook_public_key',
  parse(req) {
    const j = jsonBody(req);
    if (Array.isArray(j) && j.length > 0 && j.every((e) => isObject(e) && typeof e.event === 'string'))
      return { events: j };
    // A lone event object only when SendGrid's own signature header says whose it is.
    if (
      header(req, 'x-twilio-email-event-webhook-signature') !== undefined &&
      isObject(j) &&
      typeof j.event === 'string'
    ) {
      return { events: [j] };
    }
    return null;
  },
  hints: () => [],
  signature(req, opts) {
    const sig = header(req, 'x-twilio-email-event-webhook-signature');
    const ts = header(req, 'x-twilio-email-event-webhook-timestamp');
    if (!sig) return { ok: false, reason: 'missing X-Twilio-Email-Event-Webhook-Signature header' };
    if (!ts) return { ok: false, reason: 'missing X-Twilio-Email-Event-Webhook-Timestamp header' };
    if (!/^\d{1,12}$/.test(ts.trim()))
      return { ok: false, reason: 'malformed X-Twilio-Email-Event-Webhook-Timestamp header' };
    const age = Math.abs(opts.now / 1000 - Number(ts));
    if (age > opts.sendgridToleranceSeconds) {
      return {
        ok: false,
        reason: `timestamp ${ts} is ${Math.round(age)} s away from now; the tolerance is ${opts.sendgridToleranceSeconds} s`,
      };
    }
    return { ok: true, sig: { timestamp: ts.trim(), sig: Buffer.from(sig.trim(), 'base64') } };
  },
  matches: (req, _p, sig, key) => verifySendgridSignature(key, sig.timestamp, req.raw, sig.sig),
  events,
};
