// Outbound message statuses and the one rule about them: a status only moves forward.
// Provider events arrive late, twice and out of order; a backward event is recorded in
// history (ignored=1) but does not change the message. An inbound message is `received` and
// stays so: a customer's unsend is not a status but messages.deleted_at (src/core/message-status.ts markDeleted).

export type MessageStatus =
  | 'scheduled'
  | 'queued'
  | 'sending'
  | 'sent'
  | 'delivered'
  | 'read'
  | 'failed'
  | 'undelivered'
  | 'deferred'
  | 'bounced'
  | 'dropped'
  | 'opened'
  | 'clicked'
  | 'canceled'
  | 'received';

// Rank along the happy path. Terminal failures outrank in-flight states but are themselves
// final except that a later proof of success (delivered/read/opened/clicked) wins over them.
// An email that SendGrid has taken (sent) and the receiving server put off (deferred) is
// still on its way; it is then delivered or bounced. Email engagement (opened, clicked) sits
// above delivered. A scheduled message waits for its send_at, debited; it is released into
// the queue at that time (src/core/scheduled.ts) or canceled before it, refunded. Canceled is
// final: it never reached a provider, so no report can move it.
export const STATUS_RANK: Readonly<Record<MessageStatus, number>> = {
  scheduled: 0,
  queued: 0,
  sending: 1,
  sent: 2,
  deferred: 3,
  delivered: 5,
  opened: 6,
  read: 6,
  clicked: 7,
  failed: 4,
  undelivered: 4,
  bounced: 4,
  dropped: 4,
  canceled: 4,
  received: 0,
};

/** Every status a message can have, for filters and documents. */
export const MESSAGE_STATUSES = Object.keys(STATUS_RANK) as MessageStatus[];

export const FAILURE_STATUSES: readonly MessageStatus[] = ['failed', 'undelivered', 'bounced', 'dropped'];
const FAILURES = new Set<MessageStatus>(FAILURE_STATUSES);

export function isFailure(s: MessageStatus): boolean {
  return FAILURES.has(s);
}

/** May a message in status `from` move to `to`? */
export function canAdvance(from: MessageStatus, to: MessageStatus): boolean {
  if (from === to) return false;
  if (from === 'received' || from === 'canceled') return false;
  // An email the receiving server accepted (delivered) can still bounce later: an
  // asynchronous bounce. Once bounced, a late 'delivered' is the earlier event arriving out
  // of order; only engagement (opened, clicked) proves it arrived after all.
  if (from === 'delivered' && to === 'bounced') return true;
  if (from === 'bounced') return STATUS_RANK[to] > STATUS_RANK.delivered;
  // Nothing moves a message out of a failure except proof it arrived.
  if (FAILURES.has(from)) return STATUS_RANK[to] >= STATUS_RANK.delivered;
  // A failure arriving after delivery proof is late noise.
  if (FAILURES.has(to)) return STATUS_RANK[from] < STATUS_RANK.delivered;
  return STATUS_RANK[to] > STATUS_RANK[from];
}
