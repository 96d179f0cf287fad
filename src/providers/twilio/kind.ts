import { z } from 'zod';
import type { GatewayKindSpec } from '../../core/gateway-kinds.js';
import { rate, url } from '../kind-fields.js';

export const twilioSettings = z
  .object({
    base_url: url.default('https://api.twilio.com'),
    account_sid: z.string().regex(/^AC[0-9a-zA-Z]{1,64}$/, 'expected an account SID starting with AC'),
    messaging_service_sid: z
      .string()
      .regex(/^MG[0-9a-zA-Z]+$/)
      .optional(),
    /** Send with an API key (SK…, with the secret api_key_secret) instead of the auth token, as Twilio recommends. */
    api_key_sid: z
      .string()
      .regex(/^SK[0-9a-zA-Z]{1,64}$/, 'expected an API key SID starting with SK')
      .optional(),
    rate_per_second: rate,
  })
  .strict();

export type TwilioSettings = z.output<typeof twilioSettings>;

export const twilioKind: GatewayKindSpec = {
  kind: 'twilio',
  label: 'Twilio Programmable Messaging',
  channels: ['sms'],
  settings: twilioSettings,
  // auth_token stays required with an API key: Twilio signs its webhooks with it.
  secrets: { required: ['auth_token'], optional: ['api_key_secret'] },
  pairs: [{ setting: 'api_key_sid', secret: 'api_key_secret', needs: 'secret' }],
};
