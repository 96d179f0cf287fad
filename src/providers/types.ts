import type { Dispatcher } from 'undici';
import type { ChannelType, GatewayKind } from '../core/context.js';
import type { SuppressionSignal } from '../core/suppressions.js';

/**
 * A gateway's settings as stored: its kind's settings type (src/providers/<kind>/kind.ts), the
 * output of that kind's schema, which checked them when they were written.
 */
export type StoredSettings = Record<string, unknown>;

/**
 * A gateway as the provider layer sees it: the only place secrets are opened. An adapter reads
 * it with its own kind's settings type (`GatewayRuntime<TwilioSettings>`).
 */
export interface GatewayRuntime<S extends object = StoredSettings> {
  id: string;
  kind: GatewayKind;
  name: string;
  settings: S;
  secrets: Record<string, string>;
}

export type MessageContent =
  | { kind: 'text'; text: string }
  | {
      kind: 'template';
      template: {
        name: string;
        language: string;
        /** WhatsApp template components exactly as the Cloud API takes them. */
        components?: unknown[];
      };
    }
  | { kind: 'email'; subject: string; html?: string; text?: string; fromName?: string; replyTo?: string };

export interface OutboundMessage {
  /** msgd's message id (msg_...): carried to the provider where it allows (custom_args, headers). */
  id: string;
  channel: ChannelType;
  to: string;
  /** The channel's sender address (E.164 number, page id, IG account id, from-address). */
  from: string;
  content: MessageContent;
}

export interface SendContext {
  /** Keep-alive HTTP dispatcher shared by all adapters (undici Agent/Pool). */
  dispatcher: Dispatcher;
  timeoutMs: number;
  /** msgd's public base URL (config server.publicUrl), for provider status callbacks; null if unset. */
  publicUrl: string | null;
  now(): number;
}

export type SendResult =
  /**
   * The provider took the message; its id is how later webhooks find it, unless
   * namedInReports says every one of those reports carries msgd's own id (Twilio's
   * StatusCallback URL names the message) or that there will be none (SMTP): the id is then
   * stored without an entry in the provider-id index, one random index page fewer per settled
   * send. SendGrid's custom_args are not enough: FACTS C2's fixture has a click event without them.
   */
  | { outcome: 'accepted'; providerMessageId: string; providerStatus?: string; namedInReports?: boolean }
  /** Try again later: rate limit (with the provider's hint), 5xx, timeout, network error. */
  | {
      outcome: 'retry';
      retryAfterMs?: number;
      code?: string;
      message: string;
      /**
       * The request may have reached the provider and been accepted (a timeout or reset after
       * it was sent, a 2xx without a usable answer): a retry may send the message twice.
       */
      maybeDelivered?: boolean;
      /**
       * The deferral is about this recipient, not the provider (an SMTP 4xx reply to RCPT TO:
       * greylisting, a full mailbox): the gateway answered as a working one does.
       */
      recipient?: boolean;
    }
  /**
   * Permanent: the provider refused this message; no retry will help. `suppress`: the refusal
   * says the recipient must not be sent to again (opted out, address does not exist).
   */
  | { outcome: 'failed'; code: string; message: string; suppress?: SuppressionSignal };

/** The connections a gateway's calls share: msgd holds calls beyond them itself (src/jobs/call-slots.ts). */
export interface CallPool {
  /** The same for every gateway whose calls share these connections (an HTTP origin). */
  key: string;
  /** How many there are; unset: the HTTP client's per origin (dispatch.connectionsPerOrigin). */
  size?: number;
}

/** A job a provider asks msgd to queue (its kind is the provider's, with a handler registered for it). */
export interface FollowUpJob {
  kind: string;
  /** Anything JSON-serialisable. */
  payload: unknown;
  /** ms since epoch. */
  runAt: number;
}

/** How one kind sends: it reads its own kind's settings (S). */
export interface ProviderAdapter<S extends object = StoredSettings> {
  kind: GatewayKind;
  send(gw: GatewayRuntime<S>, msg: OutboundMessage, ctx: SendContext): Promise<SendResult>;
  /**
   * Work to queue once a message this gateway accepted is recorded as sent, in the same
   * transaction (the sandbox's own delivery report). Unset or null: none.
   */
  afterAccepted?(gw: GatewayRuntime<S>, providerMessageId: string, now: number): FollowUpJob | null;
  /** The connections its calls use; unset: none shared with another gateway (no network). */
  callPool?(gw: GatewayRuntime<S>): CallPool;
  close?(): Promise<void>;
}
