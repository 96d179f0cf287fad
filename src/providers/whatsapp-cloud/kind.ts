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
} from '../meta-app/settings.js';

export const whatsappCloudSettings = z
  .object({
    base_url: url.default('https://graph.facebook.com'),
    api_version: graphVersion.default(GRAPH_API_VERSION),
    phone_number_id: graphId('phone number id'),
    /** The WhatsApp Business Account: its template catalogue is read and checked against (whatsapp-templates.ts). */
    waba_id: z.string().regex(/^\d+$/, 'expected the numeric WhatsApp Business Account id').optional(),
    ...customerServiceWindow,
    rate_per_second: rate,
  })
  .strict();

export type WhatsappCloudSettings = z.output<typeof whatsappCloudSettings>;

export const whatsappCloudKind: GatewayKindSpec = {
  kind: 'whatsapp_cloud',
  label: 'Meta WhatsApp Cloud API',
  channels: ['whatsapp'],
  settings: whatsappCloudSettings,
  secrets: { required: ['access_token'], optional: META_OPTIONAL_SECRETS },
  customerServiceWindow: holdsToCustomerWindow,
};
