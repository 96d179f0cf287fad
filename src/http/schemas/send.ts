import { z } from 'zod';
import { normalizeEmail } from '../../lib/email.js';
import { normalizeE164 } from '../../lib/phone.js';
import { isBlank, templateOf } from './whatsapp-template.js';

export { isBlank };

// Payloads of the legacy partner send API. Unknown keys are ignored (partners' clients send
// extras); every problem with a known key is reported in details.

export const LIMITS = {
  smsText: 1600,
  whatsappText: 4096,
  messengerText: 2000,
  instagramText: 1000,
  subject: 998,
  htmlBytes: 512 * 1024,
  textBytes: 512 * 1024,
};

/**
 * A required string field: "required: <what>" when missing (or null), "must be a string: <what>"
 * when of another type. Its checks' issues are worded by their own message or houseError.
 */
export function requiredString(what: string) {
  return z.string({
    error: (iss) =>
      iss.code !== 'invalid_type' ? undefined : iss.input == null ? `required: ${what}` : `must be a string: ${what}`,
  });
}

/**
 * An optional field where null means absent: many serializers write null for "not set", and
 * refusing it (or sending "null") helps no one.
 */
export function optional<T extends z.ZodType>(schema: T) {
  return schema.nullish().transform((v) => (v === null ? undefined : v));
}

/** Characters as code points (an emoji is one), as zod's string max counts them. */
export function charCount(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** The channels whose messages are a text with a length limit. */
export type TextChannel = 'sms' | 'whatsapp' | 'messenger' | 'instagram';

/**
 * A message text's problem with its channel's length limit, or null, counted as the provider
 * counts it, so no text msgd accepts is refused for its length after the partner was charged.
 * Instagram's is 1,000 bytes of UTF-8 (Meta: "Message text must be UTF-8 and be 1000 bytes or
 * less"), so é counts two and an emoji four. The others count UTF-16 code units (string
 * length): an emoji or any character beyond the Basic Multilingual Plane counts as two. Twilio
 * counts its 1,600 so (error 21617: such characters "count as multiple characters"); Meta does
 * not say how it counts WhatsApp's and Messenger's, and this is the stricter reading.
 */
export function textLimitProblem(channel: TextChannel, text: string): string | null {
  if (channel === 'instagram') {
    return Buffer.byteLength(text, 'utf8') > LIMITS.instagramText
      ? `must be at most ${LIMITS.instagramText} bytes of UTF-8 on instagram (Meta's limit: é counts 2, an emoji 4)`
      : null;
  }
  const max = channel === 'sms' ? LIMITS.smsText : channel === 'whatsapp' ? LIMITS.whatsappText : LIMITS.messengerText;
  return text.length > max
    ? `must be at most ${max} characters${channel === 'sms' ? '' : ` on ${channel}`} (an emoji counts as 2)`
    : null;
}

/**
 * What is wrong with a recipient on its channel, or null: E.164 on sms and whatsapp, an email
 * address, the page-scoped or Instagram-scoped id (digits) on messenger and instagram.
 */
export function recipientProblem(channel: TextChannel | 'email', to: string): string | null {
  if (channel === 'sms' || channel === 'whatsapp') {
    return normalizeE164(to) === null
      ? 'must be a valid phone number in E.164 format with a leading +, e.g. +14155550123'
      : null;
  }
  if (channel === 'email') return normalizeEmail(to) === null ? 'must be a valid email address' : null;
  return /^\d{1,64}$/.test(to)
    ? null
    : `must be the ${channel === 'messenger' ? 'page-scoped (PSID)' : 'Instagram-scoped (IGSID)'} recipient id (digits)`;
}

// One parse per number (the max-metadata validity check is the costliest step of a send).
export const e164 = requiredString('a phone number in E.164 format, e.g. +14155550123').transform((v, ctx) => {
  const n = normalizeE164(v);
  if (n !== null) return n;
  ctx.addIssue({
    code: 'custom',
    message: 'must be a valid phone number in E.164 format with a leading +, e.g. +14155550123',
  });
  return z.NEVER;
});

const bytes = (max: number) =>
  z.string().refine((v) => Buffer.byteLength(v, 'utf8') <= max, `must be at most ${max} bytes of UTF-8`);

/** A scheduled send's time, checked against config scheduling.* by the route (send-flow scheduledAt). */
const sendAt = optional(z.string({ error: 'must be an ISO 8601 time with an offset' }));

export const smsBody = z.object({
  to: e164,
  send_at: sendAt,
  text: requiredString('the message text')
    .min(1, 'must not be empty')
    .refine((v) => v === '' || !isBlank(v), 'must not be only whitespace')
    .superRefine((v, ctx) => {
      const problem = textLimitProblem('sms', v);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
});

// Trimmed before it is checked; an internationalised domain is checked and kept in ASCII.
export const emailAddress = requiredString('an email address').transform((v, ctx) => {
  const address = normalizeEmail(v);
  if (address !== null) return address;
  ctx.addIssue({ code: 'custom', message: 'must be a valid email address' });
  return z.NEVER;
});

export const emailBody = z.object({
  to: emailAddress,
  subject: requiredString('the subject line')
    .min(1, 'must not be empty')
    .refine((v) => v === '' || !isBlank(v), 'must not be only whitespace')
    .max(LIMITS.subject, `must be at most ${LIMITS.subject} characters`)
    .refine((v) => !/[\r\n]/.test(v), 'must not contain line breaks'),
  html: requiredString('the HTML body')
    .min(1, 'must not be empty')
    .refine((v) => v === '' || !isBlank(v), 'must not be only whitespace')
    .pipe(bytes(LIMITS.htmlBytes)),
  text: optional(bytes(LIMITS.textBytes)),
  from_name: optional(
    z
      .string()
      .max(100, 'must be at most 100 characters')
      .refine((v) => !/[\r\n<>"]/.test(v), 'must not contain line breaks, quotes or angle brackets'),
  ),
  reply_to: optional(emailAddress),
  send_at: sendAt,
});

export const whatsappBody = z
  .object({
    channel: optional(
      z.enum(['whatsapp', 'messenger', 'instagram'], { error: 'must be whatsapp, messenger or instagram' }),
    ),
    to: requiredString('the recipient').min(1, 'must not be empty'),
    type: z
      .enum(['text', 'template'], { error: 'must be "text" or "template"' })
      .nullish()
      .transform((v) => v ?? 'text'),
    text: optional(z.string({ error: 'must be a string' })),
    // The template fields are checked by templateOf, field by field, in both shapes.
    template: optional(z.unknown()),
    language: optional(z.unknown()),
    parameters: optional(z.unknown()),
    components: optional(z.unknown()),
    send_at: sendAt,
    category: optional(z.unknown()),
  })
  .superRefine(
    (b, ctx) => {
      // Runs even when a field above already failed (when: always), so every problem is listed
      // at once; a field that already has an issue gets no second one.
      const flagged = new Set(ctx.issues.map((i) => String(i.path?.[0])));
      const add = (path: (string | number)[], message: string) => {
        if (!flagged.has(String(path[0]))) ctx.addIssue({ code: 'custom', path, message });
      };
      const channel = channelOf(b);
      if (typeof b.to === 'string' && b.to !== '') {
        const problem = recipientProblem(channel, b.to);
        if (problem) add(['to'], problem);
      }
      if (b.type === 'text') {
        if (typeof b.text !== 'string' || b.text.length === 0) add(['text'], 'required: the message text');
        else if (isBlank(b.text)) add(['text'], 'must not be only whitespace');
        else {
          const problem = textLimitProblem(channel, b.text);
          if (problem) add(['text'], problem);
        }
      } else if (b.type === 'template') {
        if (channel !== 'whatsapp')
          add(['type'], 'templates are a WhatsApp feature; use type "text" on messenger and instagram');
        templateOf(b, add);
      }
    },
    { when: () => true },
  )
  .transform((b) => ({
    channel: channelOf(b),
    to: b.to,
    type: b.type,
    text: b.text,
    template: b.type === 'template' ? templateOf(b, () => {})! : undefined,
    send_at: b.send_at,
  }));

function channelOf(b: { channel?: string }) {
  return b.channel === 'messenger' || b.channel === 'instagram' ? b.channel : 'whatsapp';
}
