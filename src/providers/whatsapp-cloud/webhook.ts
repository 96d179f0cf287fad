import type { ProviderEvent, Receiver } from '../../core/inbound.js';
import type { MediaRef, MessageContent } from '../../core/message-content.js';
import type { MessageStatus } from '../../core/statuses.js';
import { fromWaId } from '../../lib/phone.js';
import { metaMatches, metaSignature, type MetaSignature } from '../meta-signature.js';
import { fromSeconds, isObject, jsonBody, note, str, type GatewayHint, type WebhookHandler } from '../webhook-common.js';

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
      if (isObject(c?.value)) out.push({ field: c.field, value: c.value });
    }
  }
  return out;
}

function errorOf(errors: unknown): { code: string | null; message: string | null } {
  const e = Array.isArray(errors) ? errors[0] : undefined;
  if (!isObject(e)) return { code: null, message: null };
  const parts = [str(e.title) ?? str(e.message), str(e.error_data?.details)].filter(Boolean);
  return { code: str(e.code) ?? null, message: parts.length ? parts.join(': ') : null };
}

export function whatsappContent(m: Record<string, any>): MessageContent | null {
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
    return { kind: 'media', caption, media: [{ type: 'location', url: `geo:${l.latitude},${l.longitude}`, caption }] };
  }
  // Taps on quick-reply buttons and interactive lists are what the customer "wrote".
  if (type === 'button') return { kind: 'text', text: String(m.button?.text ?? m.button?.payload ?? '') };
  if (type === 'interactive') {
    const i = m.interactive ?? {};
    const text = str(i.button_reply?.title) ?? str(i.list_reply?.title) ?? str(i.nfm_reply?.body);
    return text === undefined ? null : { kind: 'text', text };
  }
  return null;
}

function events(p: WaPayload): ProviderEvent[] {
  const out: ProviderEvent[] = [];
  for (const { field, value } of values(p)) {
    if (field !== 'messages') {
      out.push(note(`WhatsApp webhook field "${field}" is not handled`));
      continue;
    }
    const phoneNumberId = str(value.metadata?.phone_number_id);
    const display = str(value.metadata?.display_phone_number);
    const receiver: Receiver = { channel: 'whatsapp', addresses: display ? [fromWaId(display)] : [], phoneNumberId };
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
        occurredAt: fromSeconds(s.timestamp),
      });
    }
    for (const m of Array.isArray(value.messages) ? value.messages : []) {
      const id = str(m?.id);
      const from = str(m?.from);
      const content = isObject(m) ? whatsappContent(m) : null;
      if (!id || !from) {
        out.push(note('WhatsApp message without id or sender'));
      } else if (!content) {
        out.push(note(`WhatsApp ${str(m.type) ?? 'untyped'} message ${id} is not stored${m.errors ? ` (${errorOf(m.errors).message})` : ''}`));
      } else {
        out.push({
          type: 'message',
          key: `whatsapp:message:${id}`,
          receiver,
          from: fromWaId(from),
          profileName: names.get(from) ?? null,
          providerMessageId: id,
          content,
          occurredAt: fromSeconds(m.timestamp),
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
