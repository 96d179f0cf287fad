import type { SendResult } from './types.js';

// Refusals decided before any provider call: configuration the operator must fix.

export function missingSecret(name: string): SendResult {
  return { outcome: 'failed', code: 'missing_secret', message: `gateway secret ${name} is not set` };
}

export function unsupported(provider: string, content: string): SendResult {
  return { outcome: 'failed', code: 'unsupported_content', message: `${provider} cannot send ${content} content` };
}

/**
 * A provider's error text with the gateway's secrets taken out, before it is stored and shown
 * to the partner (`error.message` in /v1) and the operator. Providers do not echo credentials,
 * but a proxy, a misconfigured base_url or a debugging endpoint may: every secret value, its
 * base64 (Basic auth carries `user:secret`), and any `Basic`/`Bearer` credential are replaced.
 */
export function redactSecrets(text: string, secrets: Record<string, string | undefined>): string {
  let out = text.replace(/\b(Basic|Bearer)\s+[A-Za-z0-9+/=._~-]{8,}/gi, '$1 [redacted]');
  for (const value of Object.values(secrets)) {
    if (typeof value !== 'string' || value.length < 6) continue;
    out = out.split(value).join('[redacted]');
  }
  return out;
}
