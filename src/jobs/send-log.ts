import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import { FailureLog } from '../lib/failure-log.js';
import type { SendResult } from '../providers/types.js';
import type { Job } from '../queue/queue.js';

// The operator's view of send attempts at info: each failed or retried attempt with its
// provider, code, attempt and next try, summed up per gateway while a gateway keeps failing
// (src/lib/failure-log.ts), and a line when it works again.

export type SendAttemptLog = (
  gw: { id: string; name: string; kind: string },
  messageId: string,
  job: Pick<Job, 'attempts' | 'maxAttempts'>,
  result: SendResult,
) => void;

export function sendAttemptLog(logger: Logger, config: Config): SendAttemptLog {
  const log = new FailureLog(logger, { what: 'send attempts' });
  return (gw, messageId, job, result) => {
    if (result.outcome === 'accepted') return log.success(gw.id);
    const fields: Record<string, unknown> = {
      gateway: gw.name,
      gatewayId: gw.id,
      provider: gw.kind,
      messageId,
      attempt: job.attempts,
      maxAttempts: job.maxAttempts,
      error: result.message,
    };
    const code = result.code ?? (result.outcome === 'retry' ? 'retry' : 'failed');
    if (result.outcome === 'failed') {
      log.failure(gw.id, code, fields, 'send failed: the provider refused the message (failed and refunded)');
      return;
    }
    if (job.attempts >= job.maxAttempts) {
      log.failure(gw.id, code, fields, 'send attempt failed, the last one: the message fails and is refunded');
      return;
    }
    // The worker draws the delay at random below this ceiling (full jitter), or waits at least
    // the provider's Retry-After.
    const ceiling = Math.min(config.jobs.backoffCapMs, config.jobs.backoffBaseMs * 2 ** Math.min(job.attempts - 1, 30));
    fields.nextTryWithinS = Math.ceil(Math.max(ceiling, result.retryAfterMs ?? 0) / 1000);
    log.failure(gw.id, code, fields, 'send attempt failed: retrying');
  };
}
