import type { SendResult } from './types.js';

// Refusals decided before any provider call: configuration the operator must fix.

export function missingSecret(name: string): SendResult {
  return { outcome: 'failed', code: 'missing_secret', message: `gateway secret ${name} is not set` };
}

export function unsupported(provider: string, content: string): SendResult {
  return { outcome: 'failed', code: 'unsupported_content', message: `${provider} cannot send ${content} content` };
}

/** Secrets that are not credentials: a word like "hello123" must not be blanked out of every error. */
const NOT_CREDENTIALS = new Set(['verify_token']);

/**
 * A provider's error text with the gateway's credentials taken out, before it is stored and
 * shown to the partner (`error.message` in /v1) and the operator. Providers do not echo them,
 * but a proxy, a misconfigured base_url or a debugging endpoint may: every credential of 6 or
 * more characters and its base64, and any `Basic`/`Bearer` credential (a token with a digit in
 * it, so "Basic authentication" stays as it is), are replaced.
 */
export function redactSecrets(text: string, secrets: Record<string, string | undefined>): string {
  let out = text.replace(/\b(Basic|Bearer)\s+(?=[A-Za-z+/=._~-]*\d)[A-Za-z0-9+/=._~-]{8,}/gi, '$1 [redacted]');
  for (const [name, value] of Object.entries(secrets)) {
    if (NOT_CREDENTIALS.has(name) || typeof value !== 'string' || value.length < 6) continue;
    const b64 = Buffer.from(value).toString('base64');
    for (const form of [value, b64, b64.replace(/=+$/, '')]) out = out.split(form).join('[redacted]');
  }
  return out;
}
