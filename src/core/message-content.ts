// What a message carries, stored as JSON in messages.content, shown as `content` in /v1 and in
// message.received. Outbound kinds match what the provider layer sends (src/providers/types.ts);
// inbound adds media references, reactions, shared contacts and `other` (anything else a
// provider delivers), and may say which message it answers (reply_to) and which option the
// customer picked (choice). docs/api.md "Message content" is the partner-facing reference.

export interface MediaRef {
  type: string;
  url?: string | null;
  media_id?: string | null;
  mime_type?: string | null;
  caption?: string | null;
  filename?: string | null;
  sha256?: string | null;
}

/** Another message this one points at: the one replied to, the one reacted to. */
export interface MessageRef {
  /** The provider's id of it (wamid, mid). */
  provider_message_id: string;
  /** msgd's id of it when msgd has that message (same partner and channel); filled in on arrival. */
  message_id: string | null;
  /** Who sent it, where the provider says (WhatsApp context.from). */
  from?: string | null;
}

/** The option a customer tapped: a button, a list row, a quick reply, a postback, a Flow's answer. */
export interface Choice {
  /** The provider's own name for it: WhatsApp button, button_reply, list_reply, nfm_reply; Messenger/Instagram quick_reply, postback. */
  type: string;
  /** The option's id as the business set it (interactive buttons and list rows). */
  id: string | null;
  /** The payload the business attached (template quick-reply buttons, quick replies, postbacks). */
  payload: string | null;
  /** What the customer saw on it. */
  title: string | null;
  description?: string | null;
  /** A WhatsApp Flow's name and answer (nfm_reply: response_json parsed; the string itself if it is not JSON). */
  name?: string | null;
  response?: unknown;
}

/** A contact card the customer shared (WhatsApp contacts). */
export interface SharedContact {
  name: string | null;
  phones: { phone: string | null; wa_id: string | null; type: string | null }[];
  emails: { email: string | null; type: string | null }[];
  organization: string | null;
  /** The card as the provider sent it (addresses, urls, birthday, name parts, ...). */
  data: unknown;
}

/** An Instagram story: the one a customer replied to. Meta's story URL is a CDN link that expires. */
export interface StoryRef {
  /** Instagram's id of the story. */
  id: string | null;
  url: string | null;
}

interface Inbound {
  /** The message this one replies to. */
  reply_to?: MessageRef;
  /** The Instagram story this one replies to (Meta's reply_to.story). */
  reply_to_story?: StoryRef;
}

export const TEMPLATE_CATEGORIES = ['AUTHENTICATION', 'MARKETING', 'UTILITY'] as const;
export type TemplateCategory = (typeof TEMPLATE_CATEGORIES)[number];

export type MessageContent =
  | ({ kind: 'text'; text: string; choice?: Choice } & Inbound)
  | {
      kind: 'template';
      template: {
        name: string;
        language: string;
        components?: unknown[];
        /** Meta's category as the partner names it; not sent to Meta (it knows its templates). */
        category?: TemplateCategory;
      };
    }
  | { kind: 'email'; subject: string; html?: string; text?: string; fromName?: string; replyTo?: string }
  | ({ kind: 'media'; caption?: string | null; text?: string | null; media: MediaRef[] } & Inbound)
  | ({
      kind: 'reaction';
      /** unreact: the customer took the reaction back. */
      action: 'react' | 'unreact';
      emoji: string | null;
      /** Messenger's name for it (love, like, ...), where given. */
      reaction?: string | null;
      target: MessageRef;
    } & Inbound)
  | ({ kind: 'contacts'; contacts: SharedContact[] } & Inbound)
  | ({
      /** Any other inbound message: unsupported by the provider, or a type msgd has no shape for. */
      kind: 'other';
      /** The provider's type (WhatsApp unsupported, order, system, ...; Messenger unsupported). */
      type: string;
      /** Text the provider gives with it, if any. */
      text: string | null;
      /** The provider's error for it (WhatsApp unsupported messages carry one). */
      error?: { code: string | null; message: string | null } | null;
      /** The provider's object for the type as sent, or null when absent or over 16 KiB. */
      data: unknown;
    } & Inbound);

/** The text a message shows: what message.received carries as `body`. */
export function contentText(c: MessageContent): string {
  switch (c.kind) {
    case 'text':
      return c.text;
    case 'media':
      return c.caption ?? '';
    case 'reaction':
      return c.emoji ?? '';
    case 'other':
      return c.text ?? '';
    default:
      return '';
  }
}

/** The messages a content points at, for msgd's ids to be filled in. */
export function contentRefs(c: MessageContent): MessageRef[] {
  const refs: MessageRef[] = [];
  if ('reply_to' in c && c.reply_to) refs.push(c.reply_to);
  if (c.kind === 'reaction') refs.push(c.target);
  return refs;
}
