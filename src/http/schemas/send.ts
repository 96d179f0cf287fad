import { z } from 'zod';
import { isEmail } from '../../lib/email.js';
import { normalizeE164 } from '../../lib/phone.js';

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

/** A required string field: "required: <what>" when missing, "must be a string" when of another type. */
export function requiredString(what: string) {
  return z.string({ error: (iss) => (iss.input === undefined ? `required: ${what}` : `must be a string: ${what}`) });
}

/** Characters as code points (an emoji is one), as zod's string max counts them. */
export function charCount(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

// One parse per number (the max-metadata validity check is the costliest step of a send).
export const e164 = requiredString('a phone number in E.164 format, e.g. +14155550123')
  .transform((v, ctx) => {
    const n = normalizeE164(v);
    if (n !== null) return n;
    ctx.addIssue({ code: 'custom', message: 'must be a valid phone number in E.164 format with a leading +, e.g. +14155550123' });
    return z.NEVER;
  });

const bytes = (max: number, label: string) =>
  z.string().refine((v) => Buffer.byteLength(v, 'utf8') <= max, `${label} must be at most ${max} bytes`);

export const smsBody = z.object({
  to: e164,
  text: requiredString('the message text')
    .min(1, 'must not be empty')
    .max(LIMITS.smsText, `must be at most ${LIMITS.smsText} characters`),
});

export const emailAddress = requiredString('an email address')
  .refine(isEmail, 'must be a valid email address')
  .transform((v) => v.trim());

export const emailBody = z.object({
  to: emailAddress,
  subject: requiredString('the subject line')
    .min(1, 'must not be empty')
    .max(LIMITS.subject, `must be at most ${LIMITS.subject} characters`)
    .refine((v) => !/[\r\n]/.test(v), 'must not contain line breaks'),
  html: requiredString('the HTML body').min(1, 'must not be empty').pipe(bytes(LIMITS.htmlBytes, 'html')),
  text: bytes(LIMITS.textBytes, 'text').optional(),
  from_name: z
    .string()
    .max(100, 'must be at most 100 characters')
    .refine((v) => !/[\r\n<>"]/.test(v), 'must not contain line breaks, quotes or angle brackets')
    .optional(),
  reply_to: emailAddress.optional(),
});

const TEMPLATE_NAME = /^[a-z0-9_]{1,512}$/;
const LANGUAGE = /^[a-z]{2,3}(_[A-Z]{2})?$/;

const templateParameters = z.array(z.string().max(1024)).max(100);

const templateObject = z.object({
  name: z.string().regex(TEMPLATE_NAME),
  language: z.string().regex(LANGUAGE),
  parameters: templateParameters.optional(),
  components: z.array(z.record(z.string(), z.unknown())).max(20).optional(),
});

type TemplateObject = z.infer<typeof templateObject>;

export const whatsappBody = z
  .object({
    channel: z.enum(['whatsapp', 'messenger', 'instagram'], { error: 'must be whatsapp, messenger or instagram' }).optional(),
    to: requiredString('the recipient').min(1, 'must not be empty'),
    type: z.enum(['text', 'template'], { error: 'must be "text" or "template"' }).default('text'),
    text: z.string({ error: 'must be a string' }).optional(),
    // Checked below, field by field: a union would report one opaque "Invalid input".
    template: z.union([z.string(), z.record(z.string(), z.unknown())], { error: 'must be a template name or {name, language, parameters?}' }).optional(),
    language: z.string({ error: 'must be a string' }).optional(),
    parameters: templateParameters.optional(),
  })
  .superRefine(
    (b, ctx) => {
      // Runs even when a field above already failed (when: always), so every problem is listed
      // at once; a field that already has an issue gets no second one.
      const flagged = new Set(ctx.issues.map((i) => String(i.path?.[0])));
      const add = (path: (string | number)[], message: string) => {
        if (!flagged.has(String(path[0]))) ctx.addIssue({ code: 'custom', path, message });
      };
      const channel = b.channel === 'messenger' || b.channel === 'instagram' ? b.channel : 'whatsapp';
      if (typeof b.to === 'string' && b.to !== '') {
        if (channel === 'whatsapp') {
          if (normalizeE164(b.to) === null) {
            add(['to'], 'must be a valid phone number in E.164 format with a leading +, e.g. +14155550123');
          }
        } else if (!/^\d{1,64}$/.test(b.to)) {
          add(['to'], `must be the ${channel === 'messenger' ? 'page-scoped (PSID)' : 'Instagram-scoped (IGSID)'} recipient id (digits)`);
        }
      }
      if (b.type === 'text') {
        const max = channel === 'whatsapp' ? LIMITS.whatsappText : channel === 'messenger' ? LIMITS.messengerText : LIMITS.instagramText;
        if (typeof b.text !== 'string' || b.text.length === 0) add(['text'], 'required: the message text');
        else if (charCount(b.text) > max) add(['text'], `must be at most ${max} characters on ${channel}`);
      } else if (b.type === 'template') {
        if (channel !== 'whatsapp') add(['type'], 'templates are a WhatsApp feature; use type "text" on messenger and instagram');
        const t = b.template as unknown;
        if (t === undefined) {
          add(['template'], 'required for type "template": {name, language, parameters?}');
        } else if (typeof t === 'string') {
          if (!TEMPLATE_NAME.test(t)) add(['template'], 'template name: lowercase letters, digits and underscores');
          if (typeof b.language !== 'string' || !LANGUAGE.test(b.language)) {
            add(['language'], 'required with a template name: a language code such as en or en_US');
          }
        } else if (t && typeof t === 'object' && !Array.isArray(t)) {
          const o = t as Record<string, unknown>;
          if (typeof o.name !== 'string' || !TEMPLATE_NAME.test(o.name)) {
            add(['template', 'name'], 'required: the template name (lowercase letters, digits and underscores)');
          }
          if (typeof o.language !== 'string' || !LANGUAGE.test(o.language)) {
            add(['template', 'language'], 'required: a language code such as en or en_US');
          }
          const rest = templateObject.pick({ parameters: true, components: true }).safeParse(o);
          if (!rest.success) {
            for (const i of rest.error.issues) add(['template', ...(i.path as (string | number)[])], i.message);
          }
        }
      }
    },
    { when: () => true },
  );

export type WhatsappBody = z.infer<typeof whatsappBody>;

/** The template as the Cloud API takes it: plain parameters become one body component. */
export function templateFrom(b: WhatsappBody) {
  const t: TemplateObject =
    typeof b.template === 'string' ? { name: b.template, language: b.language!, parameters: b.parameters } : (b.template as TemplateObject);
  const components =
    t.components ??
    (t.parameters?.length ? [{ type: 'body', parameters: t.parameters.map((text) => ({ type: 'text', text })) }] : undefined);
  return { name: t.name, language: t.language, ...(components ? { components } : {}) };
}

export function zodDetails(error: z.ZodError) {
  return error.issues.map((i) => ({ field: i.path.join('.') || undefined, message: i.message }));
}
