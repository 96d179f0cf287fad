import { graphRefusal } from '../graph-send.js';
import type { ProviderEvent, Receiver } from '../../core/inbound.js';
import type { Choice, MediaRef, MessageContent, SharedContact } from '../../core/message-content.js';
import type { MessageStatus } from '../../core/statuses.js';
import { fromWaId } from '../../lib/phone.js';
import { metaMatches, metaSignature, type MetaSignature } from '../meta-signature.js';
import {
  fromSeconds,
  isObject,
  jsonBody,
  kept,
  note,
  str,
  type GatewayHint,
  type WebhookHandler,
} from '../webhook-common.js';

// WhatsApp Cloud API webhooks (FACTS A4): object "whatsapp_business_account", one
// entry per WABA, changes with field "messages" whose value carries statuses, inbound
// messages and out-of-band errors. Timestamps are strings of Unix seconds; wa_id has no "+".

interface WaPayload {
  object: 'whatsapp_business_account';
  entry: any[];
}

const STATUS: Record<string, MessageStatus> = { sent: 'sent', delivered: 'delivered', read: 'read', failed: 'failed' };
const MEDIA = new Set(['image', 'audio', 'video', 'document', 'sticker']);

function values(p: WaPayload): any[] {
  const out: any[] = [];
  for (const e of p.entry) {
    for (const c of Array.isArray(e?.changes) ? e.changes : []) {
      if (isObject(c?.value)) out.push({ field: c.field, value: c.value, waba: str(e?.id), time: e?.time });
    }
  }
  return out;
}

const TEMPLATE_FIELDS = new Set(['message_template_status_update', 'template_category_update']);

/**
 * A status webhook's `event` is what happened, not always a status: a reinstated or unarchived
 * template can be sent again (APPROVED); a flagged one (at risk from feedback), a locked one
 * (no edits) or a WABA at its template limit still sends as it did (no status change).
 */
const EVENT_STATUS: Record<string, string | null> = {
  REINSTATED: 'APPROVED',
  UNARCHIVED: 'APPROVED',
  FLAGGED: null,
  LOCKED: null,
  UNLOCKED: null,
  LIMIT_EXCEEDED: null,
};

function statusOf(event: string | undefined): string | undefined {
  if (event === undefined) return undefined;
  const mapped = EVENT_STATUS[event.toUpperCase()];
  return mapped === undefined ? event : (mapped ?? undefined);
}

/**
 * A template's status or category changed at Meta: entry.id is the WABA. A status event names
 * the template's category too; a category change names the new one (announced before it takes
 * effect, then again when it has: either way the category Meta now uses or is about to).
 */
function templateEvent(
  field: string,
  value: Record<string, any>,
  waba: string | undefined,
  time: unknown,
  receivedAt: number,
): ProviderEvent {
  const metaId = str(value.message_template_id) ?? null;
  const name = str(value.message_template_name) ?? null;
  const language = str(value.message_template_language) ?? null;
  const event = field === 'message_template_status_update' ? str(value.event) : undefined;
  const status = statusOf(event);
  const category =
    field === 'template_category_update' ? str(value.new_category) : str(value.message_template_category);
  if (!waba || (!metaId && !(name && language)) || (!status && !category))
    return note(`WhatsApp ${field} without a WABA id, template or change`);
  const at = fromSeconds(time, receivedAt);
  return {
    type: 'template',
    key: `whatsapp:${field}:${waba}:${metaId ?? `${name}:${language}`}:${event ?? ''}:${category ?? ''}:${at}`,
    change: {
      account: { kind: 'whatsapp_cloud', setting: 'waba_id', value: waba },
      metaId,
      name,
      language,
      status,
      category,
      at,
    },
  };
}

function errorOf(errors: unknown): { code: string | null; message: string | null } {
  const e = Array.isArray(errors) ? errors[0] : undefined;
  if (!isObject(e)) return { code: null, message: null };
  const parts = [str(e.title) ?? str(e.message), str(e.error_data?.details)].filter(Boolean);
  return { code: str(e.code) ?? null, message: parts.length ? parts.join(': ') : null };
}

/** What a tap carried: the option's id or payload and title, beside the text stored as before. */
function choiceText(choice: Choice, text: string | undefined): MessageContent {
  return { kind: 'text', text: text ?? '', choice };
}

/** A Flow's response_json: an object as partners would want it; the string itself if it is not JSON. */
function flowResponse(v: unknown): unknown {
  if (typeof v !== 'string') return v ?? null;
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}

function interactiveContent(i: Record<string, any>): MessageContent | null {
  const b = i.button_reply;
  if (isObject(b))
    return choiceText(
      { type: 'button_reply', id: str(b.id) ?? null, payload: null, title: str(b.title) ?? null },
      str(b.title),
    );
  const l = i.list_reply;
  if (isObject(l)) {
    const choice: Choice = {
      type: 'list_reply',
      id: str(l.id) ?? null,
      payload: null,
      title: str(l.title) ?? null,
      description: str(l.description) ?? null,
    };
    return choiceText(choice, str(l.title));
  }
  const n = i.nfm_reply;
  if (isObject(n)) {
    const choice: Choice = {
      type: 'nfm_reply',
      id: null,
      payload: null,
      title: null,
      name: str(n.name) ?? null,
      response: flowResponse(n.response_json),
    };
    return choiceText(choice, str(n.body));
  }
  return null;
}

function baseContent(m: Record<string, any>): MessageContent | null {
  const type = String(m.type ?? '');
  if (type === 'text') return { kind: 'text', text: String(m.text?.body ?? '') };
  if (MEDIA.has(type)) {
    const o = isObject(m[type]) ? m[type] : {};
    const ref: MediaRef = {
      type,
      media_id: str(o.id) ?? null,
      url: str(o.url) ?? null,
      mime_type: str(o.mime_type) ?? null,
      caption: str(o.caption) ?? null,
      filename: str(o.filename) ?? null,
      sha256: str(o.sha256) ?? null,
    };
    return { kind: 'media', caption: ref.caption, media: [ref] };
  }
  if (type === 'location' && isObject(m.location)) {
    const l = m.location;
    const caption = [str(l.name), str(l.address)].filter(Boolean).join(', ') || null;
    // geo: URI (RFC 5870) only for a real position; a location without one keeps its name and address.
    const lat = degrees(l.latitude, 90);
    const lon = degrees(l.longitude, 180);
    return {
      kind: 'media',
      caption,
      media: [{ type: 'location', url: lat !== null && lon !== null ? `geo:${lat},${lon}` : null, caption }],
    };
  }
  // Taps on template quick-reply buttons and interactive buttons and lists are what the
  // customer "wrote"; the id or payload says which option it was.
  if (type === 'button') {
    const b = isObject(m.button) ? m.button : {};
    return choiceText(
      { type: 'button', id: null, payload: str(b.payload) ?? null, title: str(b.text) ?? null },
      str(b.text) ?? str(b.payload),
    );
  }
  if (type === 'interactive' && isObject(m.interactive)) return interactiveContent(m.interactive);
  // A reaction names the message reacted to; an empty emoji takes the reaction back.
  if (type === 'reaction' && isObject(m.reaction) && str(m.reaction.message_id)) {
    const emoji = str(m.reaction.emoji) ?? null;
    return {
      kind: 'reaction',
      action: emoji ? 'react' : 'unreact',
      emoji,
      target: { provider_message_id: str(m.reaction.message_id)!, message_id: null },
    };
  }
  if (type === 'contacts' && Array.isArray(m.contacts))
    return { kind: 'contacts', contacts: m.contacts.filter(isObject).map(sharedContact) };
  return null;
}

const list = (v: unknown): Record<string, any>[] => (Array.isArray(v) ? v.filter(isObject) : []);

function sharedContact(c: Record<string, any>): SharedContact {
  return {
    name:
      str(c.name?.formatted_name) ??
      ([str(c.name?.first_name), str(c.name?.last_name)].filter(Boolean).join(' ') || null),
    phones: list(c.phones).map((p) => ({
      phone: str(p.phone) ?? null,
      wa_id: str(p.wa_id) ?? null,
      type: str(p.type) ?? null,
    })),
    emails: list(c.emails).map((e) => ({ email: str(e.email) ?? null, type: str(e.type) ?? null })),
    organization: str(c.org?.company) ?? null,
    data: kept(c),
  };
}

/**
 * Everything else a customer can send (unsupported, order, system, request_welcome, a type newer
 * than this code, an interactive reply of an unknown kind): stored all the same, under the
 * provider's type, with any text and error Meta gives and the type's object as it came.
 */
function otherContent(m: Record<string, any>): MessageContent {
  const type = str(m.type) ?? 'unknown';
  const o = isObject(m[type]) ? m[type] : undefined;
  const text = str(o?.body) ?? str(o?.text) ?? str(o?.caption) ?? null;
  const error = Array.isArray(m.errors) && m.errors.length ? errorOf(m.errors) : null;
  return { kind: 'other', type, text, error, data: kept(o ?? null) };
}

/** A latitude or longitude (a number, or a numeric string) within ±max, else null. */
function degrees(v: unknown, max: number): number | null {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
  return Number.isFinite(n) && Math.abs(n) <= max ? n : null;
}

export function whatsappContent(m: Record<string, any>): MessageContent {
  const c = baseContent(m) ?? otherContent(m);
  // context {from, id}: the message this one replies to (a forwarded message has a context without id).
  const ctx = m.context;
  const id = isObject(ctx) ? str(ctx.id) : undefined;
  if (id && c.kind !== 'template' && c.kind !== 'email') {
    const from = str(ctx!.from);
    c.reply_to = { provider_message_id: id, message_id: null, from: from ? fromWaId(from) : null };
  }
  return c;
}

function events(p: WaPayload, receivedAt: number): ProviderEvent[] {
  const out: ProviderEvent[] = [];
  for (const { field, value, waba, time } of values(p)) {
    if (TEMPLATE_FIELDS.has(field)) {
      out.push(templateEvent(field, value, waba, time, receivedAt));
      continue;
    }
    if (field !== 'messages') {
      out.push(note(`WhatsApp webhook field "${field}" is not handled`));
      continue;
    }
    const phoneNumberId = str(value.metadata?.phone_number_id);
    const display = str(value.metadata?.display_phone_number);
    const receiver: Receiver = {
      channel: 'whatsapp',
      addresses: display ? [fromWaId(display)] : [],
      gatewayKey: phoneNumberId
        ? { kind: 'whatsapp_cloud', setting: 'phone_number_id', value: phoneNumberId }
        : undefined,
    };
    const names = new Map<string, string>();
    for (const c of Array.isArray(value.contacts) ? value.contacts : []) {
      const id = str(c?.wa_id);
      const name = str(c?.profile?.name);
      if (id && name) names.set(id, name);
    }
    for (const s of Array.isArray(value.statuses) ? value.statuses : []) {
      const id = str(s?.id);
      const st = str(s?.status);
      if (!id || !st) {
        out.push(note('WhatsApp status without id or status'));
        continue;
      }
      const err = errorOf(s.errors);
      out.push({
        type: 'status',
        key: `whatsapp:status:${id}:${st}`,
        ref: { providerMessageId: id },
        status: Object.hasOwn(STATUS, st) ? STATUS[st] : null,
        providerStatus: st,
        errorCode: err.code,
        errorMessage: err.message,
        occurredAt: fromSeconds(s.timestamp, receivedAt),
        ...(st === 'failed' && err.code && graphRefusal(Number(err.code), err.message)
          ? { suppress: graphRefusal(Number(err.code), err.message) }
          : {}),
      });
    }
    for (const m of Array.isArray(value.messages) ? value.messages : []) {
      const id = str(m?.id);
      const from = str(m?.from);
      if (!id || !from || !isObject(m)) {
        out.push(note('WhatsApp message without id or sender'));
      } else if (!/^\+?\d{4,20}$/.test(from)) {
        // A wa_id is the sender's number in digits: anything else is no address to answer.
        out.push(note(`WhatsApp message ${id} from "${from.slice(0, 40)}", which is not a phone number`));
      } else {
        const content = whatsappContent(m);
        out.push({
          type: 'message',
          key: `whatsapp:message:${id}`,
          receiver,
          from: fromWaId(from),
          profileName: names.get(from) ?? null,
          providerMessageId: id,
          content,
          occurredAt: fromSeconds(m.timestamp, receivedAt),
        });
      }
    }
    for (const e of Array.isArray(value.errors) ? value.errors : []) {
      const err = errorOf([e]);
      out.push(note(`WhatsApp error ${err.code ?? '?'}: ${err.message ?? 'no details'}`));
    }
  }
  return out;
}

export const whatsappWebhook: WebhookHandler<WaPayload, MetaSignature> = {
  provider: 'whatsapp',
  kinds: ['whatsapp_cloud'],
  secretName: 'app_secret',
  parse(req) {
    const j = jsonBody(req);
    return isObject(j) && j.object === 'whatsapp_business_account' && Array.isArray(j.entry) ? (j as WaPayload) : null;
  },
  hints(p) {
    const hints: GatewayHint[] = [];
    for (const { value } of values(p)) {
      const id = str(value.metadata?.phone_number_id);
      if (id) hints.push({ kind: 'whatsapp_cloud', setting: 'phone_number_id', value: id });
    }
    for (const e of p.entry) {
      const waba = str(e?.id);
      if (waba) hints.push({ kind: 'whatsapp_cloud', setting: 'waba_id', value: waba });
    }
    return hints;
  },
  signature: metaSignature,
  matches: (req, _p, sig, secret) => metaMatches(req, sig, secret),
  events,
};
