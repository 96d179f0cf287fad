import type { GatewayKind, GatewayKindRegistry, GatewayKindSpec } from '../core/gateway-kinds.js';
import { metaInstagramKind, type MetaInstagramSettings } from './meta-instagram/kind.js';
import { metaMessengerKind, type MetaMessengerSettings } from './meta-messenger/kind.js';
import { sandboxKind, type SandboxSettings } from './sandbox/kind.js';
import { sendgridKind, type SendgridSettings } from './sendgrid/kind.js';
import { smtpKind, type SmtpSettings } from './smtp/kind.js';
import { twilioKind, type TwilioSettings } from './twilio/kind.js';
import { whatsappCloudKind, type WhatsappCloudSettings } from './whatsapp-cloud/kind.js';

// The gateway kinds msgd holds, one file each (src/providers/<kind>/kind.ts), gathered into the
// registry core is given in its context: runtime.ts and msgctl put it into CoreCtx.

/** Each kind's settings as stored: its schema's output (validated, defaults applied, when written). */
export interface KindSettings {
  whatsapp_cloud: WhatsappCloudSettings;
  meta_messenger: MetaMessengerSettings;
  meta_instagram: MetaInstagramSettings;
  twilio: TwilioSettings;
  sendgrid: SendgridSettings;
  smtp: SmtpSettings;
  sandbox: SandboxSettings;
}

const SPECS: Record<GatewayKind, GatewayKindSpec> = {
  whatsapp_cloud: whatsappCloudKind,
  meta_messenger: metaMessengerKind,
  meta_instagram: metaInstagramKind,
  twilio: twilioKind,
  sendgrid: sendgridKind,
  smtp: smtpKind,
  sandbox: sandboxKind,
};

export const gatewayKinds: GatewayKindRegistry = {
  specs: Object.values(SPECS),
  has: (kind: string): kind is GatewayKind => Object.hasOwn(SPECS, kind),
  get(kind) {
    if (!Object.hasOwn(SPECS, kind)) throw new Error(`unknown gateway kind ${JSON.stringify(kind)}`);
    return SPECS[kind];
  },
};
