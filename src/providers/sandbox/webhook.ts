import { createHmac } from 'node:crypto';
import { CHANNEL_TYPES, type ChannelType } from '../../lib/channel-types.js';
import type { ProviderEvent } from '../../core/inbound.js';
import type { MessageStatus } from '../../core/statuses.js';
import {
  fromSeconds,
  header,
  hmacEquals,
  isObject,
  jsonBody,
  note,
  str,
  type WebhookHandler,
} from '../webhook-common.js';

// The sandbox provider's own webhook, posted by msgd to itself (the sandbox.report job) so a
// demo runs through the same inbound path as a real provider. Format (docs/webhooks-in.md):
//
//   X-Msgd-Sandbox-Signature: sha256=<hex HMAC-SHA256 of the raw body, key = signing_secret>
//   {"object":"msgd_sandbox","events":[{"id","message_id","status","timestamp"}, ...]}
//
// An event with "type":"message" (id, channel, from, to, text, timestamp) simulates an
// inbound message, so an operator can demo replies with curl.

export const SANDBOX_SIGNATURE_HEADER = 'x-msgd-sandbox-signature';

export interface SandboxStatusEvent {
  id: string;
  message_id: string;
  status: string;
  /** Unix seconds, with milliseconds as a fraction. */
  timestamp: number;
  error?: { code?: string; message?: string };
}

export interface SandboxInboundEvent {
  id: string;
  type: 'message';
  channel: ChannelType;
  from: string;
  to: string;
  text: string;
  timestamp: number;
}

interface SandboxPayload {
  object: 'msgd_sandbox';
  events: any[];
}

const STATUS: Record<string, MessageStatus> = {
  sent: 'sent',
  delivered: 'delivered',
  read: 'read',
  failed: 'failed',
  undelivered: 'undelivered',
};
const CHANNELS = new Set<string>(CHANNEL_TYPES);

export function sandboxBody(events: (SandboxStatusEvent | SandboxInboundEvent)[]): string {
  return JSON.stringify({ object: 'msgd_sandbox', events });
}

/** Unix seconds with millisecond precision (1763800000.123), as the sandbox's events carry them. */
export function sandboxTimestamp(ms: number): number {
  return Math.round(ms) / 1000;
}

export function signSandbox(secret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

function event(e: any, receivedAt: number): ProviderEvent {
  const id = str(e?.id);
  if (!isObject(e) || !id) return note('sandbox event without id');
  const at = fromSeconds(e.timestamp, receivedAt);
  if (e.type === 'message') {
    const channel = str(e.channel);
    const from = str(e.from);
    const to = str(e.to);
    if (!channel || !CHANNELS.has(channel) || !from || !to)
      return note(`sandbox message ${id} needs channel, from and to`);
    return {
      type: 'message',
      key: `sandbox:${id}`,
      receiver: { channel: channel as ChannelType, addresses: [to] },
      from,
      providerMessageId: id,
      content: { kind: 'text', text: String(e.text ?? '') },
      occurredAt: at,
    };
  }
  const messageId = str(e.message_id);
  const status = str(e.status);
  if (!messageId || !status) return note(`sandbox event ${id} needs message_id and status`);
  return {
    type: 'status',
    key: `sandbox:${id}`,
    ref: { providerMessageId: messageId },
    status: Object.hasOwn(STATUS, status) ? STATUS[status] : null,
    providerStatus: status,
    errorCode: str(e.error?.code) ?? null,
    errorMessage: str(e.error?.message) ?? null,
    occurredAt: at,
  };
}

export const sandboxWebhook: WebhookHandler<SandboxPayload, Buffer> = {
  provider: 'sandbox',
  kinds: ['sandbox'],
  secretName: 'signing_secret',
  parse(req) {
    const j = jsonBody(req);
    return isObject(j) && j.object === 'msgd_sandbox' && Array.isArray(j.events) ? (j as SandboxPayload) : null;
  },
  hints: () => [],
  signature(req) {
    const v = header(req, SANDBOX_SIGNATURE_HEADER);
    if (v === undefined) return { ok: false, reason: 'missing X-Msgd-Sandbox-Signature header' };
    const m = /^sha256=([0-9a-f]{64})$/i.exec(v.trim());
    return m
      ? { ok: true, sig: Buffer.from(m[1], 'hex') }
      : { ok: false, reason: 'malformed X-Msgd-Sandbox-Signature header' };
  },
  matches: (req, _p, sig, secret) => hmacEquals('sha256', secret, req.raw, sig),
  events: (p, receivedAt) => p.events.map((e) => event(e, receivedAt)),
};
