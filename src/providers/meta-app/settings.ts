import { z } from 'zod';
import type { GatewayKind } from '../../core/gateway-kinds.js';

// What the three kinds that call Meta's Graph API share: the API version, the customer-service
// window switch and, for Messenger and Instagram, the Send API's messaging_type.

/**
 * The Graph API version a Meta gateway calls unless its `api_version` says otherwise: the one
 * Meta's docs use (FACTS A1). Meta keeps each version for about two years; a gateway stores the
 * version it was created with, and `msgctl gateway update <gw> --set api_version=vNN.0` moves it.
 */
export const GRAPH_API_VERSION = 'v26.0';

/** The kinds that call Meta's Graph API: one app secret signs their webhooks, one api_version each. */
export const META_KINDS: readonly GatewayKind[] = ['whatsapp_cloud', 'meta_messenger', 'meta_instagram'];

export const graphVersion = z
  .string()
  .regex(/^v\d+\.\d+$/, `expected a Graph API version such as ${GRAPH_API_VERSION}`);

/** A Graph object id (phone number, page, Instagram account): digits. */
export const graphId = (what: string) => z.string().regex(/^\d+$/, `expected the numeric ${what}`);

/**
 * Meta's 24-hour customer-service window (src/core/customer-window.ts): msgd refuses a free-form
 * message outside it unless this is `off` (for a business number or page whose inbound messages
 * go elsewhere, so msgd cannot see the window).
 */
export const customerServiceWindow = {
  customer_service_window: z.enum(['enforce', 'off']).optional(),
};

/**
 * Whether a Meta gateway is held to the window: enforced unless the operator turned it off (for
 * operators whose inbound messages reach the customer elsewhere, so msgd cannot know the
 * window); a tagged Messenger or Instagram send (messaging_type MESSAGE_TAG) goes outside it.
 */
export function holdsToCustomerWindow(settings: Record<string, unknown>): boolean {
  if (settings.customer_service_window === 'off') return false;
  return settings.messaging_type !== 'MESSAGE_TAG';
}

/** The Send API's messaging_type (Messenger and Instagram), and the tag a MESSAGE_TAG send needs. */
export const messagingType = {
  messaging_type: z.enum(['RESPONSE', 'UPDATE', 'MESSAGE_TAG']).default('RESPONSE'),
  /** Sent only with MESSAGE_TAG: Meta's message tag, e.g. HUMAN_AGENT or ACCOUNT_UPDATE. */
  tag: z
    .string()
    .regex(/^[A-Z][A-Z_]*$/, 'expected a Meta message tag such as HUMAN_AGENT or ACCOUNT_UPDATE')
    .optional(),
};

/** Graph refuses every MESSAGE_TAG send without a tag: refuse the setting instead. */
export function tagRequired(s: { messaging_type: string; tag?: string }, ctx: z.RefinementCtx) {
  if (s.messaging_type === 'MESSAGE_TAG' && !s.tag) {
    ctx.addIssue({
      code: 'custom',
      path: ['tag'],
      message: 'messaging_type MESSAGE_TAG needs a tag, e.g. tag=HUMAN_AGENT: Meta refuses tagged messages without one',
    });
  }
}

/** The secrets every Meta kind may hold beside its token: the app secret signs webhooks, verify_token answers the subscription check. */
export const META_OPTIONAL_SECRETS = ['app_secret', 'verify_token'] as const;
