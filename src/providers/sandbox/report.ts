import { createHash } from 'node:crypto';
import { callProvider, isResponse, truncate } from '../http.js';
import type { GatewayRuntime, SendContext } from '../types.js';
import { SANDBOX_SIGNATURE_HEADER, sandboxBody, sandboxTimestamp, signSandbox } from './webhook.js';

// The sandbox's delivery report: what a real provider's status callback does, done by msgd
// itself after the gateway's delivery_delay_ms. It is posted, signed, to msgd's own inbound
// endpoint, so a sandbox message travels the same path as a real one.

/** The job that posts a sandbox delivery report (queued by the sandbox adapter's afterAccepted). */
export const SANDBOX_REPORT_JOB = 'sandbox.report';

/** A sandbox.report job's payload. */
export interface SandboxReportPayload {
  gateway_id: string;
  provider_message_id: string;
  status: string;
}

export interface SandboxReport {
  providerMessageId: string;
  status: string;
}

export type SandboxReportOutcome =
  | { outcome: 'delivered' }
  /** Worth trying again: msgd not listening yet, an answer other than 2xx, no address reachable. */
  | { outcome: 'retry'; message: string }
  /** Never deliverable: the gateway cannot sign it. */
  | { outcome: 'failed'; message: string };

/**
 * Posts one report to the first of `bases` (msgd's public URL, then its own listening
 * address) that answers: the public URL may not loop back from inside.
 */
export async function postSandboxReport(
  gw: GatewayRuntime,
  report: SandboxReport,
  bases: string[],
  send: SendContext,
): Promise<SandboxReportOutcome> {
  const secret = gw.secrets.signing_secret;
  if (!secret) return { outcome: 'failed', message: `sandbox gateway ${gw.name} has no signing_secret` };
  if (bases.length === 0) return { outcome: 'retry', message: 'msgd is not listening yet' };
  // The same report always carries the same event id, so a repeat is dropped as a duplicate.
  const id = `sbx_${createHash('sha256').update(`${report.providerMessageId}:${report.status}`).digest('hex').slice(0, 24)}`;
  // Seconds with milliseconds: whole seconds would put a report made at 12:00:00.700 before a
  // send recorded at 12:00:00.400, and the message would read delivered before it was sent.
  const body = sandboxBody([
    { id, message_id: report.providerMessageId, status: report.status, timestamp: sandboxTimestamp(send.now()) },
  ]);
  let problem = '';
  for (const base of bases) {
    const res = await callProvider(send, {
      url: `${base}/api/webhook.php?gateway=${encodeURIComponent(gw.id)}`,
      headers: { 'content-type': 'application/json', [SANDBOX_SIGNATURE_HEADER]: signSandbox(secret, body) },
      body,
    });
    if (isResponse(res)) {
      if (res.status >= 200 && res.status < 300) return { outcome: 'delivered' };
      return {
        outcome: 'retry',
        message: `POST ${base}/api/webhook.php answered ${res.status}: ${truncate(res.text)}`,
      };
    }
    problem += `${base}: ${res.message}; `;
  }
  return { outcome: 'retry', message: `sandbox report not delivered: ${problem}` };
}
