import type { SendResult } from './types.js';

// Refusals decided before any provider call: configuration the operator must fix.

export function missingSecret(name: string): SendResult {
  return { outcome: 'failed', code: 'missing_secret', message: `gateway secret ${name} is not set` };
}

export function unsupported(provider: string, content: string): SendResult {
  return { outcome: 'failed', code: 'unsupported_content', message: `${provider} cannot send ${content} content` };
}
