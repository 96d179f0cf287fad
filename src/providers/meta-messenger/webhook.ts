import type { ChannelType } from '../../core/context.js';
import type { ProviderEvent, Receiver } from '../../core/inbound.js';
import type { MediaRef, MessageContent } from '../../core/message-content.js';
import { metaMatches, metaSignature, type MetaSignature } from '../meta-signature.js';
import {
  isObject,
  jsonBody,
  kept,
  note,
  str,
  timeOr,
  type GatewayHint,
  type WebhookHandler,
} from '../webhook-common.js';

// Messenger (object "page") and Instagram (object "instagram") webhooks (FACTS B2): entry[]
// per page / IG account, messaging[] events with sender, recipient, timestamp (ms) and one of
// message, postback, reaction, delivery, read. Instagram's Business-Login examples wrap the notification in an
// array, so both forms are taken. Echoes of our own sends carry is_echo and are skipped.

type Notifications = any[];

function notifications(j: unknown, object: string): Notifications | null {
  const list = Array.isArray(j) ? j : [j];
  if (list.length === 0 || !list.every((n) => isObject(n) && n.object === object && Array.isArray(n.entry)))
    return null;
  return list;
}

function attachment(a: any): MediaRef {
  const p = isObject(a?.payload) ? a.payload : {};
  const coords = p.coordinates;
  const url = str(p.url) ?? (isObject(coords) ? `geo:${coords.lat},${coords.long}` : null);
  return { type: str(a?.type) ?? 'file', url: url ?? null, caption: str(p.title) ?? null };
}

function baseContent(m: Record<string, any>): MessageContent | null {
  const atts = Array.isArray(m.attachments) ? m.attachments : [];
  if (atts.length) return { kind: 'media', caption: str(m.text) ?? null, media: atts.map(attachment) };
  if (typeof m.text !== 'string') return null;
  // A quick reply tapped: its text arrives as the message, its payload beside it.
  const qr = m.quick_reply;
  if (isObject(qr))
    return {
      kind: 'text',
      text: m.text,
      choice: { type: 'quick_reply', id: null, payload: str(qr.payload) ?? null, title: m.text },
    };
  return { kind: 'text', text: m.text };
}

function content(m: Record<string, any>): MessageContent {
  // Neither text nor attachments (is_unsupported: a message type Meta does not deliver to
  // apps): stored all the same, so the partner sees the customer wrote.
  const c: MessageContent = baseContent(m) ?? {
    kind: 'other',
    type: m.is_unsupported ? 'unsupported' : 'unknown',
    text: null,
    error: null,
    data: kept(Object.fromEntries(Object.entries(m).filter(([k]) => k !== 'mid'))),
  };
  if (c.kind === 'template' || c.kind === 'email' || !isObject(m.reply_to)) return c;
  const replied = str(m.reply_to.mid);
  if (replied) c.reply_to = { provider_message_id: replied, message_id: null };
  // An Instagram story reply names the story, not a message: kept beside, as a story mention's URL is.
  const story = m.reply_to.story;
  if (isObject(story) && (str(story.id) || str(story.url)))
    c.reply_to_story = { id: str(story.id) ?? null, url: str(story.url) ?? null };
  return c;
}

/** A postback (a persistent-menu item, a template's button, Get Started): its title is what the customer "wrote". */
function postbackContent(p: Record<string, any>): MessageContent {
  const title = str(p.title) ?? null;
  const payload = str(p.payload) ?? null;
  return { kind: 'text', text: title ?? payload ?? '', choice: { type: 'postback', id: null, payload, title } };
}

/** A reaction to a message (FACTS B2 shape: {mid, action: react|unreact, emoji, reaction}). */
function reactionContent(r: Record<string, any>): Extract<MessageContent, { kind: 'reaction' }> | null {
  const mid = str(r.mid);
  if (!mid) return null;
  const action = r.action === 'unreact' ? 'unreact' : 'react';
  return {
    kind: 'reaction',
    action,
    emoji: action === 'react' ? (str(r.emoji) ?? null) : null,
    reaction: str(r.reaction) ?? null,
    target: { provider_message_id: mid, message_id: null },
  };
}

const num = (v: unknown): number | null =>
  typeof v === 'number' && Number.isFinite(v) ? v : /^\d+$/.test(String(v)) ? Number(v) : null;

function eventsOf(provider: 'messenger' | 'instagram', list: Notifications, receivedAt: number): ProviderEvent[] {
  const channel: ChannelType = provider;
  const out: ProviderEvent[] = [];
  for (const n of list) {
    for (const entry of n.entry) {
      const entryId = str(entry?.id);
      for (const ev of Array.isArray(entry?.messaging) ? entry.messaging : []) {
        const account = str(ev?.recipient?.id);
        const user = str(ev?.sender?.id);
        const receiver: Receiver = {
          channel,
          addresses: [...new Set([account, entryId].filter((x): x is string => !!x))],
        };
        const stamp = num(ev?.timestamp);
        const at = stamp === null ? receivedAt : timeOr(Math.round(stamp), receivedAt);
        if (!user || receiver.addresses.length === 0) {
          out.push(note(`${provider} event without sender or recipient`));
        } else if (isObject(ev.message)) {
          const m = ev.message;
          const mid = str(m.mid);
          // An unsend is keyed by who unsent what where, so a message arriving after it finds it.
          const unsendKey = mid && `${provider}:unsend:${receiver.addresses[0]}:${user}:${mid}`;
          if (m.is_echo) out.push(note(`echo of our own ${provider} send skipped${mid ? ` (${mid})` : ''}`));
          else if (!mid || !unsendKey) out.push(note(`${provider} message without mid`));
          else if (m.is_deleted) {
            out.push({ type: 'unsend', key: unsendKey, receiver, from: user, providerMessageId: mid, occurredAt: at });
          } else {
            out.push({
              type: 'message',
              key: `${provider}:message:${mid}`,
              receiver,
              from: user,
              providerMessageId: mid,
              content: content(m),
              occurredAt: at,
              unsendKey,
            });
          }
        } else if (isObject(ev.postback)) {
          // Newer postbacks carry a mid; older ones are identified by who, when and what.
          const mid = str(ev.postback.mid);
          const key = mid
            ? `${provider}:postback:${mid}`
            : `${provider}:postback:${receiver.addresses[0]}:${user}:${stamp ?? ''}:${str(ev.postback.payload) ?? ''}`;
          out.push({
            type: 'message',
            key,
            receiver,
            from: user,
            providerMessageId: mid ?? null,
            content: postbackContent(ev.postback),
            occurredAt: at,
          });
        } else if (isObject(ev.reaction)) {
          const c = reactionContent(ev.reaction);
          if (!c) out.push(note(`${provider} reaction without mid`));
          else {
            // A reaction has no id of its own: stored without a provider id, keyed by who reacted to what, how and when.
            const key = `${provider}:reaction:${receiver.addresses[0]}:${user}:${c.target.provider_message_id}:${c.action}:${stamp ?? ''}`;
            out.push({
              type: 'message',
              key,
              receiver,
              from: user,
              providerMessageId: null,
              content: c,
              occurredAt: at,
            });
          }
        } else if (isObject(ev.delivery) || isObject(ev.read)) {
          const status = isObject(ev.delivery) ? 'delivered' : 'read';
          const body = ev.delivery ?? ev.read;
          const watermark = num(body.watermark);
          const mids = [...(Array.isArray(body.mids) ? body.mids : []), body.mid].filter(
            (x): x is string => typeof x === 'string' && x !== '',
          );
          if (watermark === null && mids.length === 0) {
            out.push(note(`${provider} ${status} receipt without watermark or mid`));
            continue;
          }
          out.push({
            type: 'watermark',
            key: `${provider}:${status}:${receiver.addresses[0]}:${user}:${watermark ?? mids.join(',')}`,
            receiver,
            contact: user,
            status,
            watermark,
            mids,
            // The watermark is when the newest covered message was sent; the event's own
            // timestamp is when it was delivered or read. Meta's delivery examples carry no
            // timestamp: the watermark is then the best bound known.
            occurredAt: stamp ?? (status === 'delivered' ? watermark : null) ?? at,
          });
        } else {
          const kinds = Object.keys(ev ?? {}).filter((k) => !['sender', 'recipient', 'timestamp'].includes(k));
          out.push(note(`${provider} event ${kinds.join(', ') || '(empty)'} is not handled`));
        }
      }
    }
  }
  return out;
}

function handler(provider: 'messenger' | 'instagram', object: string): WebhookHandler<Notifications, MetaSignature> {
  const kind = provider === 'messenger' ? 'meta_messenger' : 'meta_instagram';
  return {
    provider,
    kinds: [kind],
    secretName: 'app_secret',
    parse: (req) => notifications(jsonBody(req), object),
    hints(list) {
      const hints: GatewayHint[] = [];
      for (const n of list) {
        for (const e of n.entry) {
          const id = str(e?.id);
          if (!id) continue;
          if (provider === 'messenger') hints.push({ kind, setting: 'page_id', value: id });
          else hints.push({ kind, setting: 'ig_account_id', value: id }, { kind, setting: 'page_id', value: id });
        }
      }
      return hints;
    },
    signature: metaSignature,
    matches: (req, _p, sig, secret) => metaMatches(req, sig, secret),
    events: (list, receivedAt) => eventsOf(provider, list, receivedAt),
  };
}

export const messengerWebhook = handler('messenger', 'page');
export const instagramWebhook = handler('instagram', 'instagram');
