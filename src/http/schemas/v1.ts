import { z } from 'zod';
import { CHANNEL_TYPES } from '../../core/context.js';
import { EVENT_TYPES } from '../../core/events.js';
import { MESSAGE_STATUSES } from '../../core/statuses.js';
import { normalizeE164 } from '../../lib/phone.js';
import { DEFAULT_LIMIT, MAX_LIMIT } from '../../web/pagination.js';
import {
  LIMITS,
  charCount,
  emailAddress,
  isBlank,
  optional,
  recipientProblem,
  requiredString,
  textLimitProblem,
  type TextChannel,
} from './send.js';

// The /v1 schemas: the same objects validate requests and generate /v1/openapi.json.
// Response schemas document the JSON the handlers build; test/v1 parses real responses
// with them so the document cannot drift from the API.

const channel = z.enum(CHANNEL_TYPES).describe('whatsapp, sms, email, messenger or instagram');
const isoTime = z.string().describe('ISO 8601 UTC, e.g. 2026-11-22T10:00:00.000Z');
const id = (prefix: string) => z.string().min(1).max(64).describe(`${prefix}_… id`);

export const idParams = z.object({ id: z.string().min(1).max(64) });

const limit = z.coerce
  .number()
  .int()
  .min(1)
  .max(MAX_LIMIT)
  .default(DEFAULT_LIMIT)
  .describe(`page size, 1-${MAX_LIMIT} (default ${DEFAULT_LIMIT})`);
const cursor = z.string().max(512).optional().describe('next_cursor of the previous page');

export const pageQuery = z.object({ limit, cursor });

// --- messages -------------------------------------------------------------------------

export const messageCreate = z
  .object({
    channel,
    to: requiredString('the recipient')
      .min(1)
      .describe('E.164 phone (sms, whatsapp), email address, or the PSID / IGSID (messenger, instagram)'),
    body: requiredString('the message text')
      .min(1, 'must not be empty')
      .describe('the text; for email the plain-text part. Not only whitespace, except on email'),
    subject: optional(z.string()).describe('email only, required there; null is the same as absent'),
    html: optional(z.string()).describe('email only: an HTML part; null is the same as absent'),
    send_at: optional(z.string()).describe(
      'schedule the send: an ISO 8601 time with an offset; null is the same as absent',
    ),
  })
  .superRefine(
    (b, ctx) => {
      // Runs even when a field above already failed (when: always), so every problem is listed
      // at once, as on the send-*.php endpoints; a field that already has an issue gets no second
      // one. The values are then only what the request held: each is checked for its type first.
      const flagged = new Set(ctx.issues.map((i) => String(i.path?.[0])));
      const add = (path: string, message: string) => {
        if (flagged.has(path)) return;
        flagged.add(path);
        ctx.addIssue({ code: 'custom', path: [path], message });
      };
      const ch = (CHANNEL_TYPES as readonly unknown[]).includes(b.channel) ? b.channel : null;
      if (ch === null) return;
      const str = (v: unknown): v is string => typeof v === 'string';
      if (str(b.to)) {
        const problem = recipientProblem(ch as TextChannel | 'email', b.to);
        if (problem) add('to', problem);
      }
      if (ch === 'email') {
        if (b.subject === undefined || b.subject === '') add('subject', 'required for email');
        else if (str(b.subject)) {
          if (isBlank(b.subject)) add('subject', 'must not be only whitespace');
          else if (charCount(b.subject) > LIMITS.subject)
            add('subject', `must be at most ${LIMITS.subject} characters`);
          else if (/[\r\n]/.test(b.subject)) add('subject', 'must not contain line breaks');
        }
        if (str(b.body) && Buffer.byteLength(b.body) > LIMITS.textBytes)
          add('body', `must be at most ${LIMITS.textBytes} bytes`);
        if (b.html === '') add('html', 'must not be empty: leave it out for a plain-text email');
        else if (str(b.html) && isBlank(b.html)) add('html', 'must not be only whitespace');
        else if (str(b.html) && Buffer.byteLength(b.html) > LIMITS.htmlBytes)
          add('html', `must be at most ${LIMITS.htmlBytes} bytes`);
      } else {
        if (str(b.body) && b.body !== '') {
          if (isBlank(b.body)) add('body', 'must not be only whitespace');
          else {
            const problem = textLimitProblem(ch as TextChannel, b.body);
            if (problem) add('body', problem);
          }
        }
        if (b.subject !== undefined) add('subject', 'only for email');
        if (b.html !== undefined) add('html', 'only for email');
      }
    },
    { when: () => true },
  );

export type MessageCreate = z.infer<typeof messageCreate>;

export const normalizeTo = (channel: string, to: string) =>
  channel === 'sms' || channel === 'whatsapp' ? normalizeE164(to)! : channel === 'email' ? emailAddress.parse(to) : to;

const money = z.object({ micro: z.number().int(), amount: z.string() });
const errorObj = z.object({ code: z.string().nullable(), message: z.string().nullable() }).nullable();

const priced = z.object({ micro: z.number().int(), amount: z.string(), currency: z.string() });

export const messageQuote = z
  .object({
    channel,
    to: z.string().describe('the recipient as a send would store it'),
    gateway: z
      .object({ id: z.string(), name: z.string() })
      .nullable()
      .describe("the partner's gateway for the channel; null when none is assigned"),
    from: z.string().nullable().describe('the sender the message would go from; null when no channel is assigned'),
    send_at: isoTime.nullable().describe("the body's send_at when it is valid; null otherwise"),
    encoding: z
      .enum(['GSM-7', 'UCS-2'])
      .nullable()
      .describe('SMS: GSM-7 (160 characters alone, 153 a part) or UCS-2 (70 alone, 67 a part); null otherwise'),
    segments: z.number().int().describe('SMS: the parts the text is sent in (each priced); 1 otherwise'),
    per: z.enum(['segment', 'message']).describe('what unit_price is the price of'),
    unit_price: priced.describe("the partner's own price on the channel, else the default, else 0"),
    total: priced.describe('what the send would debit: unit_price times segments for SMS'),
    currency: z.string(),
    available: priced.describe('balance plus credit limit now'),
    covered: z.boolean().describe('whether current balance and credit cover total'),
    sendable: z.boolean().describe('whether the send would be accepted now'),
    refusal: z
      .object({
        status: z.number().int().describe('the HTTP status the send would answer'),
        code: z.string(),
        message: z.string(),
        details: z.array(z.object({ field: z.string().optional(), message: z.string(), code: z.string().optional() })),
      })
      .nullable()
      .describe('the error the send would answer, the first in its order of checks; null when sendable'),
  })
  .meta({ id: 'MessageQuote' });

export const messageAccepted = z
  .object({
    id: id('msg'),
    status: z.enum(['queued', 'scheduled']).describe('scheduled when the request named send_at'),
    channel,
    to: z.string(),
    created_at: isoTime,
    send_at: isoTime.nullable().describe('the scheduled time; null for a message sent at once'),
  })
  .meta({ id: 'MessageAccepted' });

/** The Instagram story an inbound message replies to (content.reply_to_story). */
export const storyRef = z
  .object({
    id: z.string().nullable().describe("Instagram's id of the story"),
    url: z.string().nullable().describe("the story's media on Meta's CDN; the link expires"),
  })
  .describe('the Instagram story this message replies to');

export const messageOut = z
  .object({
    id: id('msg'),
    direction: z.enum(['outbound', 'inbound']),
    channel,
    to: z.string(),
    from: z.string(),
    status: z.string(),
    content: z
      .object({ kind: z.string(), reply_to_story: storyRef.optional() })
      .catchall(z.unknown())
      .describe(
        'by kind: text (choice?: the option tapped; reply_to?: the message answered; reply_to_story?: the Instagram story answered), template, email, media, reaction (target: the message reacted to), contacts, other (type: the provider type), redacted (was, redacted_at: removed by retention or unsent by the customer); see docs/api.md "Message content"',
      ),
    price: money,
    segments: z.number().int(),
    refunded: z.boolean(),
    provider_message_id: z.string().nullable(),
    error: errorObj,
    possible_duplicate: z.boolean(),
    conversation_id: z.string().nullable(),
    contact_id: z.string().nullable(),
    sent_at: isoTime
      .nullable()
      .describe(
        "inbound: when the customer sent it, by the provider's clock (for Twilio SMS, which gives none, when msgd received it); outbound: when msgd handed it to the provider (null until then)",
      ),
    created_at: isoTime.describe('when msgd stored the message (inbound: when it arrived)'),
    updated_at: isoTime,
    deleted_at: isoTime
      .nullable()
      .describe(
        'inbound Messenger/Instagram: when the customer unsent it (its content is then redacted, and message.deleted was sent); null otherwise',
      ),
    send_at: isoTime
      .nullable()
      .describe('a scheduled send: when it goes (status scheduled until then); null otherwise'),
    history: z
      .array(
        z.object({
          status: z.string(),
          provider_status: z.string().nullable(),
          error: errorObj,
          applied: z.boolean(),
          occurred_at: isoTime,
          recorded_at: isoTime,
        }),
      )
      .optional(),
  })
  .meta({ id: 'Message' });

const timeParam = z
  .string()
  .refine((v) => !Number.isNaN(Date.parse(v)), 'must be an ISO 8601 time, e.g. 2026-11-22T10:00:00Z')
  .transform((v) => Date.parse(v));

export const messagesQuery = z.object({
  limit,
  cursor,
  channel: channel.optional(),
  status: z.enum(MESSAGE_STATUSES as [string, ...string[]]).optional(),
  direction: z.enum(['outbound', 'inbound']).optional(),
  conversation: z.string().max(64).optional().describe('a conversation id (conv_…)'),
  recipient: z
    .string()
    .min(1)
    .max(320)
    .optional()
    .describe(
      "the customer's address (E.164 phone, email in any case, PSID or IGSID): the messages to and from that customer",
    ),
  created_since: timeParam.optional().describe('only messages created at or after this time'),
  created_before: timeParam.optional().describe('only messages created before this time'),
});

// --- conversations ---------------------------------------------------------------------

export const conversationsQuery = z.object({
  limit,
  cursor,
  channel: channel.optional(),
  status: z.enum(['open', 'closed']).optional(),
  contact: z.string().max(64).optional().describe('a contact id (ct_…)'),
  updated_since: timeParam.optional().describe('only conversations with activity at or after this time'),
  updated_before: timeParam.optional().describe('only conversations whose last activity is before this time'),
  sort: z
    .enum(['-created_at', 'updated_at', '-updated_at'])
    .default('-created_at')
    .describe(
      '-created_at (newest first, default), updated_at (oldest activity first: use with updated_since to sync), -updated_at',
    ),
});

export const conversationQuery = z.object({
  limit,
  cursor,
  order: z
    .enum(['desc', 'asc'])
    .default('desc')
    .describe("the conversation's messages: desc (newest first, default) or asc"),
});

const contactSummary = z.object({
  id: id('ct'),
  name: z.string().nullable(),
  phone: z.string().nullable(),
  email: z.string().nullable(),
  messenger_psid: z.string().nullable(),
  instagram_igsid: z.string().nullable(),
});

export const conversationOut = z
  .object({
    id: id('conv'),
    channel,
    status: z.enum(['open', 'closed']),
    contact: contactSummary,
    last_message_at: isoTime.nullable(),
    last_inbound_at: isoTime.nullable(),
    window_expires_at: isoTime
      .nullable()
      .describe(
        "whatsapp, messenger, instagram: when the 24-hour customer-service window closes (24 h after the customer's last message; in the past: closed). null when the customer has not written, or on sms and email",
      ),
    created_at: isoTime,
    updated_at: isoTime,
  })
  .meta({ id: 'Conversation' });

export const pageOf = <T extends z.ZodType>(item: T) =>
  z.object({ data: z.array(item), next_cursor: z.string().nullable() });

export const conversationWithMessages = conversationOut
  .extend({ messages: pageOf(messageOut).describe('a page of its messages; page on with ?cursor') })
  .meta({ id: 'ConversationWithMessages' });

// --- contacts ----------------------------------------------------------------------------

const phoneParam = z
  .string()
  .refine((v) => normalizeE164(v) !== null, 'must be a valid phone number in E.164 format, e.g. +14155550123')
  .transform((v) => normalizeE164(v)!);

export const contactUpsert = z
  .object({
    name: z.string().max(200).nullable().optional(),
    phone: phoneParam.optional(),
    email: emailAddress.optional(),
    messenger_psid: z
      .string()
      .regex(/^\d{1,64}$/, 'digits: the page-scoped id')
      .optional(),
    instagram_igsid: z
      .string()
      .regex(/^\d{1,64}$/, 'digits: the Instagram-scoped id')
      .optional(),
    attributes: z
      .record(z.string().max(100), z.unknown())
      .optional()
      .describe('merged into the stored attributes; a null value removes a key'),
  })
  .refine((b) => b.phone || b.email || b.messenger_psid || b.instagram_igsid, {
    message:
      'at least one of phone, email, messenger_psid, instagram_igsid is required: the contact is found or created by it',
    path: ['phone'],
  })
  .meta({ id: 'ContactUpsert' });

export const contactsQuery = z.object({
  limit,
  cursor,
  q: z.string().min(1).max(200).optional().describe('case-insensitive substring of name, phone or email'),
  phone: phoneParam.optional().describe('an exact phone number (E.164)'),
  email: z.string().max(320).optional().describe('an exact email address'),
});

export const contactOut = contactSummary
  .extend({
    attributes: z.record(z.string(), z.unknown()),
    last_inbound_at: isoTime.nullable(),
    created_at: isoTime,
    updated_at: isoTime,
  })
  .meta({ id: 'Contact' });

// --- webhooks ------------------------------------------------------------------------------

export const SUBSCRIBABLE = EVENT_TYPES.filter((t) => t !== 'webhook.test');

export const webhookCreate = z
  .object({
    url: z.string().max(2048).describe('an https:// URL reachable from the internet'),
    events: z
      .array(z.enum(SUBSCRIBABLE as [string, ...string[]]))
      .min(1)
      .max(SUBSCRIBABLE.length)
      .nullable()
      .optional()
      .describe('event types to receive; omitted or null: all of them'),
    description: z.string().max(500).nullable().optional(),
  })
  .meta({ id: 'WebhookCreate' });

export const webhookOut = z
  .object({
    id: id('whe'),
    url: z.string(),
    description: z.string().nullable(),
    events: z.array(z.string()).nullable(),
    status: z.enum(['enabled', 'disabled']),
    disabled_reason: z.string().nullable(),
    failing_since: isoTime.nullable(),
    secret_rotation_ends_at: isoTime.nullable().describe('while set, the previous secret also signs'),
    created_at: isoTime,
    updated_at: isoTime,
  })
  .meta({ id: 'Webhook' });

export const webhookWithSecret = webhookOut
  .extend({ secret: z.string().describe('whsec_…: shown in this response only; store it now') })
  .meta({ id: 'WebhookWithSecret' });

export const webhookTestOut = z.object({ event_id: id('evt'), delivery_id: id('dlv') }).meta({ id: 'WebhookTest' });

// --- channels ----------------------------------------------------------------------------

export const channelOut = z
  .object({
    id: id('ch'),
    type: channel,
    sender: z.string().describe('the sender address: phone number, email address, page or Instagram account id'),
    provider: z.string(),
    position: z
      .number()
      .int()
      .min(0)
      .describe(
        "the gateway's place in the channel type's order: 0 sends first; SMS and email may have fallbacks (1, 2, …) tried in order when the ones before them certainly did not take a message",
      ),
    role: z.enum(['primary', 'fallback']).describe('primary: position 0; fallback: any later position'),
    status: z.enum(['active', 'disabled']),
    health: z.enum(['ok', 'degraded', 'down', 'disabled', 'unknown']).describe('from the outcomes of recent sends'),
    recent: z.object({
      window_seconds: z.number().int(),
      accepted: z.number().int(),
      failed: z.number().int(),
      retrying: z.number().int(),
      queued: z.number().int(),
    }),
    created_at: isoTime,
  })
  .meta({ id: 'Channel' });

// --- errors ------------------------------------------------------------------------------------

export const errorOut = z
  .object({
    error: z.object({
      code: z.string().describe('stable machine-readable code, e.g. insufficient_scope'),
      message: z.string(),
      details: z.array(z.object({ field: z.string().optional(), message: z.string(), code: z.string().optional() })),
    }),
  })
  .meta({ id: 'Error' });

// --- templates ---------------------------------------------------------------------------

export const templatesQuery = z.object({
  limit,
  cursor,
  name: z.string().min(1).max(512).optional().describe('an exact template name'),
  language: z.string().min(2).max(16).optional().describe('an exact language code, e.g. en_US'),
  status: z
    .string()
    .min(1)
    .max(32)
    .optional()
    .describe("Meta's status: APPROVED, PENDING, REJECTED, PAUSED, DISABLED, ... (case-insensitive)"),
  category: z
    .enum(['marketing', 'utility', 'authentication', 'MARKETING', 'UTILITY', 'AUTHENTICATION'])
    .optional()
    .describe('marketing, utility or authentication'),
});

export const templateOut = z
  .object({
    id: id('tpl'),
    name: z.string(),
    language: z.string().describe("Meta's language code, e.g. en_US"),
    status: z.string().describe('only APPROVED templates can be sent; others are refused with 400 template_invalid'),
    category: z.string().describe('marketing, utility or authentication: the price of a send follows it'),
    parameter_format: z.enum(['positional', 'named']),
    parameters: z
      .object({
        header: z
          .union([
            z.object({ kind: z.literal('text'), params: z.array(z.string()) }),
            z.object({ kind: z.literal('media'), type: z.string() }),
          ])
          .nullable()
          .describe('what the header takes: a text parameter per variable, or one image/video/document/location'),
        body: z.array(z.string()).describe('the body variables in order: "1", "2", ... or their names'),
        buttons: z
          .array(z.object({ index: z.number().int(), type: z.string(), params: z.number().int() }))
          .describe('the buttons that take a parameter, by index'),
        checked: z.boolean().describe('false: msgd does not model these components, so Meta checks the parameters'),
      })
      .describe('the parameters a send must give, as msgd checks them'),
    components: z.array(z.unknown()).describe("the components as Meta's catalogue lists them"),
    synced_at: isoTime
      .nullable()
      .describe('when the catalogue was last read from Meta; null: known from a webhook only'),
    updated_at: isoTime,
  })
  .meta({ id: 'Template' });
