import type { GatewayKind } from '../core/context.js';
import type { KindSettings } from './kinds.js';
import type { ProviderAdapter } from './types.js';
import { whatsappCloudAdapter } from './whatsapp-cloud/send.js';
import { metaMessengerAdapter } from './meta-messenger/send.js';
import { metaInstagramAdapter } from './meta-instagram/send.js';
import { twilioAdapter } from './twilio/send.js';
import { sendgridAdapter } from './sendgrid/send.js';
import { smtpAdapter } from './smtp/send.js';
import { sandboxAdapter } from './sandbox/send.js';

const ADAPTERS: { [K in GatewayKind]: ProviderAdapter<KindSettings[K]> } = {
  whatsapp_cloud: whatsappCloudAdapter,
  meta_messenger: metaMessengerAdapter,
  meta_instagram: metaInstagramAdapter,
  twilio: twilioAdapter,
  sendgrid: sendgridAdapter,
  smtp: smtpAdapter,
  sandbox: sandboxAdapter,
};

/**
 * The adapter of a gateway's kind. The gateway handed to it carries its settings as stored,
 * which are that kind's (its schema checked them when they were written), so the adapter reads
 * them typed.
 */
export function getAdapter(kind: GatewayKind): ProviderAdapter {
  const adapter = Object.prototype.hasOwnProperty.call(ADAPTERS, kind) ? ADAPTERS[kind] : undefined;
  if (!adapter) throw new Error(`no provider adapter for gateway kind ${JSON.stringify(kind)}`);
  return adapter;
}

/** Releases pooled connections (SMTP sessions); the HTTP dispatcher belongs to the caller. */
export async function closeAdapters(): Promise<void> {
  await Promise.all(Object.values(ADAPTERS).map((a) => a.close?.()));
}
