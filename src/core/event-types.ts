// The event types partners can receive; endpoints subscribe to them and events carry one.
// Grouped by the body they carry, so the OpenAPI schemas (src/http/schemas/events.ts) name
// the same groups rather than a second list.

/** Events about an outbound message's status moving. */
export const STATUS_EVENTS = [
  'message.sent',
  'message.delivered',
  'message.read',
  'message.failed',
  'message.undelivered',
  'message.bounced',
  'message.opened',
  'message.clicked',
  'message.deferred',
  'message.dropped',
  'message.canceled',
] as const;

/** A recipient's feedback on an email, which leaves the message's status as it is. */
export const EMAIL_FEEDBACK_EVENTS = ['message.complained', 'message.unsubscribed', 'message.resubscribed'] as const;

/** An outbound message moved to the next gateway of its channel's order (SMS, email); its status stays. */
export const ROUTE_EVENTS = ['message.rerouted'] as const;

/** A recipient added to or removed from the partner's suppression list (src/core/suppressions.ts). */
export const SUPPRESSION_EVENTS = ['suppression.created', 'suppression.deleted'] as const;

export const EVENT_TYPES = [
  'message.received',
  'message.deleted',
  ...STATUS_EVENTS,
  ...ROUTE_EVENTS,
  ...EMAIL_FEEDBACK_EVENTS,
  ...SUPPRESSION_EVENTS,
  'partner.balance_low',
  'webhook.test',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];
