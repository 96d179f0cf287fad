import { z } from 'zod';
import { CHANNEL_TYPES } from '../../core/context.js';
import { SUPPRESSION_REASONS } from '../../core/suppressions.js';
import { pageQuery } from './v1.js';

// /v1/suppressions and the suppression.* events (docs/suppressions.md).

const channel = z.enum(CHANNEL_TYPES, { error: `must be one of ${CHANNEL_TYPES.join(', ')}` });
const reason = z.enum(SUPPRESSION_REASONS, { error: `must be one of ${SUPPRESSION_REASONS.join(', ')}` });

/** The entry; inline in the events' schemas (the webhooks section has no shared components). */
export const suppressionObject = z.object({
  id: z.string().describe('sup_…'),
  channel,
  address: z
    .string()
    .describe('normalized: E.164 (sms, whatsapp), lowercase email address, PSID / IGSID (messenger, instagram)'),
  reason,
  sender: z
    .string()
    .nullable()
    .describe('the sender address it applies to (e.g. the number a STOP was sent to); null: every sender'),
  group_id: z.string().nullable().describe('the SendGrid unsubscribe group of a group_unsubscribe'),
  source: z
    .string()
    .describe('what it came from: msg_… (a message), pwh_… (a provider webhook), token:…, user:…, operator:…'),
  detail: z.string().nullable().describe("the provider's words, or the note given when it was added"),
  created_at: z.string().describe('ISO 8601 UTC: since when'),
});

export const suppressionOut = suppressionObject.meta({ id: 'Suppression' });

export const suppressionQuery = pageQuery.extend({
  channel: channel.optional(),
  reason: reason.optional(),
  address: z.string().max(320).optional().describe('the exact address (normalized for the channel when one is given)'),
});

// Addresses are checked per channel in the route (normalizeAddress), so the problem names the channel.
export const suppressionCreate = z.object({
  channel,
  address: z.string({ error: 'required: the recipient address' }).min(1, 'must not be empty').max(320),
  reason: z
    .enum(['manual', 'opt_out_keyword', 'hard_bounce', 'spam_report', 'unsubscribe'], {
      error: 'must be manual, opt_out_keyword, hard_bounce, spam_report or unsubscribe',
    })
    .default('manual')
    .describe('manual (default), or the reason of an opt-out imported from elsewhere'),
  sender: z
    .string()
    .max(320)
    .nullish()
    .describe('only for this sender address of yours (a number, page, from-address); omitted: every sender'),
  detail: z.string().max(500).nullish().describe('a note kept with it'),
});

export const suppressionDeleteQuery = z.object({
  consent_confirmed: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .optional()
    .describe(
      'true: you hold the customer’s renewed consent. Required to remove an opt-out the customer made by keyword (STOP); recorded in the audit log',
    ),
});
