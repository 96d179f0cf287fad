import { randomBytes } from 'node:crypto';
import type { ProviderAdapter } from '../types.js';
import type { SandboxSettings } from './kind.js';

// No provider behind it: the delivery report is produced by the sandbox webhook path.
export const sandboxAdapter: ProviderAdapter<SandboxSettings> = {
  kind: 'sandbox',
  async send() {
    return {
      outcome: 'accepted',
      providerMessageId: `sbx_${randomBytes(12).toString('hex')}`,
      providerStatus: 'accepted',
    };
  },
};
