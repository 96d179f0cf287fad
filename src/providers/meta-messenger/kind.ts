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

export const metaMessengerSettings = z
  .object({
    base_url: url.default('https://graph.facebook.com'),
    api_version: graphVersion.default(GRAPH_API_VERSION),
    page_id: graphId('page id'),
    ...messagingType,
    ...customerServiceWindow,
    rate_per_second: rate,
  })
  .strict()
  .superRefine(tagRequired);

export type MetaMessengerSettings = z.output<typeof metaMessengerSettings>;

export const metaMessengerKind: GatewayKindSpec = {
  kind: 'meta_messenger',
  label: 'Meta Messenger Send API',
  channels: ['messenger'],
  settings: metaMessengerSettings,
  secrets: { required: ['page_access_token'], optional: META_OPTIONAL_SECRETS },
  customerServiceWindow: holdsToCustomerWindow,
  // A Messenger channel sends as the gateway's page.
  defaultSender: (type, settings) => (type === 'messenger' ? (settings.page_id as string | undefined) : undefined),
};
