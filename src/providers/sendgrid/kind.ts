import { createPublicKey } from 'node:crypto';
import { z } from 'zod';
import type { GatewayKindSpec } from '../../core/gateway-kinds.js';
import { rate, url } from '../kind-fields.js';

export const sendgridSettings = z
  .object({
    base_url: url.default('https://api.sendgrid.com'),
    rate_per_second: rate,
  })
  .strict();

export type SendgridSettings = z.output<typeof sendgridSettings>;

/** SendGrid shows its Event Webhook verification key as base64 SPKI DER; PEM is taken too. */
function ecPublicKeyProblem(value: string): string | null {
  const text = value.trim();
  try {
    const key = text.startsWith('-----BEGIN')
      ? createPublicKey({ key: text, format: 'pem' })
      : createPublicKey({ key: Buffer.from(text, 'base64'), format: 'der', type: 'spki' });
    if (key.asymmetricKeyType !== 'ec')
      return `expected an ECDSA public key, got ${key.asymmetricKeyType ?? 'another kind'}`;
    return null;
  } catch {
    return 'not a public key: paste the Verification Key from SendGrid (Settings > Mail Settings > Event Webhook > Signed Event Webhook), base64 or PEM';
  }
}

export const sendgridKind: GatewayKindSpec = {
  kind: 'sendgrid',
  label: 'SendGrid v3 Mail Send',
  channels: ['email'],
  settings: sendgridSettings,
  secrets: { required: ['api_key'], optional: ['webhook_public_key'] },
  secretChecks: { webhook_public_key: ecPublicKeyProblem },
};
