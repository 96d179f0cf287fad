import type { GatewayKind } from '../core/context.js';
import type { ProviderAdapter } from './types.js';
import { whatsappCloudAdapter } from './whatsapp-cloud/send.js';
import { metaMessengerAdapter } from './meta-messenger/send.js';
import { metaInstagramAdapter } from './meta-instagram/send.js';
import { twilioAdapter } from './twilio/send.js';
import { sendgridAdapter } from './sendgrid/send.js';
import { smtpAdapter } from './smtp/send.js';
import { sandboxAdapter } from './sandbox/send.js';

const ADAPTERS: Record<GatewayKind, ProviderAdapter> = {
  whatsapp_cloud: whatsappCloudAdapter,
  meta_messenger: metaMessengerAdapter,
  meta_instagram: metaInstagramAdapter,
  twilio: twilioAdapter,
  sendgrid: sendgridAdapter,
  smtp: smtpAdapter,
  sandbox: sandboxAdapter,
};

export function getAdapter(kind: GatewayKind): ProviderAdapter {
  const adapter = Object.prototype.hasOwnProperty.call(ADAPTERS, kind) ? ADAPTERS[kind] : undefined;
  if (!adapter) throw new Error(`no provider adapter for gateway kind ${JSON.stringify(kind)}`);
  return adapter;
}

/** Releases pooled connections (SMTP sessions); the HTTP dispatcher belongs to the caller. */
export async function closeAdapters(): Promise<void> {
  await Promise.all(Object.values(ADAPTERS).map((a) => a.close?.()));
}
