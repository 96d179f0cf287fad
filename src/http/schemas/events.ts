import { z } from 'zod';
import { CHANNEL_TYPES } from '../../core/context.js';
import { EMAIL_FEEDBACK_EVENTS, ROUTE_EVENTS, STATUS_EVENTS, SUPPRESSION_EVENTS } from '../../core/event-types.js';
import { MESSAGE_STATUSES } from '../../core/statuses.js';
import { suppressionObject } from './suppressions.js';
import { storyRef } from './v1.js';

// The events msgd POSTs to partner endpoints (docs/webhooks-out.md), for the OpenAPI document's
// `webhooks` section. The bodies are built in src/core (messages.ts, message-status.ts, inbound.ts) and
// src/webhooks (replay.ts); test/v1/openapi-contract.test.ts holds real events to these.
// Objects are open: fields may be added to any event, and receivers ignore what they do not know.

const isoTime = z.string().describe('ISO 8601 UTC, e.g. 2026-11-22T10:00:00.000Z');
const channel = z.enum(CHANNEL_TYPES);
const status = z.enum(MESSAGE_STATUSES as [string, ...string[]]);
const money = z.object({ micro: z.number().int(), amount: z.string() });

const base = <T extends string>(types: readonly T[]) => ({
  id: z.string().describe('evt_…: the same on every retry of this event; use it to drop duplicates'),
  event: z.enum(types as unknown as [T, ...T[]]),
  created_at: isoTime,
});

export const messageReceivedEvent = z
  .object({
    ...base(['message.received']),
    channel,
    from: z.string().describe("the customer's address"),
    to: z.string().describe('your channel’s sender address that received it'),
    body: z.string().describe('the text the message shows ("" when none)'),
    message_id: z.string(),
    conversation_id: z.string(),
    media: z.array(z.record(z.string(), z.unknown())),
    contact: z.object({
      id: z.string(),
      name: z.string().nullable(),
      phone: z.string().nullable(),
      email: z.string().nullable(),
    }),
    received_at: isoTime.describe("when the customer sent it, by the provider's clock"),
    content: z
      .object({ kind: z.string(), reply_to_story: storyRef.optional() })
      .catchall(z.unknown())
      .describe('the whole content, as GET /v1/messages/{id} shows it; see docs/api.md "Message content"'),
  })
  .describe('An inbound message arrived on one of your channels.');

export const messageDeletedEvent = z
  .object({
    ...base(['message.deleted']),
    message_id: z.string(),
    channel,
    from: z.string().describe("the customer's address"),
    to: z.string().describe('your channel’s sender address that received it'),
    conversation_id: z.string().nullable(),
    provider_message_id: z.string().nullable().describe("the provider's id of the message (Meta's mid)"),
    deleted_at: isoTime.describe("when the customer unsent it, by the provider's clock"),
  })
  .describe(
    'The customer unsent (deleted) a message they had sent you (Messenger, Instagram): msgd has redacted its content; remove it from your inbox too.',
  );

export const messageStatusEvent = z
  .object({
    ...base(STATUS_EVENTS),
    message_id: z.string(),
    channel,
    to: z.string(),
    status,
    previous_status: status,
    provider_status: z.string().nullable().describe("the provider's own word for it"),
    error: z
      .object({ code: z.string().nullable(), message: z.string().nullable() })
      .nullable()
      .describe('on failures: the provider’s error'),
    occurred_at: isoTime,
  })
  .describe("An outbound message's status moved (it never moves backwards).");

export const emailFeedbackEvent = z
  .object({
    ...base(EMAIL_FEEDBACK_EVENTS),
    message_id: z.string(),
    channel,
    to: z.string(),
    status: status.describe("the message's status, which this event does not change"),
    provider_status: z.string().nullable(),
    email: z.string().nullable(),
    asm_group_id: z.number().int().optional().describe('the unsubscribe group, for group unsubscribes'),
    occurred_at: isoTime,
  })
  .describe('The recipient of an email marked it as spam, unsubscribed or resubscribed.');

export const messageReroutedEvent = z
  .object({
    ...base(ROUTE_EVENTS),
    message_id: z.string(),
    channel,
    from_channel_id: z.string().nullable().describe('the channel (GET /v1/channels) whose gateway did not take it'),
    channel_id: z.string().describe('the channel it goes out on now: the next fallback of its type'),
    position: z.number().int().describe("that channel's place in the order (1: the first fallback)"),
    provider: z.string().describe("that channel's provider"),
    sender: z.string().describe('the sender address it now goes out from'),
    reason: z
      .object({ code: z.string(), message: z.string() })
      .describe(
        'why it moved on: e.g. network_error (the gateway refused the connection), circuit_open (the gateway is failing), 20429 (rate limit), or a refusal about the sender or account',
      ),
    price: money.describe('what the message costs now: the price of the new route'),
    price_difference: money.describe('debited (positive) or refunded (negative) in the ledger with the move'),
    occurred_at: isoTime,
  })
  .describe(
    "An SMS or email message moved to the next gateway of its channel's order, because the one before certainly did not take it; its status stays queued until the new gateway takes it (message.sent).",
  );

export const suppressionEvent = z
  .object({
    ...base(SUPPRESSION_EVENTS),
    suppression: suppressionObject,
    deleted_by: z
      .string()
      .optional()
      .describe(
        "suppression.deleted: who removed it (token:…, user:…, operator:…, or the customer's message msg_… that opted back in)",
      ),
    consent_confirmed_by: z
      .string()
      .optional()
      .describe('suppression.deleted of a keyword opt-out: who said the customer consented again'),
  })
  .describe('A recipient was added to or removed from your suppression list (docs/suppressions.md).');

export const balanceLowEvent = z
  .object({
    ...base(['partner.balance_low']),
    partner_id: z.string(),
    balance: money,
    threshold: money,
  })
  .describe("A debit took the balance below the partner's low-balance threshold.");

export const webhookTestEvent = z
  .object({
    ...base(['webhook.test']),
    endpoint_id: z.string(),
    message: z.string(),
  })
  .describe('Sent by POST /v1/webhooks/{id}/test to that endpoint only.');

/** Each event type and the schema of its body, under the component name it is documented as. */
export const EVENT_SCHEMAS: [name: string, types: readonly string[], schema: z.ZodType][] = [
  ['MessageReceivedEvent', ['message.received'], messageReceivedEvent],
  ['MessageDeletedEvent', ['message.deleted'], messageDeletedEvent],
  ['MessageStatusEvent', STATUS_EVENTS, messageStatusEvent],
  ['MessageReroutedEvent', ROUTE_EVENTS, messageReroutedEvent],
  ['EmailFeedbackEvent', EMAIL_FEEDBACK_EVENTS, emailFeedbackEvent],
  ['SuppressionEvent', SUPPRESSION_EVENTS, suppressionEvent],
  ['BalanceLowEvent', ['partner.balance_low'], balanceLowEvent],
  ['WebhookTestEvent', ['webhook.test'], webhookTestEvent],
];
