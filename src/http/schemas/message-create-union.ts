import { z } from 'zod';
import { LIMITS } from './send.js';

// POST /v1/messages as the OpenAPI document shows it: one object per channel, told apart by
// `channel`, so a generated client knows at compile time that an email needs a subject and an
// SMS takes none. The API validates with messageCreate (src/http/schemas/v1.ts), one schema that
// lists every problem of a request at once; test/v1/openapi-contract.test.ts holds the two to
// the same answers on a corpus of requests. Rules JSON Schema cannot state (a number valid for
// its country, Unicode whitespace, Instagram's limit in bytes) are in the descriptions.

const NOT_BLANK = '\\S';
const text = (max: number, what: string) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(new RegExp(NOT_BLANK))
    .describe(`${what}; not only whitespace (zero-width spaces count as whitespace)`);

const phone = z
  .string()
  .min(1)
  .describe('E.164 with a leading +, e.g. +14155550123; it must be a valid number for its country');
const scopedId = (what: string) =>
  z
    .string()
    .regex(/^\d{1,64}$/)
    .describe(what);
/** Fields of another channel: absent, or null (which the API reads as absent). */
const none = z.null().optional().describe('email only: leave it out');
/** A scheduled send's time. */
export const sendAtField = z
  .string()
  .optional()
  .describe(
    'schedule the send: an ISO 8601 time with an offset (e.g. 2026-12-01T09:00:00+01:00), at least a minute and at most 35 days ahead by default (config scheduling.*). Every check runs and the price is debited now; the message is "scheduled" until then, and POST /v1/messages/{id}/cancel cancels it with a refund',
  );

export const smsMessageCreate = z
  .object({
    channel: z.literal('sms'),
    to: phone,
    body: text(LIMITS.smsText, `the text, at most ${LIMITS.smsText} UTF-16 code units (an emoji counts 2)`),
    subject: none,
    html: none,
    send_at: sendAtField,
  })
  .meta({ id: 'SmsMessageCreate' });

export const whatsappMessageCreate = z
  .object({
    channel: z.literal('whatsapp'),
    to: phone,
    body: text(
      LIMITS.whatsappText,
      `the text, at most ${LIMITS.whatsappText} UTF-16 code units. Outside the 24-hour customer-service window this is refused (400 outside_customer_service_window): send a template through /api/send-whatsapp.php`,
    ),
    subject: none,
    html: none,
    send_at: sendAtField,
  })
  .meta({ id: 'WhatsappMessageCreate' });

export const messengerMessageCreate = z
  .object({
    channel: z.literal('messenger'),
    to: scopedId('the page-scoped id (PSID) of the person'),
    body: text(LIMITS.messengerText, `the text, at most ${LIMITS.messengerText} UTF-16 code units`),
    subject: none,
    html: none,
    send_at: sendAtField,
  })
  .meta({ id: 'MessengerMessageCreate' });

export const instagramMessageCreate = z
  .object({
    channel: z.literal('instagram'),
    to: scopedId('the Instagram-scoped id (IGSID) of the person'),
    body: text(LIMITS.instagramText, `the text, at most ${LIMITS.instagramText} bytes of UTF-8 (é counts 2)`),
    subject: none,
    html: none,
    send_at: sendAtField,
  })
  .meta({ id: 'InstagramMessageCreate' });

export const emailMessageCreate = z
  .object({
    channel: z.literal('email'),
    to: z.string().min(1).describe('one email address; an internationalised domain is sent in ASCII (punycode)'),
    subject: z
      .string()
      .min(1)
      .max(LIMITS.subject)
      .regex(/^[^\r\n]*\S[^\r\n]*$/)
      .describe(`at most ${LIMITS.subject} characters, one line, not only whitespace`),
    body: z.string().min(1).describe(`the plain-text part, at most ${LIMITS.textBytes} bytes of UTF-8`),
    html: z
      .string()
      .min(1)
      .regex(new RegExp(NOT_BLANK))
      .nullable()
      .optional()
      .describe(`an HTML part, at most ${LIMITS.htmlBytes} bytes of UTF-8; null is the same as absent`),
    send_at: sendAtField,
  })
  .meta({ id: 'EmailMessageCreate' });

export const messageCreateUnion = z
  .discriminatedUnion('channel', [
    smsMessageCreate,
    whatsappMessageCreate,
    emailMessageCreate,
    messengerMessageCreate,
    instagramMessageCreate,
  ])
  .meta({ id: 'MessageCreate' });
