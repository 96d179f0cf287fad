// The event types partners can receive; endpoints subscribe to them and events carry one.

export type EventType =
  | 'message.received'
  | 'message.sent'
  | 'message.delivered'
  | 'message.read'
  | 'message.failed'
  | 'message.undelivered'
  | 'message.bounced'
  | 'message.opened'
  | 'message.clicked'
  | 'message.deferred'
  | 'message.dropped'
  | 'message.complained'
  | 'message.unsubscribed'
  | 'message.resubscribed'
  | 'partner.balance_low'
  | 'webhook.test';

export const EVENT_TYPES: readonly EventType[] = [
  'message.received',
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
  'message.complained',
  'message.unsubscribed',
  'message.resubscribed',
  'partner.balance_low',
  'webhook.test',
];
