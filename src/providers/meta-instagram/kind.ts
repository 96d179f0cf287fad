import { z } from 'zod';
import type { GatewayKindSpec } from '../../core/gateway-kinds.js';
import { rate, url } from '../kind-fields.js';
import {
  GRAPH_API_VERSION,
  META_OPTIONAL_SECRETS,
  customerServiceWindow,
  holdsToCustomerWindow,
  graphId,
  graphVersion,
  messagingType,
  tagRequired,
} from '../meta-app/settings.js';

export const metaInstagramSettings = z
  .object({
    /** Unset: graph.facebook.com with page_id (Facebook Login), graph.instagram.com without (Instagram Login). */
    base_url: url.optional(),
    api_version: graphVersion.default(GRAPH_API_VERSION),
    ig_account_id: graphId('Instagram account id'),
    /** Facebook Login flow sends through the page; Instagram Login flow through the IG account. */
    page_id: z.string().regex(/^\d+$/).optional(),
    ...messagingType,
    ...customerServiceWindow,
    rate_per_second: rate,
  })
  .strict()
  .superRefine(tagRequired);

export type MetaInstagramSettings = z.output<typeof metaInstagramSettings>;

export const metaInstagramKind: GatewayKindSpec = {
  kind: 'meta_instagram',
  label: 'Meta Instagram Messaging',
  channels: ['instagram'],
  settings: metaInstagramSettings,
  secrets: { required: ['access_token'], optional: META_OPTIONAL_SECRETS },
  customerServiceWindow: holdsToCustomerWindow,
  // An Instagram channel sends as the gateway's Instagram account.
  defaultSender: (type, settings) =>
    type === 'instagram' ? (settings.ig_account_id as string | undefined) : undefined,
};
