import { randomBytes } from 'node:crypto';
import type { ProviderAdapter } from '../types.js';
import type { SandboxSettings } from './kind.js';
import { SANDBOX_REPORT_JOB, type SandboxReportPayload } from './report.js';

// No provider behind it: the delivery report is produced by the sandbox webhook path, from a
// sandbox.report job due the gateway's delivery_delay_ms (default 300 ms) after each send.
export const sandboxAdapter: ProviderAdapter<SandboxSettings> = {
  kind: 'sandbox',
  async send() {
    return {
      outcome: 'accepted',
      providerMessageId: `sbx_${randomBytes(12).toString('hex')}`,
      providerStatus: 'accepted',
    };
  },
  afterAccepted(gw, providerMessageId, now) {
    const payload: SandboxReportPayload = {
      gateway_id: gw.id,
      provider_message_id: providerMessageId,
      status: 'delivered',
    };
    return { kind: SANDBOX_REPORT_JOB, payload, runAt: now + Number(gw.settings.delivery_delay_ms ?? 300) };
  },
};
