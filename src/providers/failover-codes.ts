import type { GatewayKind } from '../core/context.js';
import type { SendResult } from './types.js';

// Which refusals mean the provider certainly did not take the message, and which refusals are
// about the route (the account, its credentials, the sender) rather than the message or its
// recipient: the only ones another gateway may do better with (src/jobs/failover.ts). An
// invalid or unsubscribed number fails on every route, so it never moves on.

/**
 * Answers the providers document as "not accepted, try again": a rate limit (Twilio 20429 /
 * HTTP 429, SendGrid 429), the service unavailable (503) or the request timed out on their side
 * (408). A 500, 502 or 504 is left out: a proxy or a crash after the provider stored the
 * message may answer so, and another gateway could then send it a second time.
 */
const NOT_ACCEPTED: Partial<Record<GatewayKind, ReadonlySet<string>>> = {
  twilio: new Set(['20429', 'http_429', '20503', 'http_503', 'http_408', '408']),
  sendgrid: new Set(['sendgrid_429', 'sendgrid_503', 'sendgrid_408']),
  // An SMTP 421 closes the session before the mail is taken; 451 is the server's own local
  // error; 454 refuses TLS; 503 is a bad command sequence: none took responsibility for the mail.
  smtp: new Set(['smtp_421', 'smtp_451', 'smtp_454', 'smtp_503']),
};

/** Permanent refusals about the route: the account, its credentials or permissions, the sender. */
const ROUTE_ERRORS: Partial<Record<GatewayKind, ReadonlySet<string>>> = {
  twilio: new Set([
    '20003', // authenticate: the account's credentials
    'http_401',
    'http_403',
    '21212', // invalid From number
    '21606', // the From number cannot send SMS
    '21659', // the From is not a Twilio number of this account
    '21660', // the From does not belong to the account
    '21408', // this account has no permission for the To number's region
    '21612', // cannot route from this From to the To
  ]),
  sendgrid: new Set(['sendgrid_401', 'sendgrid_403']), // the API key; a from address not verified for the account
  smtp: new Set(['smtp_auth', 'smtp_noauth', 'smtp_config', 'smtp_requiretls', 'smtp_530', 'smtp_534', 'smtp_535']),
};

/**
 * Route refusals that depend on the recipient: this account cannot reach this number (its
 * region, the pairing of sender and recipient), while it reaches others. Another gateway may
 * take the message, but the refusal says nothing about the gateway's health, so its circuit
 * counts it as a working gateway: a batch to a region the account is not enabled for must not
 * hold everyone else's messages.
 */
const RECIPIENT_ROUTE_ERRORS: Partial<Record<GatewayKind, ReadonlySet<string>>> = {
  twilio: new Set(['21408', '21612']),
};

/** Refusals msgd makes itself before calling, about the gateway's setup: another gateway is set up differently. */
const SETUP_ERRORS = new Set(['missing_secret', 'unsupported_content']);

export type FailoverVerdict =
  /** The provider took it. */
  | 'accepted'
  /** Certainly not taken, and not about this message: another gateway may take it. */
  | 'not_accepted'
  /** Refused for good, for a reason of this route: another gateway may take it. */
  | 'route_error'
  /** May have been taken (a timeout, a reset after sending, an unclear 5xx): never sent elsewhere. */
  | 'maybe'
  /**
   * Not taken for now because of the recipient (a relay greylisting it): retried on this
   * gateway, whose health it says nothing about; every route would defer it alike.
   */
  | 'recipient_deferred'
  /** Refused for good because of the message or its recipient: every route would refuse it. */
  | 'message_error';

export function failoverVerdict(kind: GatewayKind, r: SendResult): FailoverVerdict {
  if (r.outcome === 'accepted') return 'accepted';
  if (r.outcome === 'failed') {
    if (SETUP_ERRORS.has(r.code) || ROUTE_ERRORS[kind]?.has(r.code)) return 'route_error';
    return 'message_error';
  }
  if (r.maybeDelivered) return 'maybe';
  if (r.recipient) return 'recipient_deferred';
  // No answer at all, and nothing left msgd (refused, DNS, unreachable, TLS, a relay that never greeted).
  if (r.code === 'network_error' || r.code === 'timeout') return 'not_accepted';
  if (r.code && NOT_ACCEPTED[kind]?.has(r.code)) return 'not_accepted';
  return 'maybe';
}

/**
 * Whether the outcome speaks against the gateway's health (its circuit breaker counts it). A
 * refusal about the message or its recipient is the answer of a working gateway, and so is a
 * route refusal that depends on the recipient.
 */
export function countsAgainstGateway(
  kind: GatewayKind,
  r: SendResult,
  v: FailoverVerdict = failoverVerdict(kind, r),
): boolean {
  if (v === 'route_error' && r.outcome === 'failed' && RECIPIENT_ROUTE_ERRORS[kind]?.has(r.code)) return false;
  return v === 'not_accepted' || v === 'route_error' || v === 'maybe';
}
